#include "validate/gemm_sweep.h"

#include <algorithm>
#include <cctype>

#include "config/json_reader.h"

namespace trainsim::validate {

namespace {

using config::Json;
using config::ObjectReader;

// "bf16xbf16->bf16" -> bf16; FP8 only with both inputs e4m3 (Transformer Engine's forward
// format); false for columns trainsim does not model.
bool column_dtype(const std::string& column, sim::DataType& out) {
  if (column == "bf16xbf16->bf16" || column == "bf16") out = sim::DataType::kBf16;
  else if (column == "f16xf16->f16" || column == "fp16") out = sim::DataType::kFp16;
  else if (column == "f32xf32->f32" || column == "tf32") out = sim::DataType::kTf32;
  else if (column == "f8e4m3fnxf8e4m3fn->bf16" || column == "fp8_e4m3fn" || column == "fp8") out = sim::DataType::kFp8;
  else return false;
  return true;
}

bool is_column(const std::string& key) { return key.find("->") != std::string::npos; }

std::string normalized(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

}  // namespace

bool same_gpu(const std::string& measured, const std::string& preset, const std::string& spec_name) {
  const std::string m = normalized(measured);
  if (m.empty()) return false;
  return normalized(preset).rfind(m, 0) == 0 || normalized(spec_name).rfind(m, 0) == 0;
}

std::vector<GemmTable> read_gemm_sweep(const std::string& file) {
  const Json doc = config::read_json_file(file);
  if (!doc.is_array() || doc.empty()) {
    throw InputError(file, "/", "expected a GEMM measurement file: a non-empty array of tables {\"id\", \"source\", \"rows\"}");
  }
  std::vector<GemmTable> tables;
  for (std::size_t t = 0; t < doc.size(); ++t) {
    const std::string path = config::join_path("", t);
    ObjectReader r(doc[t], file, path);
    r.allow({"exactness", "hardware", "shape_convention", "columns", "reliability_warning", "notes", "description",
             "device", "software", "settings", "gpu_note"});
    GemmTable table;
    table.id = r.require_string("id");
    table.source = r.require_string("source");
    table.gpu_preset = r.get_string("gpu", "");
    const Json* rows = r.raw("rows");
    if (rows == nullptr || !rows->is_array() || rows->empty()) r.fail("rows", "expected a non-empty array of measurements");
    for (std::size_t i = 0; i < rows->size(); ++i) {
      const std::string row_path = config::join_path(config::join_path(path, "rows"), i);
      ObjectReader row((*rows)[i], file, row_path);
      row.allow({"peak", "torch", "note", "notes", "iterations", "time_us"});
      GemmPoint base;
      base.table = table.id;
      base.gpu = table.gpu_preset;
      base.b = row.get_int("b", 1, 1, std::int64_t{1} << 20);
      base.m = row.require_int("m", 1, std::int64_t{1} << 30);
      base.n = row.require_int("n", 1, std::int64_t{1} << 30);
      base.k = row.require_int("k", 1, std::int64_t{1} << 30);
      if (row.has("dtype")) {
        // A best-shape row: one data type, its own GPU name.
        base.gpu = row.get_string("gpu", table.gpu_preset);
        base.column = row.require_string("dtype");
        base.tflops = row.require_double("tflops", 1e-6, 1e6);
        if (column_dtype(base.column, base.dtype)) {
          table.points.push_back(base);
        } else if (std::find(table.unused_columns.begin(), table.unused_columns.end(), base.column) == table.unused_columns.end()) {
          table.unused_columns.push_back(base.column);
        }
      } else {
        for (const auto& [key, value] : (*rows)[i].items()) {
          if (!is_column(key)) continue;
          GemmPoint p = base;
          p.column = key;
          p.tflops = row.require_double(key, 1e-6, 1e6);
          if (column_dtype(key, p.dtype)) {
            table.points.push_back(p);
          } else if (std::find(table.unused_columns.begin(), table.unused_columns.end(), key) == table.unused_columns.end()) {
            table.unused_columns.push_back(key);
          }
        }
      }
      row.finish();
    }
    r.finish();
    tables.push_back(std::move(table));
  }
  return tables;
}

}  // namespace trainsim::validate
