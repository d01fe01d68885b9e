#include "validate/validation_report.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "sim/error.h"

namespace trainsim::validate {

namespace {

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * fraction);
  return buf;
}

std::string plain_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}

// A value in the metric's natural unit, compact.
std::string value_text(Metric m, double v) {
  char buf[48];
  switch (m) {
    case Metric::kIterationTime:
      std::snprintf(buf, sizeof buf, "%.4g s", v);
      break;
    case Metric::kMfu:
      std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * v);
      break;
    case Metric::kPeakMemory:
      std::snprintf(buf, sizeof buf, "%.2f GiB", v / 1073741824.0);
      break;
    default:
      std::snprintf(buf, sizeof buf, "%.1f", v);
      break;
  }
  return buf;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string rpad(const std::string& s, std::size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

CaseResult compare(const Case& c, const report::RunResult& r) {
  CaseResult out;
  out.id = c.id;
  out.source = c.source;
  out.family = c.family;
  out.fits = r.fits;
  out.out_of_memory = c.out_of_memory;
  for (const Measurement& m : c.measured) {
    double predicted = predicted_value(r, m.metric);
    if (m.metric == Metric::kPeakMemory && c.peak_memory_stage) {
      predicted = static_cast<double>(
          r.stages.at(static_cast<std::size_t>(*c.peak_memory_stage)).peak_bytes);
    }
    out.metrics.push_back(
        MetricResult{m.metric, predicted, m.value, relative_error(predicted, m.value)});
  }
  return out;
}

nlohmann::json summary_json(const std::vector<MetricSummary>& summary) {
  nlohmann::json out = nlohmann::json::object();
  for (const MetricSummary& s : summary) {
    out[to_string(s.metric)] = {{"n", s.errors.n},
                                {"mape", s.errors.mape},
                                {"max_abs_error", s.errors.max_abs_error},
                                {"spearman", s.errors.spearman ? nlohmann::json(*s.errors.spearman) : nlohmann::json()}};
  }
  return out;
}

void summary_rows(std::ostringstream& o, const std::string& label, std::size_t width, const std::vector<MetricSummary>& summary) {
  for (const MetricSummary& s : summary) {
    char rho[16] = "-";
    if (s.errors.spearman) std::snprintf(rho, sizeof rho, "%.3f", *s.errors.spearman);
    o << "  " << pad(label, width) << pad(to_string(s.metric), 26) << rpad(std::to_string(s.errors.n), 5)
      << rpad(plain_percent(s.errors.mape), 9) << rpad(plain_percent(s.errors.max_abs_error), 10) << rpad(rho, 10) << "\n";
  }
}

}  // namespace

double predicted_value(const report::RunResult& r, Metric m) {
  switch (m) {
    case Metric::kIterationTime:
      return r.iteration_time_s;
    case Metric::kModelTflops:
      return r.model_tflops_per_gpu;
    case Metric::kHardwareTflops:
      return r.hardware_tflops_per_gpu;
    case Metric::kMfu:
      return r.mfu;
    case Metric::kPeakMemory:
      return static_cast<double>(r.peak_bytes_per_gpu);
  }
  return 0;
}

std::vector<MetricSummary> summarize_metrics(const std::vector<CaseResult>& cases) {
  std::vector<MetricSummary> out;
  for (Metric m : kMetrics) {
    std::vector<double> predicted, measured;
    for (const CaseResult& c : cases) {
      for (const MetricResult& r : c.metrics) {
        if (r.metric != m) continue;
        predicted.push_back(r.predicted);
        measured.push_back(r.measured);
      }
    }
    if (!predicted.empty()) out.push_back(MetricSummary{m, summarize(predicted, measured)});
  }
  return out;
}

