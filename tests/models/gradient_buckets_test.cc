#include "models/gradient_buckets.h"

#include <doctest/doctest.h>

using namespace trainsim::models;

TEST_CASE("models/buckets: a bucket closes at the gradient that fills it, dense and expert apart") {
  // Backward order: layer 1 (an expert group, then dense), layer 0, then the embedding.
  const std::vector<ParamGroup> groups = {{30, false, 1}, {50, true, 1}, {30, false, 1}, {30, false, 0},
                                          {50, true, 0},  {10, false, 0}, {40, false, -1}};
  const auto b = make_buckets(groups, 60);
  REQUIRE(b.size() == 3);
  // Dense: 30+30 closes at group 2 (>= 60), then 30+10+40 at the last group; expert: 50+50 at group 4.
  CHECK(b[0].params == 60);
  CHECK(b[0].closing_group == 2);
  CHECK_FALSE(b[0].expert);
  CHECK(b[0].first_unit == 1);
  CHECK(b[1].expert);
  CHECK(b[1].params == 100);
  CHECK(b[1].closing_group == 4);
  CHECK(b[2].params == 80);
  CHECK(b[2].closing_group == 6);
  CHECK(b[2].first_unit == -1);
  CHECK(b[2].last_unit == 0);
  std::int64_t dense = 0, expert = 0;
  for (const auto& x : b) (x.expert ? expert : dense) += x.params;
  CHECK(dense == 140);
  CHECK(expert == 100);
}

TEST_CASE("models/buckets: size 0 gives one bucket per buffer, closing with its last gradient") {
  const std::vector<ParamGroup> groups = {{30, false, 1}, {50, true, 1}, {30, false, 0}};
  const auto b = make_buckets(groups, 0);
  REQUIRE(b.size() == 2);
  CHECK(b[0].expert);
  CHECK(b[0].closing_group == 1);
  CHECK(b[1].params == 60);
  CHECK(b[1].closing_group == 2);
}
