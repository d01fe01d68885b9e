#include "validate/calibrator.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "config/hardware_reader.h"
#include "config/json_reader.h"
#include "config/presets.h"
#include "sim/check.h"
#include "validate/attention_sweep.h"
#include "validate/gemm_sweep.h"
#include "validate/host_fit.h"
#include "validate/ring_fit.h"
#include "validate/suite.h"
#include "validate/sustained_fit.h"
#include "validate/validation_report.h"

namespace trainsim::validate {

namespace {

using config::Json;
using sim::DataType;

enum class InputKind { kGemm, kAttention, kSuite, kCollectives };

InputKind classify(const std::string& file) {
  // Not JSON: an nccl-tests text log (read_ring_sweeps says what is wrong when it is not one).
  if (!starts_as_json(file)) return InputKind::kCollectives;
  const Json doc = config::read_json_file(file);
  if (is_collective_records(doc)) return InputKind::kCollectives;
  if (doc.is_object() && (doc.contains("runs") || doc.contains("results") || doc.contains("config"))) {
    return InputKind::kCollectives;  // an nccl-tests -J JSON log
  }
  if (doc.is_array()) return InputKind::kGemm;
  if (doc.is_object() && doc.contains("tables")) return InputKind::kAttention;
  if (doc.is_object() && doc.contains("cases")) return InputKind::kSuite;
  throw InputError(file, "/",
                   "not a measurement file trainsim calibrate reads: expected a GEMM sweep (an array of matmul tables), "
                   "attention benchmarks ({\"tables\": [...]}), a validation suite ({\"cases\": [...]}), collective "
                   "measurement records (an array of {\"collective\", \"rows\", ...}) or an nccl-tests log");
}

// A GPU named in a measurement record ("A100 SXM4", "NVIDIA H100 80GB HBM3") is of the preset's
// type when it names the preset's model number (A100, H100, B200, ...).
bool same_gpu_type(const std::string& measured, const std::string& spec_name) {
  auto lower = [](std::string v) {
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return v;
  };
  const std::string m = lower(measured), spec = lower(spec_name);
  for (std::size_t i = 0; i + 4 <= spec.size(); ++i) {
    if (std::isalpha(static_cast<unsigned char>(spec[i])) && std::isdigit(static_cast<unsigned char>(spec[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(spec[i + 2])) && std::isdigit(static_cast<unsigned char>(spec[i + 3]))) {
      return m.find(spec.substr(i, 4)) != std::string::npos;
    }
  }
  return false;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

std::string base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

double r4(double v) { return round_significant(v, 4); }

// The error bar of each fitted parameter: {"<name>": {"standard_error": s} or {"interval_90": [lo, hi]}}.
Json error_bars(const FitReport& r) {
  Json out = Json::object();
  for (const FittedParameter& p : r.parameters) {
    Json e = Json::object();
    if (p.standard_error) e["standard_error"] = *p.standard_error;
    if (p.interval) e["interval_90"] = Json::array({p.interval->first, p.interval->second});
    if (!p.note.empty()) e["note"] = p.note;
    if (!e.empty()) out[p.name] = e;
  }
  return out;
}

// The note of a fit whose runs were simulated with `--set` overrides (CalibrationInputs::overrides).
std::string overrides_note(const std::vector<std::string>& overrides) {
  std::string s = "every run simulated with";
  for (const std::string& o : overrides) s += " --set " + o;
  return s + " (its scenario as in the suite otherwise); simulate with the same to use these factors as fitted";
}

// The fit record's "held_out": the pooled errors of each family predicted by a fit to the others.
Json held_out_record(const ErrorSummary& e) {
  Json held;
  held["by"] = "family";
  held["cases"] = e.n;
  held["mape"] = r4(e.mape);
  held["max_abs_error"] = r4(e.max_abs_error);
  return held;
}

Json fit_record(const FitReport& r) {
  Json out;
  out["from"] = r.from;
  out["points"] = r.residuals.size();
  out["mape"] = r4(r.errors.mape);
  out["max_abs_error"] = r4(r.errors.max_abs_error);
  if (!r.notes.empty()) out["notes"] = r.notes;
  if (!r.parameters.empty()) out["error_bars"] = error_bars(r);
  return out;
}

// The file of the calibration a GPU preset (or GPU file) names.
std::string preset_calibration_file(const std::string& gpu) {
  const std::string gpu_file = config::resolve_file(gpu, "gpus", "--gpu", "");
  const Json doc = config::read_json_file(gpu_file);
  if (!doc.is_object() || !doc.contains("calibration") || !doc["calibration"].is_string()) {
    throw InputError(gpu_file, "/calibration", "expected the name of the GPU's compute calibration file");
  }
  return config::resolve_file(doc["calibration"].get<std::string>(), "calibration", gpu_file, "/calibration");
}

// "source": one line naming where each part of the calibration comes from, from the fit record.
std::string source_line(const std::string& gpu, const Json& fit) {
  std::string out = "trainsim calibrate for " + gpu + "; parameters fitted from (see \"fit\"): ";
  bool first = true;
  for (const auto& [part, record] : fit.items()) {
    if (!record.is_object() || !record.contains("from")) continue;
    out += (first ? "" : "; ") + part + " <- ";
    first = false;
    bool first_from = true;
    for (const auto& f : record["from"]) {
      out += (first_from ? "" : ", ") + (f.is_string() ? f.get<std::string>() : f.dump());
      first_from = false;
    }
  }
  return out;
}

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * v);
  return buf;
}

// "MAPE a, max |error| b[, Spearman c]".
std::string errors(const ErrorSummary& e) {
  std::string text = "MAPE " + pct(e.mape) + ", max |error| " + pct(e.max_abs_error);
  if (e.spearman) {
    char rho[32];
    std::snprintf(rho, sizeof rho, ", Spearman %.3f", *e.spearman);
    text += rho;
  }
  return text;
}

// "MAPE a, max |error| b (in-sample: c, d)": held-out errors beside the fit's own.
std::string against_in_sample(const ErrorSummary& held, const ErrorSummary& in_sample) {
  return "MAPE " + pct(held.mape) + ", max |error| " + pct(held.max_abs_error) + " (in-sample: " + pct(in_sample.mape) + ", " +
         pct(in_sample.max_abs_error) + ")";
}

}  // namespace

CalibrationResult calibrate(const CalibrationInputs& in) {
  if (in.files.empty() && in.host_runs.empty()) {
    throw InputError("calibrate", "", "expected at least one measurement file (or --host-runs)");
  }
  std::vector<GemmTable> gemm_tables;
  std::vector<AttentionTable> attention_tables;
  std::vector<RingSweep> ring_sweeps;
  Suite runs;
  std::vector<std::string> suite_names;
  for (const std::string& file : in.files) {
    switch (classify(file)) {
      case InputKind::kGemm: {
        std::vector<GemmTable> t = read_gemm_sweep(file);
        gemm_tables.insert(gemm_tables.end(), t.begin(), t.end());
        break;
      }
      case InputKind::kAttention: {
        std::vector<AttentionTable> t = read_attention_sweep(file);
        attention_tables.insert(attention_tables.end(), t.begin(), t.end());
        break;
      }
      case InputKind::kCollectives: {
        std::vector<RingSweep> s = read_ring_sweeps(file);
        if (s.empty()) {
          throw InputError(file, "",
                           "no all_reduce sweep of one node with 2 or more GPUs: calibrate fits the intra-node ring to "
                           "those (other collectives and multi-node sweeps are for `trainsim validate nccl-tests`)");
        }
        ring_sweeps.insert(ring_sweeps.end(), s.begin(), s.end());
        break;
      }
      case InputKind::kSuite: {
        Suite s = with_metrics(read_suite(file, "", OnCaseError::kThrow, in.overrides));
        suite_names.push_back(base_name(file));
        for (Case& c : s.cases) runs.cases.push_back(std::move(c));
        break;
      }
    }
  }
  runs.file = suite_names.empty() ? "" : suite_names.front();

  // Which GPU: named, or the one the tables name.
  CalibrationResult out;
  out.gpu_preset = in.gpu;
  if (out.gpu_preset.empty()) {
    std::set<std::string> named;
    for (const GemmTable& t : gemm_tables) {
      if (!t.gpu_preset.empty()) named.insert(t.gpu_preset);
    }
    for (const AttentionTable& t : attention_tables) named.insert(t.gpu);
    if (named.size() != 1) {
      std::string list;
      for (const std::string& n : named) list += (list.empty() ? "" : ", ") + n;
      throw InputError("calibrate", "--gpu",
                       named.empty() ? "no measurement table names its GPU: give the GPU preset with --gpu"
                                     : "the tables name several GPUs (" + list + "): choose one with --gpu");
    }
    out.gpu_preset = *named.begin();
  }
  out.gpu = config::read_gpu(out.gpu_preset, "--gpu", "");
  const std::string base_file = in.base.empty() ? preset_calibration_file(out.gpu_preset) : in.base;
  topo::ComputeCalibration cal = in.base.empty() ? out.gpu.calibration : config::read_compute_calibration(base_file);
  const Json base_doc = config::read_json_file(base_file);
  out.fit = base_doc.is_object() && base_doc.contains("fit") && base_doc["fit"].is_object() ? base_doc["fit"] : Json::object();
  const std::string spec_name = out.gpu.name;
  auto on_this_gpu = [&](const std::string& gpu) {
    return gpu.empty() ? !in.gpu.empty() : (gpu == out.gpu_preset || same_gpu(gpu, out.gpu_preset, spec_name));
  };

  // GEMMs, per data type. FP8 reuses the overheads fitted for 16-bit when it has few points.
  struct DtypeFit {
    DataType dtype;
    const char* key;
    topo::GemmCalibration* target;
  };
  std::size_t fp8_points = 0;  // FP8 GEMM points the fit used
  const DtypeFit dtypes[] = {{DataType::kBf16, "gemm_bf16", &cal.gemm_16bit},
                             {DataType::kFp8, "gemm_fp8", &cal.gemm_fp8},
                             {DataType::kTf32, "gemm_tf32", &cal.gemm_tf32}};
  for (const DtypeFit& d : dtypes) {
    if (d.dtype == DataType::kFp8 && out.gpu.dense_fp8.per_second() <= 0) continue;
    std::vector<GemmPoint> points;
    for (const GemmTable& t : gemm_tables) {
      for (const GemmPoint& p : t.points) {
        const bool same_type = p.dtype == d.dtype || (d.dtype == DataType::kBf16 && p.dtype == DataType::kFp16);
        if (same_type && on_this_gpu(p.gpu)) points.push_back(p);
      }
    }
    if (points.empty()) continue;
    topo::GemmCalibration base = *d.target;
    const topo::GemmCalibration before = base;
    if (d.dtype == DataType::kFp8) {
      base.wave_overhead = cal.gemm_16bit.wave_overhead;
      base.launch_overhead = cal.gemm_16bit.launch_overhead;
    }
    GemmFit fit = fit_gemm(out.gpu, d.dtype, points, base, 1e9, before);
    if (d.dtype == DataType::kFp8 && fit.report.fitted) fp8_points = fit.report.residuals.size();
    if (!fit.report.fitted) {
      out.reports.push_back(std::move(fit.report));
      continue;
    }
    *d.target = fit.calibration;
    out.fit[d.key] = fit_record(fit.report);
    out.reports.push_back(std::move(fit.report));
  }

  // Attention, per pass, for one implementation. A table measured on this GPU is used as it is; one
  // measured on the same silicon at another power limit (same architecture and SM count: GB200 for
  // B200) has its TFLOP/s scaled by the ratio of the two BF16 peaks, which differ by the clock
  // that tensor-core and exponential throughput both follow. Tables of other GPUs are an error,
  // not silently left out.
  struct UsableAttention {
    const AttentionTable* table;
    double scale;      // measured TFLOP/s x scale = this GPU's
    std::string note;  // how, when scaled
  };
  std::vector<UsableAttention> usable_attention;
  for (const AttentionTable& t : attention_tables) {
    if (t.gpu == out.gpu_preset || same_gpu(t.gpu, out.gpu_preset, spec_name)) {
      usable_attention.push_back({&t, 1.0, ""});
      continue;
    }
    const topo::GpuSpec measured_on = config::read_gpu(t.gpu, t.file, t.path + "/gpu");
    if (measured_on.architecture != out.gpu.architecture || measured_on.sm_count != out.gpu.sm_count) {
      throw InputError(t.file, t.path + "/gpu",
                       "expected " + out.gpu_preset + " or a GPU of the same silicon (architecture and SM count): table " +
                           t.id + " was measured on " + t.gpu + ", so it calibrates that GPU (--gpu " + t.gpu + ")");
    }
    const double scale = out.gpu.peak(DataType::kBf16).per_second() / measured_on.peak(DataType::kBf16).per_second();
    char note[320];
    std::snprintf(note, sizeof note,
                  "table %s measured on %s (same silicon): its TFLOP/s scaled by the BF16 peak ratio %.4g (%s / %s)",
                  t.id.c_str(), t.gpu.c_str(), scale, out.gpu_preset.c_str(), t.gpu.c_str());
    usable_attention.push_back({&t, scale, note});
  }
  std::vector<AttentionPoint> attention;
  std::set<std::string> implementations;
  for (const UsableAttention& u : usable_attention) implementations.insert(u.table->implementation);
  if (!in.attention.empty() && implementations.empty()) {
    throw InputError("calibrate", "--attention",
                     "no attention benchmark among the measurement files to fit \"" + in.attention + "\" to");
  }
  if (!implementations.empty()) {
    std::string impl = in.attention;
    if (impl.empty()) {
      if (implementations.count(cal.attention.implementation) > 0) {
        impl = cal.attention.implementation;
      } else if (implementations.size() == 1) {
        impl = *implementations.begin();
      } else {
        std::string list;
        for (const std::string& i : implementations) list += (list.empty() ? "" : ", ") + i;
        throw InputError("calibrate", "--attention", "several attention implementations measured (" + list + "): choose one");
      }
    }
    if (implementations.count(impl) == 0) throw InputError("calibrate", "--attention", "no benchmark of implementation \"" + impl + "\"");
    // The chosen implementation becomes flash_attention; every other one measured on this GPU is
    // fitted the same way and kept as an alternative a scenario can select.
    const topo::AttentionCalibration base_attention = cal.attention;
    std::vector<topo::AttentionCalibration> alternatives;
    for (const std::string& name : implementations) {
      if (name == impl) continue;
      topo::AttentionCalibration alt = base_attention;
      alt.implementation = name;
      for (const topo::AttentionCalibration& kept : cal.attention_alternatives) {
        if (kept.implementation == name) alt = kept;
      }
      alternatives.push_back(alt);
    }
    for (const std::string& name : implementations) {
      const bool chosen = name == impl;
      topo::AttentionCalibration* target = &cal.attention;
      if (!chosen) {
        target = &*std::find_if(alternatives.begin(), alternatives.end(),
                                [&](const topo::AttentionCalibration& a) { return a.implementation == name; });
      }
      attention.clear();
      std::vector<std::string> notes;
      for (const UsableAttention& u : usable_attention) {
        if (u.table->implementation != name) continue;
        for (AttentionPoint p : u.table->points) {
          p.tflops *= u.scale;
          if (p.tflops_without_dropout) *p.tflops_without_dropout *= u.scale;  // the pair scales together
          attention.push_back(std::move(p));
        }
        if (!u.note.empty()) notes.push_back(u.note);
      }
      for (const bool backward : {false, true}) {
        std::vector<AttentionPoint> pass;
        for (const AttentionPoint& p : attention) {
          if (p.backward == backward) pass.push_back(p);
        }
        // What the calibration said before this fit, where it priced this implementation.
        std::optional<topo::AttentionPassCalibration> before;
        const topo::AttentionCalibration* earlier = base_attention.implementation == name ? &base_attention : nullptr;
        for (const topo::AttentionCalibration& kept : cal.attention_alternatives) {
          if (kept.implementation == name) earlier = &kept;
        }
        if (earlier != nullptr) before = backward ? earlier->backward : earlier->forward;
        AttentionFit fit = fit_attention(out.gpu, backward, pass, target->tile, backward ? target->backward : target->forward,
                                         cal.gemm_16bit.max_efficiency, before);
        fit.report.notes.insert(fit.report.notes.begin(), notes.begin(), notes.end());
        if (fit.report.fitted) {
          (backward ? target->backward : target->forward) = fit.calibration;
          target->implementation = name;
          Json record = fit_record(fit.report);
          record["implementation"] = name;
          const std::string key = std::string(backward ? "attention_backward" : "attention_forward") + (chosen ? "" : "_" + name);
          out.fit[key] = record;
        }
        if (!chosen) fit.report.part += " (" + name + ", alternative)";
        out.reports.push_back(std::move(fit.report));
      }
    }
    // Alternatives without a benchmark here (a `like` implementation priced as a measured one at
    // a relative speed) are kept, and follow the refitted model of the one they name.
    // Those whose model this fit leaves out are dropped, with a note.
    for (const topo::AttentionCalibration& kept : cal.attention_alternatives) {
      if (kept.like.empty() || implementations.count(kept.implementation) > 0) continue;
      if (implementations.count(kept.like) == 0) {
        out.reports.back().notes.push_back("alternative " + kept.implementation + " dropped: it is priced like " + kept.like +
                                           ", which these measurements do not cover");
        continue;
      }
      alternatives.push_back(kept);
    }
    std::sort(alternatives.begin(), alternatives.end(),
              [](const topo::AttentionCalibration& a, const topo::AttentionCalibration& b) { return a.implementation < b.implementation; });
    cal.attention_alternatives = std::move(alternatives);
    TRAINSIM_CHECK(cal.resolve_like_attention().empty(), "a kept attention alternative names no fitted implementation");
  }

  // The intra-node ring, from the all_reduce sweeps measured on this GPU type (records name the
  // GPU; nccl-tests logs do not, and count as measured on --gpu). Before the sustained fraction:
  // the runs' tensor-parallel traffic is priced with it.
  {
    std::vector<RingSweep> sweeps;
    std::vector<std::string> other_gpus;
    for (const RingSweep& s : ring_sweeps) {
      if (s.gpu.empty() || same_gpu_type(s.gpu, spec_name)) {
        sweeps.push_back(s);
      } else {
        other_gpus.push_back(s.id + " (" + s.gpu + ")");
      }
    }
    if (sweeps.empty() && !other_gpus.empty()) {
      FitReport skipped;
      skipped.part = "intra-node ring (all_reduce sweeps)";
      skipped.notes.push_back("no sweep on " + spec_name + "; measured on other GPUs: " + join(other_gpus));
      out.reports.push_back(std::move(skipped));
    }
    if (!sweeps.empty()) {
      RingFit fit = fit_intra_node_ring(sweeps);
      if (!other_gpus.empty()) fit.report.notes.push_back("left out, measured on other GPUs: " + join(other_gpus));
      if (fit.report.fitted) {
        cal.intra_node_ring = fit.calibration;
        out.fit["intra_node_ring"] = fit_record(fit.report);
      }
      out.reports.push_back(std::move(fit.report));
    }
  }

  // The sustained fraction, over the runs on this GPU's architecture.
  if (!runs.cases.empty()) {
    // Without attention benchmarks for this GPU, the attention speed is scaled to the runs too.
    // FP8 GEMMs measured only at a best shape (fewer than 8 points) are scaled to the runs too.
    SustainedFitOptions options;
    options.attention = attention.empty();
    options.fp8 = out.gpu.dense_fp8.per_second() > 0 && fp8_points < 8;
    options.jobs = in.jobs;
    SustainedFit fit = fit_sustained_fraction(runs, out.gpu.architecture, cal, options);
    if (fit.report.fitted) {
      cal.sustained_fraction = fit.fraction;
      if (fit.attention_scale) cal.attention_scale = *fit.attention_scale;
      if (fit.fp8_scale) cal.fp8_gemm_scale = *fit.fp8_scale;
      Json record;
      record["from"] = suite_names;
      record["architecture"] = topo::to_string(out.gpu.architecture);
      record["cases"] = fit.cases;
      record["mape_before"] = r4(fit.before.mape);
      record["mape"] = r4(fit.report.errors.mape);
      record["max_abs_error"] = r4(fit.report.errors.max_abs_error);
      std::vector<std::string> notes{
          "time of each case modelled as A + B / f + C / (f g) + D / (f h) from simulations at f = 1 and 0.7 (and the "
          "fitted scales g, h at 0.7); the parameters minimise the mean absolute log error of each case's first measured metric"};
      if (cal.speed_spread > 0) {
        char spread[400];
        std::snprintf(spread, sizeof spread,
                      "every case's tensor-core work runs at its slowest GPU's speed, 1 + s m(N) below the mean for N GPUs (m: "
                      "the expected largest of N standard normals), with speed_spread s = %.3g from the base calibration, "
                      "not fitted (Sinha et al., SC'22: 8%% average variation across a cluster's identical GPUs)",
                      cal.speed_spread);
        notes.emplace_back(spread);
      }
      if (fit.fp8_scale) {
        notes.emplace_back("FP8 GEMMs are measured only at a best shape: fp8_gemm_scale, their in-training speed relative to "
                           "the benchmark, is fitted to the FP8 runs (Transformer Engine also quantizes every FP8 GEMM's inputs)");
      }
      if (fit.attention_scale) {
        const bool benchmarked = out.fit.contains("attention_forward") && out.fit["attention_forward"].contains("points");
        notes.emplace_back(benchmarked
                               ? "attention benchmarked only in the base calibration, not among the inputs: attention_scale, the "
                                 "in-training attention speed of these runs' software relative to that kernel model, is fitted to "
                                 "the runs"
                               : "no attention benchmark for this GPU: attention_scale, the in-training attention speed relative "
                                 "to the base calibration's kernel model, is fitted to the runs");
      }
      if (!in.overrides.empty()) notes.push_back(overrides_note(in.overrides));
      record["notes"] = notes;
      record["error_bars"] = error_bars(fit.report);
      if (fit.held_out_errors) {
        // Leave one family out: the error on runs the fit did not see.
        Json held = held_out_record(*fit.held_out_errors);
        Json families = Json::array();
        for (const HeldOutFamily& h : fit.held_out) {
          Json one;
          one["family"] = h.family;
          one["cases"] = h.cases;
          one["sustained_fraction"] = h.fraction;
          if (h.attention_scale) one["attention_scale"] = *h.attention_scale;
          if (h.fp8_scale) one["fp8_gemm_scale"] = *h.fp8_scale;
          one["mape"] = r4(h.errors.mape);
          one["max_abs_error"] = r4(h.errors.max_abs_error);
          families.push_back(one);
          char line[320];
          std::snprintf(line, sizeof line, "%s (%zu cases) predicted by a fit to the other families (f = %.4g",
                        h.family.empty() ? "cases without a family" : h.family.c_str(), h.cases, h.fraction);
          std::string text = line;
          if (h.attention_scale) {
            std::snprintf(line, sizeof line, ", attention scale %.2f", *h.attention_scale);
            text += line;
          }
          if (h.fp8_scale) {
            std::snprintf(line, sizeof line, ", FP8 GEMM scale %.2f", *h.fp8_scale);
            text += line;
          }
          fit.report.checks.push_back(text + "): MAPE " + pct(h.errors.mape) + ", max |error| " + pct(h.errors.max_abs_error));
        }
        held["families"] = families;
        record["held_out"] = held;
        fit.report.checks.push_back("all " + std::to_string(fit.held_out_errors->n) + " held-out predictions: " +
                                    against_in_sample(*fit.held_out_errors, fit.report.errors));
      }
      out.fit["training"] = record;
    }
    out.reports.push_back(std::move(fit.report));
  }
  // The host time per task, over the host runs on this GPU's architecture.
  if (!in.host_runs.empty()) {
    Suite host_runs;
    std::vector<std::string> names;
    for (const std::string& file : in.host_runs) {
      Suite s = with_metrics(read_suite(file, "", OnCaseError::kThrow, in.overrides));
      names.push_back(base_name(file));
      for (Case& c : s.cases) host_runs.cases.push_back(std::move(c));
    }
    host_runs.file = names.front();
    HostFit fit = fit_host_issue(host_runs, out.gpu.architecture, cal, in.jobs);
    if (fit.report.fitted) {
      cal.host_issue = sim::Duration::from_us(static_cast<std::int64_t>(fit.host_issue_us));
      Json record;
      record["from"] = names;
      record["architecture"] = topo::to_string(out.gpu.architecture);
      record["cases"] = fit.cases;
      if (fit.before.n > 0) record["mape_before"] = r4(fit.before.mape);
      record["mape"] = r4(fit.report.errors.mape);
      record["max_abs_error"] = r4(fit.report.errors.max_abs_error);
      std::vector<std::string> notes{
          "each case simulated at host times of 0-400 us per task (steps of 10 us, then 1 us near the best) with the "
          "rest of this calibration; the host time minimises the mean absolute log error of each case's first "
          "measured metric"};
      if (!in.overrides.empty()) notes.push_back(overrides_note(in.overrides));
      record["notes"] = notes;
      record["error_bars"] = error_bars(fit.report);
      if (fit.held_out_errors) {
        record["held_out"] = held_out_record(*fit.held_out_errors);
        fit.report.checks.push_back(std::to_string(fit.held_out.size()) + " families each predicted at the host time that fits the others: " +
                                    against_in_sample(*fit.held_out_errors, fit.report.errors));
      }
      out.fit["host"] = record;
    }
    out.reports.push_back(std::move(fit.report));
  }
  // Checks: runs no fit read, predicted with the finished calibration. A base calibration's
  // checks were made with other parameters: dropped, never carried over.
  out.fit.erase("checks");
  if (!in.check_runs.empty()) {
    Json checks = Json::array();
    const std::string arch = topo::to_string(out.gpu.architecture);
    for (const std::string& file : in.check_runs) {
      const Suite priced = with_calibration(with_metrics(read_suite(file, "", OnCaseError::kThrow, in.overrides)), out.gpu.architecture, cal, cal.sustained_fraction);
      FitReport report;
      report.part = "check on " + base_name(file) + " (" + arch + " runs in no fit)";
      if (priced.cases.empty()) {
        report.notes.push_back("no case runs on this GPU's architecture: nothing recorded");
        out.reports.push_back(std::move(report));
        continue;
      }
      ValidateOptions options;
      options.jobs = in.jobs;
      const ValidationReport r = validate_suite(priced, options);
      std::vector<double> predicted, measured;
      double signed_sum = 0;
      for (const CaseResult& c : r.cases) {
        const MetricResult& m = c.metrics.front();
        predicted.push_back(time_like(m.metric, m.predicted));
        measured.push_back(time_like(m.metric, m.measured));
        signed_sum += predicted.back() / measured.back() - 1;
        report.residuals.push_back(KernelResidual{c.id + " " + to_string(m.metric), m.measured, m.predicted, m.error});
      }
      report.fitted = true;
      report.errors = summarize(predicted, measured);
      const double mean = signed_sum / static_cast<double>(predicted.size());
      report.notes.push_back("predicted with this calibration, nothing fitted: mean time error " + pct(mean) +
                             (mean < 0 ? " (predictions fast)" : " (predictions slow)"));
      Json record;
      record["suite"] = base_name(file);
      record["architecture"] = arch;
      record["cases"] = predicted.size();
      record["mape"] = r4(report.errors.mape);
      record["max_abs_error"] = r4(report.errors.max_abs_error);
      record["mean_time_error"] = r4(mean);
      checks.push_back(record);
      out.reports.push_back(std::move(report));
    }
    if (!checks.empty()) out.fit["checks"] = checks;
  }
  cal.source = source_line(out.gpu_preset, out.fit);
  out.gpu.calibration = cal;
  return out;
}

Json calibration_json(const CalibrationResult& r) {
  Json out = config::to_json(r.gpu.calibration);
  out["gpu"] = r.gpu_preset;
  out["fit"] = r.fit;
  return out;
}

std::string residuals_text(const CalibrationResult& r, bool all) {
  std::ostringstream o;
  const topo::ComputeCalibration& c = r.gpu.calibration;
  o << "calibration for " << r.gpu_preset << " (" << r.gpu.name << ")\n";
  for (const FitReport& f : r.reports) {
    o << "\n" << f.part << ": ";
    if (!f.fitted) {
      o << "not fitted\n";
    } else {
      o << f.residuals.size() << " points, " << errors(f.errors) << "\n";
      if (f.before) o << "  before this fit (the base calibration): " << errors(*f.before) << "\n";
    }
    for (const std::string& n : f.notes) o << "  note: " << n << "\n";
    if (!f.fitted) continue;
    for (const FittedParameter& p : f.parameters) {
      char line[320];
      if (p.standard_error) {
        std::snprintf(line, sizeof line, "  fitted %s = %.4g +/- %.2g (standard error%s%s)\n", p.name.c_str(), p.value,
                      *p.standard_error, p.note.empty() ? "" : "; ", p.note.c_str());
      } else if (p.interval) {
        std::snprintf(line, sizeof line, "  fitted %s = %.4g, 90%% interval [%.4g, %.4g] (%s)\n", p.name.c_str(), p.value,
                      p.interval->first, p.interval->second, p.note.c_str());
      } else {
        std::snprintf(line, sizeof line, "  fitted %s = %.4g%s%s\n", p.name.c_str(), p.value, p.note.empty() ? "" : " (",
                      p.note.empty() ? "" : (p.note + ")").c_str());
      }
      o << line;
    }
    if (!f.checks.empty()) o << "  leave one family out:\n";
    for (const std::string& line : f.checks) o << "    " << line << "\n";
    std::vector<KernelResidual> rows = f.residuals;
    if (!all) {
      std::stable_sort(rows.begin(), rows.end(),
                       [](const KernelResidual& a, const KernelResidual& b) { return std::abs(a.error) > std::abs(b.error); });
      if (rows.size() > 10) rows.resize(10);
      o << "  largest residuals:\n";
    }
    for (const KernelResidual& k : rows) {
      char line[320];
      std::snprintf(line, sizeof line, "    %-70s measured %10.4g  predicted %10.4g  %+6.1f%%\n", k.label.c_str(), k.measured,
                    k.predicted, 100.0 * k.error);
      o << line;
    }
  }
  char buf[512];
  o << "\nparameters:\n";
  auto gemm = [&](const char* name, const topo::GemmCalibration& g) {
    std::snprintf(buf, sizeof buf, "  gemm %-5s max_efficiency %.4g, wave overhead %.4g us, launch overhead %.4g us\n", name,
                  g.max_efficiency, g.wave_overhead.microseconds(), g.launch_overhead.microseconds());
    o << buf;
  };
  gemm("bf16", c.gemm_16bit);
  gemm("fp8", c.gemm_fp8);
  gemm("tf32", c.gemm_tf32);
  auto pass = [&](const char* name, const topo::AttentionPassCalibration& p) {
    std::snprintf(buf, sizeof buf, "  attention %-8s efficiency %.4g, softmax %.4g Telements/s (overlap %.2f), row overhead %.4g (%s)\n",
                  name, p.efficiency, p.softmax_rate * 1e-12, p.softmax_overlap, p.row_overhead, c.attention.implementation.c_str());
    o << buf;
  };
  pass("forward", c.attention.forward);
  pass("backward", c.attention.backward);
  std::snprintf(buf, sizeof buf, "  sustained fraction in training %.4g\n", c.sustained_fraction);
  o << buf;
  std::snprintf(buf, sizeof buf, "  speed spread across GPUs %.4g (the slowest of N GPUs sets the pace)\n", c.speed_spread);
  o << buf;
  std::snprintf(buf, sizeof buf, "  host time per task %.4g us\n", c.host_issue.microseconds());
  o << buf;
  return o.str();
}

}  // namespace trainsim::validate