ValidationReport validate_suite(const Suite& suite, const ValidateOptions& options) {
  ValidationReport report;
  report.suite_file = suite.file;
  report.excluded = suite.excluded;
  report.failed = suite.failed;
  const std::size_t n = suite.cases.size();
  std::vector<CaseResult> results(n);
  std::vector<std::exception_ptr> errors(n);
  std::atomic<std::size_t> next{0};
  std::mutex progress_mutex;
  std::size_t done = 0;
  report::RunOptions run;
  run.record = false;
  auto worker = [&]() {
    while (true) {
      const std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        results[i] = compare(suite.cases[i], report::simulate(suite.cases[i].scenario, run));
      } catch (...) {
        errors[i] = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (options.progress) options.progress(done, n);
    }
  };
  const int jobs = std::max(1, std::min<int>(options.jobs, static_cast<int>(n)));
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
    for (std::thread& t : threads) t.join();
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!errors[i]) {
      report.cases.push_back(std::move(results[i]));
      continue;
    }
    try {
      std::rethrow_exception(errors[i]);  // unless recorded, the first failing case in suite order ends it
    } catch (const InputError& e) {
      if (!options.record_failures) throw;
      report.failed.push_back(FailedCase{suite.cases[i].id, e.what()});
    }
  }
  report.summary = summarize_metrics(report.cases);
  for (const CaseResult& c : report.cases) {
    if (!c.out_of_memory) continue;
    ++report.memory_verdicts.n;
    if (*c.out_of_memory == !c.fits) {
      ++report.memory_verdicts.agree;
    } else {
      report.memory_verdicts.disagree.push_back(c.id);
    }
  }
  // Families and the primary metric: the cases with a measured metric.
  std::vector<CaseResult> with_metrics;
  std::map<std::string, std::vector<CaseResult>> by_family;
  for (const CaseResult& c : report.cases) {
    if (c.metrics.empty()) continue;
    with_metrics.push_back(c);
    by_family[c.family].push_back(c);
  }
  for (const auto& [family, cases] : by_family) report.families.push_back(FamilySummary{family, summarize_metrics(cases)});
  auto primary = [](const std::vector<CaseResult>& cases) {
    std::vector<double> predicted, measured;
    for (const CaseResult& c : cases) {
      predicted.push_back(c.metrics.front().predicted);
      measured.push_back(c.metrics.front().measured);
    }
    ErrorSummary e = summarize(predicted, measured);
    e.spearman.reset();
    return e;
  };
  if (with_metrics.empty()) return report;
  report.primary.push_back(PrimarySummary{"", primary(with_metrics)});
  if (by_family.size() > 1 || (by_family.size() == 1 && !by_family.begin()->first.empty())) {
    for (const auto& [family, cases] : by_family) report.primary.push_back(PrimarySummary{family, primary(cases)});
  }
  return report;
}

nlohmann::json to_json(const ValidationReport& r) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& c : r.cases) {
    nlohmann::json metrics = nlohmann::json::object();
    for (const MetricResult& m : c.metrics) {
      metrics[to_string(m.metric)] = {{"predicted", m.predicted}, {"measured", m.measured}, {"error", m.error}};
    }
    nlohmann::json one = {{"id", c.id}, {"source", c.source}, {"family", c.family}, {"fits", c.fits}, {"metrics", metrics}};
    if (c.out_of_memory) one["out_of_memory"] = {{"predicted", !c.fits}, {"measured", *c.out_of_memory}};
    cases.push_back(std::move(one));
  }
  nlohmann::json families = nlohmann::json::object();
  for (const FamilySummary& f : r.families) families[f.family.empty() ? "-" : f.family] = summary_json(f.metrics);
  nlohmann::json excluded = nlohmann::json::array();
  for (const ExcludedCase& e : r.excluded) excluded.push_back({{"id", e.id}, {"reason", e.reason}});
  nlohmann::json failed = nlohmann::json::array();
  for (const FailedCase& f : r.failed) failed.push_back({{"id", f.id}, {"error", f.error}});
  nlohmann::json primary = nlohmann::json::object();
  for (const PrimarySummary& p : r.primary) {
    primary[p.family.empty() ? "all" : p.family] = {{"n", p.errors.n}, {"mape", p.errors.mape}, {"max_abs_error", p.errors.max_abs_error}};
  }
  nlohmann::json out = {{"suite", r.suite_file}, {"cases", cases},     {"summary", summary_json(r.summary)},
                        {"families", families},  {"primary", primary}, {"excluded", excluded},
                        {"failed", failed}};
  if (r.memory_verdicts.n > 0) {
    out["memory_verdicts"] = {{"n", r.memory_verdicts.n}, {"agree", r.memory_verdicts.agree}, {"disagree", r.memory_verdicts.disagree}};
  }
  return out;
}

