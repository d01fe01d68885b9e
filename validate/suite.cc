#include "validate/suite.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "config/json_reader.h"

namespace trainsim::validate {

namespace {

using config::Json;
using config::ObjectReader;

std::vector<std::string> read_notes(ObjectReader& r) {
  std::vector<std::string> out;
  const Json* v = r.raw("notes");
  if (v == nullptr) return out;
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) r.fail("notes", "expected a string or an array of strings, got " + config::describe(*v));
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      throw InputError(r.file(), config::join_path(r.path_of("notes"), i), "expected a string, got " + config::describe((*v)[i]));
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

// A case's family when it names none: the leading letters of its model's name, lower-cased
// ("Llama-2 70B" -> "llama", "GPT-3 175B" -> "gpt", "Nemotron-4 340B" -> "nemotron"), so ranks are
// still judged within a model family.
std::string family_of_model(const std::string& name) {
  std::string out;
  for (char ch : name) {
    if (!std::isalpha(static_cast<unsigned char>(ch))) break;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

Case read_case(const Json& value, const std::string& file, const std::string& path, const std::vector<std::string>& overrides) {
  ObjectReader r(value, file, path);
  r.allow({"description"});
  Case c;
  c.id = r.require_string("id");
  if (c.id.empty()) r.fail("id", "expected a non-empty case id");
  c.source = r.require_string("source");
  if (c.source.empty()) r.fail("source", "expected the source of the measurement (paper, table, repository and commit)");
  c.family = r.get_string("family", "");
  c.notes = read_notes(r);
  const bool inline_scenario = r.has("scenario"), from_file = r.has("scenario_file");
  if (inline_scenario == from_file) {
    r.fail(inline_scenario ? "scenario_file" : "scenario", "expected exactly one of \"scenario\" and \"scenario_file\"");
  }
  if (inline_scenario) {
    const Json* doc = r.raw("scenario");
    if (!doc->is_object()) r.fail("scenario", "expected a scenario object, got " + config::describe(*doc));
    if (overrides.empty()) {
      c.scenario = config::parse_scenario(*doc, file, r.path_of("scenario"));
    } else {
      Json changed = *doc;
      for (const std::string& o : overrides) config::apply_override(changed, o);
      c.scenario = config::parse_scenario(changed, file, r.path_of("scenario"));
    }
  } else {
    std::filesystem::path p(r.require_string("scenario_file"));
    if (p.is_relative()) p = std::filesystem::path(file).parent_path() / p;
    c.scenario = config::load_scenario(p.string(), overrides);
  }
  if (c.family.empty()) c.family = family_of_model(c.scenario.model.name);
  ObjectReader measured = r.object("measured");
  measured.allow({"description", "notes"});
  for (Metric m : kMetrics) {
    if (!measured.has(to_string(m))) continue;
    const double v = measured.require_double(to_string(m), 1e-12, 1e18);
    c.measured.push_back(Measurement{m, v});
  }
  if (const Json* stage = measured.raw("peak_memory_stage")) {
    const std::int64_t stages = c.scenario.parallel.pipeline_model_parallel_size;
    if (!measured.has(to_string(Metric::kPeakMemory))) {
      measured.fail("peak_memory_stage", "a stage is given only with a measured peak_memory_bytes");
    }
    if (stage->is_string() && stage->get<std::string>() == "last") {
      c.peak_memory_stage = stages - 1;
    } else if (stage->is_number_integer() && stage->get<std::int64_t>() >= 0 &&
               stage->get<std::int64_t>() < stages) {
      c.peak_memory_stage = stage->get<std::int64_t>();
    } else {
      measured.fail("peak_memory_stage", "expected \"last\" or a pipeline stage in [0, " +
                                             std::to_string(stages - 1) + "], got " +
                                             config::describe(*stage));
    }
  }
  if (measured.has("out_of_memory")) {
    c.out_of_memory = measured.get_bool("out_of_memory", false);
    if (*c.out_of_memory && !c.measured.empty()) {
      measured.fail("out_of_memory", "a run that ran out of memory has no measured " + std::string(to_string(c.measured.front().metric)));
    }
  }
  measured.finish();
  if (c.measured.empty() && !c.out_of_memory) {
    r.fail("measured", "expected at least one measured value: iteration_time_s, model_tflops_per_gpu, "
                       "hardware_tflops_per_gpu, mfu, peak_memory_bytes or out_of_memory");
  }
  r.finish();
  return c;
}

}  // namespace

const char* to_string(Metric m) {
  switch (m) {
    case Metric::kIterationTime:
      return "iteration_time_s";
    case Metric::kModelTflops:
      return "model_tflops_per_gpu";
    case Metric::kHardwareTflops:
      return "hardware_tflops_per_gpu";
    case Metric::kMfu:
      return "mfu";
    case Metric::kPeakMemory:
      return "peak_memory_bytes";
  }
  return "?";
}

double time_like(Metric metric, double value) {
  const bool throughput = metric == Metric::kModelTflops || metric == Metric::kHardwareTflops || metric == Metric::kMfu;
  return throughput ? 1.0 / value : value;
}

Suite with_metrics(Suite suite) {
  std::erase_if(suite.cases, [](const Case& c) { return c.measured.empty(); });
  return suite;
}

std::vector<std::string> families_of(const std::vector<Case>& cases) {
  std::vector<std::string> families;
  for (const Case& c : cases) {
    if (std::find(families.begin(), families.end(), c.family) == families.end()) families.push_back(c.family);
  }
  return families;
}

Suite read_suite(const std::string& file, const std::string& only, OnCaseError on_error,
                 const std::vector<std::string>& overrides) {
  const Json doc = config::read_json_file(file);
  ObjectReader r(doc, file, "");
  r.allow({"sources"});
  Suite s;
  s.file = file;
  s.description = r.get_string("description", "");
  const Json* cases = r.raw("cases");
  if (cases == nullptr || !cases->is_array() || cases->empty()) {
    r.fail("cases", "expected a non-empty array of cases");
  }
  std::set<std::string> ids;
  for (std::size_t i = 0; i < cases->size(); ++i) {
    const std::string path = config::join_path("/cases", i);
    const Json& value = (*cases)[i];
    std::string id = path;
    // Ids are checked on every case, even those filtered out, so a suite is valid as a whole.
    if (value.is_object() && value.contains("id") && value["id"].is_string()) {
      id = value["id"].get<std::string>();
      if (!ids.insert(id).second) throw InputError(file, config::join_path(path, "id"), "duplicate case id \"" + id + "\"");
      if (!only.empty() && id.find(only) == std::string::npos) continue;
    }
    try {
      s.cases.push_back(read_case(value, file, path, overrides));
    } catch (const InputError& e) {
      if (on_error == OnCaseError::kThrow) throw;
      s.failed.push_back(FailedCase{id.empty() ? path : id, e.what()});
    }
  }
  if (const Json* excluded = r.raw("excluded")) {
    if (!excluded->is_array()) r.fail("excluded", "expected an array of {\"id\", \"reason\"} objects");
    for (std::size_t i = 0; i < excluded->size(); ++i) {
      ObjectReader e((*excluded)[i], file, config::join_path("/excluded", i));
      e.allow({"source", "notes"});
      ExcludedCase x{e.require_string("id"), e.require_string("reason")};
      e.finish();
      s.excluded.push_back(std::move(x));
    }
  }
  r.finish();
  if (s.cases.empty() && s.failed.empty()) throw InputError(file, "/cases", "no case id contains \"" + only + "\"");
  return s;
}

}  // namespace trainsim::validate
