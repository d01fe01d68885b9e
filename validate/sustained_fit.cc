#include "validate/sustained_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "sim/error.h"
#include "validate/validation_report.h"

namespace trainsim::validate {

Suite with_calibration(const Suite& suite, topo::Architecture architecture, topo::ComputeCalibration calibration,
                       double fraction, const std::optional<std::string>& family) {
  calibration.sustained_fraction = fraction;
  Suite out;
  out.file = suite.file;
  for (const Case& c : suite.cases) {
    if (c.scenario.cluster.gpu.architecture != architecture) continue;
    if (family && c.family != *family) continue;
    Case copy = c;
    copy.scenario.cluster.gpu.calibration = calibration;
    // The attention implementation the case names (MosaicML's FlashAttention-2, say) is priced
    // as the case file selected it, from this calibration's alternatives.
    const std::string& implementation = c.scenario.training.attention_implementation;
    if (!implementation.empty() && !copy.scenario.cluster.gpu.calibration.select_attention(implementation)) {
      throw InputError(suite.file, "/cases (id \"" + c.id + "\")/scenario/training/attention_implementation",
                       "expected an attention implementation the calibration has (\"" + calibration.attention.implementation +
                           "\" or an alternative), got \"" + implementation + "\"");
    }
    out.cases.push_back(std::move(copy));
  }
  return out;
}

namespace {

// Time-like view of a case's first metric, predicted and measured.
double predicted_time_like(const MetricResult& m) { return time_like(m.metric, m.predicted); }
double measured_time_like(const MetricResult& m) { return time_like(m.metric, m.measured); }

ErrorSummary first_metric_summary(const ValidationReport& r) {
  std::vector<double> predicted, measured;
  for (const CaseResult& c : r.cases) {
    predicted.push_back(c.metrics.front().predicted);
    measured.push_back(c.metrics.front().measured);
  }
  return summarize(predicted, measured);
}

}  // namespace

topo::ComputeCalibration scale_attention(topo::ComputeCalibration c, double scale) {
  c.attention_scale = scale;
  return c;
}

topo::ComputeCalibration scale_fp8(topo::ComputeCalibration c, double scale) {
  c.fp8_gemm_scale = scale;
  return c;
}

SustainedFit fit_sustained_fraction(const Suite& suite, topo::Architecture architecture,
                                    const topo::ComputeCalibration& calibration, const SustainedFitOptions& options) {
  SustainedFit fit;
  fit.report.part = std::string("sustained fraction (") + topo::to_string(architecture) + ")";
  fit.fraction = calibration.sustained_fraction;
  ValidateOptions run;
  run.jobs = options.jobs;
  // The scales being fitted start from 1 (the kernel models as benchmarked).
  topo::ComputeCalibration base = calibration;
  if (options.attention) base.attention_scale = 1.0;
  if (options.fp8) base.fp8_gemm_scale = 1.0;
  const Suite full = with_calibration(suite, architecture, base, 1.0);
  fit.cases = full.cases.size();
  if (full.cases.empty()) {
    fit.report.notes.emplace_back(std::string("no case runs on an ") + topo::to_string(architecture) +
                                  " GPU: the sustained fraction is kept from the base calibration");
    return fit;
  }
  bool any_fp8 = false;
  for (const Case& c : full.cases) any_fp8 = any_fp8 || c.scenario.training.precision == models::Precision::kFp8;
  const bool fit_fp8 = options.fp8 && any_fp8;
  constexpr double kLow = 0.7;
  const double step_back = 1.0 / kLow - 1.0;
  const ValidationReport at_one = validate_suite(full, run);
  const ValidationReport at_low = validate_suite(with_calibration(suite, architecture, base, kLow), run);
  std::optional<ValidationReport> attention_low, fp8_low;
  if (options.attention) {
    attention_low = validate_suite(with_calibration(suite, architecture, scale_attention(base, kLow), 1.0), run);
  }
  if (fit_fp8) fp8_low = validate_suite(with_calibration(suite, architecture, scale_fp8(base, kLow), 1.0), run);
  std::vector<double> a(fit.cases), b(fit.cases), c(fit.cases, 0.0), d(fit.cases, 0.0), target(fit.cases);
  for (std::size_t i = 0; i < fit.cases; ++i) {
    const double t1 = predicted_time_like(at_one.cases[i].metrics.front());
    const double tensor = std::max(0.0, (predicted_time_like(at_low.cases[i].metrics.front()) - t1) / step_back);
    if (attention_low) c[i] = std::clamp((predicted_time_like(attention_low->cases[i].metrics.front()) - t1) / step_back, 0.0, tensor);
    if (fp8_low) d[i] = std::clamp((predicted_time_like(fp8_low->cases[i].metrics.front()) - t1) / step_back, 0.0, tensor - c[i]);
    b[i] = tensor - c[i] - d[i];
    a[i] = t1 - tensor;
    target[i] = measured_time_like(at_one.cases[i].metrics.front());
  }
  auto model = [&](std::size_t i, double f, double g, double h) { return a[i] + b[i] / f + c[i] / (f * g) + d[i] / (f * h); };
  {
    // Before the fit: the base calibration's fraction, on the same model of each case's time.
    std::vector<double> predicted, measured;
    for (std::size_t i = 0; i < fit.cases; ++i) {
      predicted.push_back(model(i, calibration.sustained_fraction, options.attention ? calibration.attention_scale : 1.0,
                                fit_fp8 ? calibration.fp8_gemm_scale : 1.0));
      measured.push_back(target[i]);
    }
    fit.before = summarize(predicted, measured);
  }
  // The grid search over the cases `pick` (with repeats, for the bootstrap): f always, g and h
  // when asked, else held at `g0`, `h0`. Ties keep the first (smallest) grid point.
  struct Point {
    double f, g, h;
  };
  auto grid_fit = [&](const std::vector<std::size_t>& pick, bool fit_g, bool fit_h, double g0, double h0) {
    double best_loss = std::numeric_limits<double>::infinity();
    Point best{fit.fraction, g0, h0};
    const int g_steps = fit_g ? 130 : 0, h_steps = fit_h ? 130 : 0;
    for (int gs = 0; gs <= g_steps; ++gs) {
      const double g = fit_g ? 0.2 + 0.01 * gs : g0;
      for (int hs = 0; hs <= h_steps; ++hs) {
        const double h = fit_h ? 0.2 + 0.01 * hs : h0;
        for (int step = 150; step <= 500; ++step) {
          const double f = step / 500.0;
          double loss = 0;
          for (const std::size_t i : pick) loss += std::abs(std::log(model(i, f, g, h) / target[i]));
          if (loss < best_loss - 1e-12) {
            best_loss = loss;
            best = Point{f, g, h};
          }
        }
      }
    }
    return best;
  };
  // `base` with the scales this fit fits set to a grid point's g and h, rounded to the grid.
  struct Scaled {
    topo::ComputeCalibration calibration;
    std::optional<double> attention, fp8;
  };
  auto scaled = [&](double g, double h) {
    Scaled out{base, std::nullopt, std::nullopt};
    if (options.attention) {
      out.attention = std::round(g * 100.0) / 100.0;
      out.calibration = scale_attention(out.calibration, *out.attention);
    }
    if (fit_fp8) {
      out.fp8 = std::round(h * 100.0) / 100.0;
      out.calibration = scale_fp8(out.calibration, *out.fp8);
    }
    return out;
  };
  std::vector<std::size_t> all(fit.cases);
  for (std::size_t i = 0; i < fit.cases; ++i) all[i] = i;
  const Point chosen = grid_fit(all, options.attention, fit_fp8, 1.0, 1.0);
  fit.fraction = chosen.f;
  const double best_g = chosen.g, best_h = chosen.h;
  // Error bar of f: the fit repeated on bootstrap resamples of the cases (with replacement, a
  // fixed seed so the file is reproducible), g and h held at their fitted values; the 5th and
  // 95th percentiles of the refitted f.
  {
    fit.fraction_interval = bootstrap_interval_90(
        fit.cases, [&](const std::vector<std::size_t>& pick) { return grid_fit(pick, false, false, best_g, best_h).f; });
    FittedParameter p{"sustained_fraction", fit.fraction, std::nullopt, fit.fraction_interval, ""};
    if (options.attention || fit_fp8) {
      p.note = "bootstrap over the cases with the fitted scales held fixed";
    } else {
      p.note = "bootstrap over the cases";
    }
    fit.report.parameters.push_back(std::move(p));
  }
  // Leave one family out: the parameters refitted on the other families' cases, then the held-out
  // family simulated with them. g and h are refitted when the full fit fits them and the other
  // families' runs have fused attention (FP8 GEMMs); else they stay 1 (the kernels as benchmarked).
  {
    const std::vector<std::string> families = families_of(full.cases);
    std::vector<double> predicted, measured;
    for (std::size_t k = 0; families.size() >= 2 && k < families.size(); ++k) {
      std::vector<std::size_t> train;
      bool train_fp8 = false, train_attention = false;
      for (std::size_t i = 0; i < fit.cases; ++i) {
        if (full.cases[i].family == families[k]) continue;
        train.push_back(i);
        train_fp8 = train_fp8 || d[i] > 0;
        train_attention = train_attention || c[i] > 0;
      }
      const Point p = grid_fit(train, options.attention && train_attention, fit_fp8 && train_fp8, 1.0, 1.0);
      const Scaled priced = scaled(p.g, p.h);
      HeldOutFamily fold;
      fold.family = families[k];
      fold.fraction = p.f;
      fold.attention_scale = priced.attention;
      fold.fp8_scale = priced.fp8;
      const ValidationReport held =
          validate_suite(with_calibration(suite, architecture, priced.calibration, p.f, families[k]), run);
      fold.cases = held.cases.size();
      fold.errors = first_metric_summary(held);
      for (const CaseResult& r : held.cases) {
        predicted.push_back(r.metrics.front().predicted);
        measured.push_back(r.metrics.front().measured);
      }
      fit.held_out.push_back(std::move(fold));
    }
    if (!fit.held_out.empty()) fit.held_out_errors = summarize(predicted, measured);
  }
  const Scaled fitted = scaled(best_g, best_h);
  fit.attention_scale = fitted.attention;
  fit.fp8_scale = fitted.fp8;
  if (fit.attention_scale) {
    fit.report.parameters.push_back(FittedParameter{"attention_scale", *fit.attention_scale, std::nullopt, std::nullopt,
                                                    "fitted jointly with f on a grid: no error bar"});
  }
  if (fit.fp8_scale) {
    fit.report.parameters.push_back(FittedParameter{"fp8_gemm_scale", *fit.fp8_scale, std::nullopt, std::nullopt,
                                                    "fitted jointly with f on a grid: no error bar"});
  }
  const ValidationReport at_fit = validate_suite(with_calibration(suite, architecture, fitted.calibration, fit.fraction), run);
  fit.report.fitted = true;
  fit.report.from.push_back(suite.file);
  for (const CaseResult& r : at_fit.cases) {
    const MetricResult& m = r.metrics.front();
    fit.report.residuals.push_back(KernelResidual{r.id + " " + to_string(m.metric), m.measured, m.predicted, m.error});
  }
  fit.report.errors = first_metric_summary(at_fit);
  return fit;
}

}  // namespace trainsim::validate