std::string to_text(const ValidationReport& r) {
  std::ostringstream o;
  o << "validation suite " << r.suite_file << ": " << r.cases.size() << " case" << (r.cases.size() == 1 ? "" : "s");
  if (!r.excluded.empty()) o << " (" << r.excluded.size() << " excluded)";
  if (!r.failed.empty()) o << ", " << r.failed.size() << " more that could not be predicted (listed below)";
  o << "\n\n";
  std::size_t id_width = 6;
  std::vector<std::string> sources;  // numbered in order of first appearance
  for (const CaseResult& c : r.cases) {
    id_width = std::max(id_width, c.id.size() + 2);
    if (std::find(sources.begin(), sources.end(), c.source) == sources.end()) sources.push_back(c.source);
  }
  o << "  " << pad("case", id_width) << pad("metric", 26) << rpad("predicted", 12) << rpad("measured", 12) << rpad("error", 9)
    << "  source\n";
  for (const CaseResult& c : r.cases) {
    const auto source_number = std::find(sources.begin(), sources.end(), c.source) - sources.begin() + 1;
    bool first = true;
    for (const MetricResult& m : c.metrics) {
      o << "  " << pad(first ? c.id : "", id_width) << pad(to_string(m.metric), 26) << rpad(value_text(m.metric, m.predicted), 12)
        << rpad(value_text(m.metric, m.measured), 12) << rpad(percent(m.error), 9);
      if (first) {
        o << "  [" << source_number << "]";
        if (!c.fits) o << " (predicted not to fit in memory)";
      }
      o << "\n";
      first = false;
    }
    if (c.out_of_memory) {
      o << "  " << pad(first ? c.id : "", id_width) << pad("out_of_memory", 26) << rpad(!c.fits ? "yes" : "no", 12)
        << rpad(*c.out_of_memory ? "yes" : "no", 12) << rpad(*c.out_of_memory == !c.fits ? "agree" : "DISAGREE", 9);
      if (first) o << "  [" << source_number << "]";
      o << "\n";
    }
  }
  if (!r.summary.empty()) {  // some case measured a metric
    std::size_t family_width = 12;
    for (const FamilySummary& f : r.families) family_width = std::max(family_width, f.family.size() + 2);
    o << "\n  " << pad("family", family_width) << pad("metric", 26) << rpad("n", 5) << rpad("MAPE", 9) << rpad("max|err|", 10)
      << rpad("Spearman", 10) << "\n";
    summary_rows(o, "all", family_width, r.summary);
    if (r.families.size() > 1 || (r.families.size() == 1 && !r.families.front().family.empty())) {
      for (const FamilySummary& f : r.families) summary_rows(o, f.family.empty() ? "-" : f.family, family_width, f.metrics);
    }
    o << "\n  primary metric of each case (iteration time, else throughput):\n";
    for (const PrimarySummary& p : r.primary) {
      o << "  " << pad(p.family.empty() ? "all" : p.family, family_width) << pad("primary", 26) << rpad(std::to_string(p.errors.n), 5)
        << rpad(plain_percent(p.errors.mape), 9) << rpad(plain_percent(p.errors.max_abs_error), 10) << "\n";
    }
  }
  if (r.memory_verdicts.n > 0) {
    o << "\n  out-of-memory verdicts: " << r.memory_verdicts.agree << " of " << r.memory_verdicts.n << " agree";
    if (!r.memory_verdicts.disagree.empty()) {
      o << "; not:";
      for (const std::string& id : r.memory_verdicts.disagree) o << " " << id;
    }
    o << "\n";
  }
  if (!r.failed.empty()) {
    o << "\n  could not be predicted (bad input; not in the summaries):\n";
    for (const FailedCase& f : r.failed) o << "    " << f.id << ": " << f.error << "\n";
  }
  if (!r.excluded.empty()) {
    o << "\n  excluded:\n";
    for (const ExcludedCase& e : r.excluded) o << "    " << e.id << ": " << e.reason << "\n";
  }
  o << "\n  sources:\n";
  for (std::size_t i = 0; i < sources.size(); ++i) o << "    [" << i + 1 << "] " << sources[i] << "\n";
  return o.str();
}

}  // namespace trainsim::validate
