#include "validate/host_fit.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "validate/validation_report.h"

namespace trainsim::validate {

HostFit fit_host_issue(const Suite& suite, topo::Architecture architecture, const topo::ComputeCalibration& calibration,
                       int jobs) {
  HostFit fit;
  fit.report.part = std::string("host time per task (") + topo::to_string(architecture) + ")";
  fit.host_issue_us = calibration.host_issue.microseconds();
  Suite mine;
  mine.file = suite.file;
  for (const Case& c : suite.cases) {
    if (c.scenario.cluster.gpu.architecture == architecture) mine.cases.push_back(c);
  }
  fit.cases = mine.cases.size();
  if (mine.cases.empty()) {
    fit.report.notes.emplace_back(std::string("no case runs on an ") + topo::to_string(architecture) +
                                  " GPU: the host time is kept from the base calibration");
    return fit;
  }
  ValidateOptions run;
  run.jobs = jobs;
  // Each simulated grid point: the cases' predictions and absolute log errors (first metric).
  struct Evaluated {
    std::vector<double> predicted, log_error;
  };
  std::map<int, Evaluated> grid;  // by host time in us
  std::vector<double> measured;
  std::vector<std::string> ids;
  auto evaluate = [&](int us) -> const Evaluated& {
    auto it = grid.find(us);
    if (it != grid.end()) return it->second;
    Suite priced = mine;
    for (Case& c : priced.cases) {
      c.scenario.cluster.gpu.calibration = calibration;
      c.scenario.cluster.gpu.calibration.host_issue = sim::Duration::from_us(us);
    }
    const ValidationReport r = validate_suite(priced, run);
    Evaluated e;
    const bool first = measured.empty();
    for (const CaseResult& c : r.cases) {
      const MetricResult& m = c.metrics.front();
      e.predicted.push_back(m.predicted);
      e.log_error.push_back(std::abs(std::log(time_like(m.metric, m.predicted) / time_like(m.metric, m.measured))));
      if (first) {
        measured.push_back(m.measured);
        ids.push_back(c.id + " " + to_string(m.metric));
      }
    }
    return grid.emplace(us, std::move(e)).first->second;
  };
  // The grid point minimising the summed log error over `pick` (ties: the smaller host time).
  auto best_of = [&](const std::vector<std::size_t>& pick) {
    int best = 0;
    double best_loss = std::numeric_limits<double>::infinity();
    for (const auto& [us, e] : grid) {
      double loss = 0;
      for (const std::size_t i : pick) loss += e.log_error[i];
      if (loss < best_loss - 1e-12) {
        best_loss = loss;
        best = us;
      }
    }
    return best;
  };
  std::vector<std::size_t> all(fit.cases);
  for (std::size_t i = 0; i < fit.cases; ++i) all[i] = i;
  constexpr int kCoarseStep = 10, kMax = 400;
  for (int us = 0; us <= kMax; us += kCoarseStep) evaluate(us);
  const int coarse = best_of(all);
  for (int us = std::max(0, coarse - kCoarseStep + 1); us < std::min(kMax, coarse + kCoarseStep); ++us) evaluate(us);
  const int chosen = best_of(all);
  fit.host_issue_us = chosen;
  {
    // Before: the base calibration's host time.
    const double base_us = calibration.host_issue.microseconds();
    const int nearest = static_cast<int>(std::lround(base_us));
    if (std::abs(base_us - nearest) < 1e-9 && nearest >= 0 && nearest <= kMax) {
      fit.before = summarize(evaluate(nearest).predicted, measured);
    }
  }
  {
    fit.interval_us = bootstrap_interval_90(fit.cases, [&](const std::vector<std::size_t>& pick) { return best_of(pick); });
    fit.report.parameters.push_back(FittedParameter{"host_issue_us", fit.host_issue_us, std::nullopt, fit.interval_us,
                                                    "bootstrap over the cases, on the simulated grid points"});
  }
  {
    // Leave one family out, at the grid point that fits the other families best.
    const std::vector<std::string> families = families_of(mine.cases);
    std::vector<double> predicted, held_measured;
    for (std::size_t k = 0; families.size() >= 2 && k < families.size(); ++k) {
      std::vector<std::size_t> train, held;
      for (std::size_t i = 0; i < fit.cases; ++i) (mine.cases[i].family == families[k] ? held : train).push_back(i);
      HostHeldOut fold;
      fold.family = families[k];
      fold.cases = held.size();
      fold.host_issue_us = best_of(train);
      const Evaluated& e = grid.at(static_cast<int>(fold.host_issue_us));
      std::vector<double> p, m;
      for (const std::size_t i : held) {
        p.push_back(e.predicted[i]);
        m.push_back(measured[i]);
      }
      fold.errors = summarize(p, m);
      predicted.insert(predicted.end(), p.begin(), p.end());
      held_measured.insert(held_measured.end(), m.begin(), m.end());
      fit.held_out.push_back(std::move(fold));
    }
    if (!fit.held_out.empty()) fit.held_out_errors = summarize(predicted, held_measured);
  }
  const Evaluated& at_fit = grid.at(chosen);
  fit.report.fitted = true;
  fit.report.from.push_back(suite.file);
  for (std::size_t i = 0; i < fit.cases; ++i) {
    const double error = (at_fit.predicted[i] - measured[i]) / measured[i];
    fit.report.residuals.push_back(KernelResidual{ids[i], measured[i], at_fit.predicted[i], error});
  }
  fit.report.errors = summarize(at_fit.predicted, measured);
  return fit;
}

}  // namespace trainsim::validate
