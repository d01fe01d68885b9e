#include "validate/attention_sweep.h"

#include "config/json_reader.h"
#include "models/layer_dims.h"

namespace trainsim::validate {

double AttentionPoint::flops() const {
  const double n = static_cast<double>(seq_len);
  // The share of the score matrix the lowering's attention kernels count.
  const double share = models::attention_score_share(seq_len, seq_len, causal, window);
  const double forward = 4.0 * static_cast<double>(batch) * static_cast<double>(heads) * n * n * static_cast<double>(head_dim) * share;
  return backward ? 2.5 * forward : forward;
}

std::vector<AttentionTable> read_attention_sweep(const std::string& file) {
  using config::Json;
  using config::ObjectReader;
  const Json doc = config::read_json_file(file);
  ObjectReader r(doc, file, "");
  r.allow({"description", "sources"});
  const Json* tables = r.raw("tables");
  if (tables == nullptr || !tables->is_array() || tables->empty()) {
    r.fail("tables", "expected a non-empty array of attention benchmark tables");
  }
  std::vector<AttentionTable> out;
  for (std::size_t t = 0; t < tables->size(); ++t) {
    const std::string path = config::join_path("/tables", t);
    ObjectReader tr((*tables)[t], file, path);
    tr.allow({"exactness", "setup", "description", "notes"});
    AttentionTable table;
    table.file = file;
    table.path = path;
    table.id = tr.require_string("id");
    table.source = tr.require_string("source");
    table.gpu = tr.require_string("gpu");
    table.implementation = tr.require_string("implementation");
    const std::int64_t tokens = tr.get_int("tokens", 0, 0, std::int64_t{1} << 40);
    const std::int64_t hidden = tr.get_int("hidden", 0, 0, std::int64_t{1} << 30);
    const Json* rows = tr.raw("rows");
    if (rows == nullptr || !rows->is_array() || rows->empty()) tr.fail("rows", "expected a non-empty array of measurements");
    for (std::size_t i = 0; i < rows->size(); ++i) {
      ObjectReader row((*rows)[i], file, config::join_path(config::join_path(path, "rows"), i));
      row.allow({"note"});
      AttentionPoint p;
      p.table = table.id;
      p.gpu = table.gpu;
      p.implementation = table.implementation;
      p.backward = row.get_choice("pass", 0, {"forward", "backward"}) == 1;
      p.causal = row.get_bool("causal", false);
      p.head_dim = row.require_int("head_dim", 1, 4096);
      p.seq_len = row.require_int("seq_len", 1, std::int64_t{1} << 30);
      p.tflops = row.require_double("tflops", 1e-6, 1e6);
      p.window = row.get_int("window", 0, 1, p.seq_len);
      p.dropout = row.get_double("dropout", 0, 0, 0.99);
      if (row.has("tflops_without_dropout")) {
        if (p.dropout <= 0) row.fail("tflops_without_dropout", "only beside a \"dropout\" above 0");
        p.tflops_without_dropout = row.require_double("tflops_without_dropout", 1e-6, 1e6);
      }
      if (p.window > 0 && !p.causal) row.fail("window", "a sliding window needs a causal row (\"causal\": true)");
      if (row.has("batch") || tokens == 0) {
        p.batch = row.require_int("batch", 1, std::int64_t{1} << 30);
      } else {
        if (tokens % p.seq_len != 0) row.fail("seq_len", "expected a divisor of the table's tokens (" + std::to_string(tokens) + ")");
        p.batch = tokens / p.seq_len;
      }
      if (row.has("heads") || hidden == 0) {
        p.heads = row.require_int("heads", 1, 1 << 20);
      } else {
        if (hidden % p.head_dim != 0) row.fail("head_dim", "expected a divisor of the table's hidden size (" + std::to_string(hidden) + ")");
        p.heads = hidden / p.head_dim;
      }
      row.finish();
      table.points.push_back(p);
    }
    tr.finish();
    out.push_back(std::move(table));
  }
  r.finish();
  return out;
}

}  // namespace trainsim::validate
