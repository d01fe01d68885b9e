#include "validate/statistics.h"

#include <doctest/doctest.h>

using namespace trainsim;

TEST_CASE("validate/statistics: relative error is signed, against the measurement") {
  CHECK(validate::relative_error(110, 100) == doctest::Approx(0.10));
  CHECK(validate::relative_error(90, 100) == doctest::Approx(-0.10));
}

TEST_CASE("validate/statistics: MAPE and the largest absolute error") {
  const validate::ErrorSummary s = validate::summarize({110, 95, 100, 80}, {100, 100, 100, 100});
  CHECK(s.n == 4);
  CHECK(s.mape == doctest::Approx((0.10 + 0.05 + 0.0 + 0.20) / 4));
  CHECK(s.max_abs_error == doctest::Approx(0.20));
}

TEST_CASE("validate/statistics: Spearman correlation of ranks, ties averaged") {
  CHECK(*validate::spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == doctest::Approx(1.0));
  CHECK(*validate::spearman({1, 2, 3, 4}, {40, 30, 20, 10}) == doctest::Approx(-1.0));
  // Monotone but not linear: still 1.
  CHECK(*validate::spearman({1, 2, 3, 4, 5}, {1, 4, 9, 16, 1000}) == doctest::Approx(1.0));
  // Ties: ranks (1.5, 1.5, 3, 4) against (1, 2, 3, 4): rho = 0.9487 (Pearson of the ranks).
  CHECK(*validate::spearman({5, 5, 7, 9}, {1, 2, 3, 4}) == doctest::Approx(0.9486833));
  // Undefined below three points or without variation.
  CHECK_FALSE(validate::spearman({1, 2}, {1, 2}).has_value());
  CHECK_FALSE(validate::spearman({3, 3, 3}, {1, 2, 3}).has_value());
}
