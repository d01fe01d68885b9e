#include "validate/ring_fit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "config/json_reader.h"
#include "sim/error.h"
#include "topologies/collective_model.h"
#include "validate/least_squares.h"
#include "validate/nccl_tests.h"

namespace trainsim::validate {

namespace {

using config::Json;

constexpr double kMinBytes = 1 << 20;  // see ring_fit.h
constexpr double kMiB = 1 << 20;
// Extents of the start-up term tried: none, and 8 MiB to 1 GiB by factors of 2.
constexpr double kFillCandidates[] = {0, 8 * kMiB, 16 * kMiB, 32 * kMiB, 64 * kMiB, 128 * kMiB, 256 * kMiB, 512 * kMiB, 1024 * kMiB};

// Coefficients of (latency, step, 1/link, 1/user, 1/fill) in an all_reduce's time, sizes in GB and
// rates in GB/s so that times come out in microseconds (bytes / (1e3 x GB/s) = us). `fill_bytes`:
// how much of the message the start-up term covers (0: none).
std::array<double, 5> features(int ranks, double bytes, double fill_bytes) {
  const double n = ranks;
  const double kb = bytes / 1e3;
  return {1.0, 2 * (n - 1), 2 * (n - 1) / n * kb, kb, std::min(bytes, fill_bytes) / 1e3};
}

std::string size_label(std::int64_t bytes) {
  char buf[32];
  if (bytes >= (std::int64_t{1} << 30) && bytes % (std::int64_t{1} << 30) == 0) {
    std::snprintf(buf, sizeof buf, "%lld GiB", static_cast<long long>(bytes >> 30));
  } else {
    std::snprintf(buf, sizeof buf, "%.4g MiB", static_cast<double>(bytes) / kMiB);
  }
  return buf;
}

std::string text(const Json& record, const char* key) {
  const auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool starts_as_json(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char first = 0;
  while (in.get(first) && std::isspace(static_cast<unsigned char>(first))) {
  }
  return !in || first == '{' || first == '[' || first == '/';
}

bool is_collective_records(const Json& doc) {
  return doc.is_array() && !doc.empty() && doc.front().is_object() && doc.front().contains("collective");
}

std::vector<RingSweep> read_ring_sweeps(const std::string& file) {
  std::vector<RingSweep> out;
  const Json doc = starts_as_json(file) ? config::read_json_file(file) : Json();
  if (is_collective_records(doc)) {
    for (std::size_t i = 0; i < doc.size(); ++i) {
      const Json& r = doc[i];
      const std::string path = "/" + std::to_string(i);
      if (!r.is_object()) throw InputError(file, path, "expected a measurement record (an object)");
      if (text(r, "collective") != "all_reduce" || !r.contains("rows")) continue;
      const auto n_gpus = r.find("n_gpus");
      const auto n_nodes = r.find("n_nodes");
      if (n_gpus == r.end() || !n_gpus->is_number_integer() || n_nodes == r.end() || !n_nodes->is_number_integer()) continue;
      if (n_nodes->get<int>() != 1 || n_gpus->get<int>() < 2) continue;
      if (!r["rows"].is_array()) throw InputError(file, path + "/rows", "expected an array of rows");
      RingSweep s;
      s.id = text(r, "id");
      if (r.contains("hardware") && r["hardware"].is_object()) s.gpu = text(r["hardware"], "gpu");
      s.ranks = n_gpus->get<int>();
      for (std::size_t j = 0; j < r["rows"].size(); ++j) {
        const Json& row = r["rows"][j];
        const std::string rp = path + "/rows/" + std::to_string(j);
        if (!row.is_object() || !row.contains("bytes") || !row["bytes"].is_number_integer() || !row.contains("time_us") ||
            !row["time_us"].is_number()) {
          throw InputError(file, rp, "expected {\"bytes\": integer, \"time_us\": number, ...}");
        }
        RingSweepPoint p;
        p.bytes = row["bytes"].get<std::int64_t>();
        p.time_us = row["time_us"].get<double>();
        if (row.contains("inplace_time_us") && row["inplace_time_us"].is_number()) {
          const double in_place = row["inplace_time_us"].get<double>();
          if (in_place > 0) p.time_us = std::min(p.time_us, in_place);
        }
        if (p.bytes <= 0 || !(p.time_us > 0)) throw InputError(file, rp, "expected a positive size and time");
        s.points.push_back(p);
      }
      out.push_back(std::move(s));
    }
    return out;
  }
  const NcclTestsLog log = read_nccl_tests(file);
  bool p2p = false;
  if (!log.test.empty() && collective_of_test(log.test, file, &p2p) != sim::CollectiveKind::kAllReduce) return out;
  if (log.ranks < 2) {
    throw InputError(file, "", "an nccl-tests log for calibrate must list its devices (\"# Using devices\"): 2 or more GPUs of one node");
  }
  RingSweep s;
  s.id = std::filesystem::path(file).filename().string();
  s.ranks = log.ranks;
  for (const NcclTestsRow& row : log.rows) s.points.push_back(RingSweepPoint{row.bytes, row.best_time_us()});
  out.push_back(std::move(s));
  return out;
}

double ring_all_reduce_us(const topo::ComputeCalibration::RingCalibration& c, int ranks, double bytes) {
  return topo::measured_ring_cost(c, sim::CollectiveKind::kAllReduce, ranks, bytes)->time_us(bytes);
}

RingFit fit_intra_node_ring(const std::vector<RingSweep>& sweeps) {
  RingFit fit;
  fit.report.part = "intra-node ring (all_reduce sweeps)";
  struct Row {
    const RingSweep* sweep;
    RingSweepPoint point;
  };
  std::vector<Row> rows;
  std::set<int> counts;
  for (const RingSweep& s : sweeps) {
    fit.report.from.push_back(s.id);
    for (const RingSweepPoint& p : s.points) {
      if (static_cast<double>(p.bytes) < kMinBytes) continue;
      rows.push_back(Row{&s, p});
      counts.insert(s.ranks);
    }
  }
  if (rows.size() < 8 || counts.size() < 2) {
    fit.report.notes.emplace_back("needs 8 or more rows of 1 MiB and more from sweeps of at least two GPU counts: not fitted");
    return fit;
  }
  fit.report.notes.emplace_back("rows below 1 MiB left out (LL protocol and the measuring setup's launch floor, both in NCCL's "
                                "model); the fitted ring applies from min_bytes = 1 MiB up");
  // Relative residuals: each row divided by its measured time. The start-up's extent is not
  // linear: the least squares is solved for each candidate and the smallest residual kept.
  struct Solved {
    double fill_bytes = 0;
    Eigen::MatrixXd a;
    Eigen::VectorXd x;
    double ssr = std::numeric_limits<double>::infinity();
  };
  const Eigen::VectorXd y = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(rows.size()));
  Solved best;
  for (const double fill : kFillCandidates) {
    const int k = fill > 0 ? 5 : 4;
    Eigen::MatrixXd a(static_cast<Eigen::Index>(rows.size()), k);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::array<double, 5> f = features(rows[i].sweep->ranks, static_cast<double>(rows[i].point.bytes), fill);
      for (int j = 0; j < k; ++j) a(static_cast<Eigen::Index>(i), j) = f[static_cast<std::size_t>(j)] / rows[i].point.time_us;
    }
    const Eigen::VectorXd x = solve_nonnegative(a, y);
    if (!x.allFinite() || !(x(2) > 0) || !(x(3) > 0) || (k == 5 && !(x(4) > 0))) continue;
    const double ssr = (y - a * x).squaredNorm();
    if (ssr < best.ssr) best = Solved{fill, a, x, ssr};
  }
  if (!std::isfinite(best.ssr)) {
    fit.report.notes.emplace_back(
        "no candidate gave finite, positive rates (the sweeps do not separate the link and user-buffer terms): not fitted");
    return fit;
  }
  const Eigen::VectorXd& x = best.x;
  const std::vector<double> se = standard_errors(best.a, y, x);
  topo::ComputeCalibration::RingCalibration& c = fit.calibration;
  c.min_bytes = kMinBytes;
  c.latency_us = round_significant(x(0));
  c.step_us = round_significant(x(1));
  c.link_GBps = round_significant(1.0 / x(2));
  c.user_GBps = round_significant(1.0 / x(3));
  if (best.fill_bytes > 0) {
    c.fill_bytes = best.fill_bytes;
    c.fill_GBps = round_significant(1.0 / x(4));
  }
  fit.report.fitted = true;
  // Error bars; a rate r = 1/x has standard error se(x) / x^2.
  auto parameter = [&](const char* name, double value, double coef, double coef_se, bool rate) {
    FittedParameter p{name, value, std::nullopt, std::nullopt, ""};
    if (std::isfinite(coef_se) && coef > 0) {
      p.standard_error = round_significant(rate ? coef_se / (coef * coef) : coef_se, 2);
    } else {
      p.note = "held at its bound (0): no standard error";
    }
    fit.report.parameters.push_back(std::move(p));
  };
  parameter("latency_us", c.latency_us, x(0), se[0], false);
  parameter("step_us", c.step_us, x(1), se[1], false);
  parameter("link_GBps", c.link_GBps, x(2), se[2], true);
  parameter("user_GBps", c.user_GBps, x(3), se[3], true);
  if (best.fill_bytes > 0) {
    parameter("fill_GBps", c.fill_GBps, x(4), se[4], true);
    FittedParameter extent{"fill_bytes", c.fill_bytes, std::nullopt, std::nullopt,
                           "the candidate (0 and 8 MiB to 1 GiB, factor 2) with the smallest residual"};
    fit.report.parameters.push_back(std::move(extent));
  }
  std::vector<double> predicted, measured;
  for (const Row& r : rows) {
    const double t = ring_all_reduce_us(c, r.sweep->ranks, static_cast<double>(r.point.bytes));
    KernelResidual k;
    k.label = r.sweep->id + ": " + std::to_string(r.sweep->ranks) + " GPUs, " + size_label(r.point.bytes) + " (us)";
    k.measured = r.point.time_us;
    k.predicted = t;
    k.error = relative_error(t, r.point.time_us);
    fit.report.residuals.push_back(std::move(k));
    predicted.push_back(t);
    measured.push_back(r.point.time_us);
  }
  fit.report.errors = summarize(predicted, measured);
  return fit;
}

}  // namespace trainsim::validate
