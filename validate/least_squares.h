#pragma once
// Least squares with non-negative coefficients, shared by the kernel and collective fits.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <Eigen/Dense>

namespace trainsim::validate {

// Least squares A x ~ y with x >= 0: drop the most negative coefficient and solve again.
inline Eigen::VectorXd solve_nonnegative(const Eigen::MatrixXd& a, const Eigen::VectorXd& y) {
  std::vector<int> active;
  for (int c = 0; c < a.cols(); ++c) active.push_back(c);
  Eigen::VectorXd x = Eigen::VectorXd::Zero(a.cols());
  while (!active.empty()) {
    Eigen::MatrixXd sub(a.rows(), static_cast<Eigen::Index>(active.size()));
    for (std::size_t i = 0; i < active.size(); ++i) sub.col(static_cast<Eigen::Index>(i)) = a.col(active[i]);
    const Eigen::VectorXd s = sub.colPivHouseholderQr().solve(y);
    std::size_t worst = active.size();
    for (std::size_t i = 0; i < active.size(); ++i) {
      if (s(static_cast<Eigen::Index>(i)) < 0 && (worst == active.size() || s(static_cast<Eigen::Index>(i)) < s(static_cast<Eigen::Index>(worst)))) {
        worst = i;
      }
    }
    if (worst == active.size()) {
      x.setZero();
      for (std::size_t i = 0; i < active.size(); ++i) x(active[i]) = s(static_cast<Eigen::Index>(i));
      return x;
    }
    active.erase(active.begin() + static_cast<std::ptrdiff_t>(worst));
  }
  return x;
}


// Covariance of the coefficients of the least squares A x ~ y at `x`: sigma^2 (A_f^T A_f)^-1 over
// the free coefficients f (those not held at the bound 0), sigma^2 = |y - A x|^2 / (n - |f|).
// Rows and columns of a coefficient at its bound are NaN, as is everything when there are no
// more points than free coefficients.
inline Eigen::MatrixXd coefficient_covariance(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const Eigen::VectorXd& x) {
  Eigen::MatrixXd cov = Eigen::MatrixXd::Constant(a.cols(), a.cols(), std::numeric_limits<double>::quiet_NaN());
  std::vector<Eigen::Index> free;
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (x(j) > 0) free.push_back(j);
  }
  const Eigen::Index n = a.rows();
  const auto p = static_cast<Eigen::Index>(free.size());
  if (p == 0 || n <= p) return cov;
  // Columns scaled to unit norm first: the coefficients differ by many orders of magnitude.
  Eigen::MatrixXd sub(n, p);
  Eigen::VectorXd scale(p);
  for (Eigen::Index i = 0; i < p; ++i) {
    sub.col(i) = a.col(free[static_cast<std::size_t>(i)]);
    scale(i) = sub.col(i).norm();
    if (scale(i) <= 0) return cov;
    sub.col(i) /= scale(i);
  }
  const Eigen::VectorXd r = y - a * x;
  const double sigma2 = r.squaredNorm() / static_cast<double>(n - p);
  const Eigen::FullPivLU<Eigen::MatrixXd> lu(sub.transpose() * sub);
  if (!lu.isInvertible()) return cov;
  const Eigen::MatrixXd inverse = lu.inverse();
  for (Eigen::Index i = 0; i < p; ++i) {
    for (Eigen::Index j = 0; j < p; ++j) {
      cov(free[static_cast<std::size_t>(i)], free[static_cast<std::size_t>(j)]) = sigma2 * inverse(i, j) / (scale(i) * scale(j));
    }
  }
  return cov;
}

// Standard errors (square roots of the covariance's diagonal; NaN where it is).
inline std::vector<double> standard_errors(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const Eigen::VectorXd& x) {
  const Eigen::MatrixXd cov = coefficient_covariance(a, y, x);
  std::vector<double> se(static_cast<std::size_t>(a.cols()));
  for (Eigen::Index j = 0; j < a.cols(); ++j) se[static_cast<std::size_t>(j)] = std::sqrt(std::max(0.0, cov(j, j)));
  for (Eigen::Index j = 0; j < a.cols(); ++j) {
    if (!std::isfinite(cov(j, j))) se[static_cast<std::size_t>(j)] = std::numeric_limits<double>::quiet_NaN();
  }
  return se;
}

}  // namespace trainsim::validate
