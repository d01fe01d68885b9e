#include "sim/flow_network.h"

#include <doctest/doctest.h>
#include <vector>

using namespace trainsim::sim;

namespace {
TimePoint finish_of(const std::vector<FlowNetwork::Reschedule>& r, FlowNetwork::FlowId f) {
  TimePoint t;
  for (const auto& x : r) {
    if (x.flow == f) t = x.finish;
  }
  return t;
}
}  // namespace

TEST_CASE("sim/FlowNetwork: a lone flow runs at its own maximum rate") {
  FlowNetwork net({Bandwidth::gb_per_s(100)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand d{ResourceId{0}, 1.0};
  const auto f = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(50), {&d, 1}, out);
  CHECK(finish_of(out, f).seconds() == doctest::Approx(0.02));
}

TEST_CASE("sim/FlowNetwork: two flows on one link share it and the survivor speeds up") {
  FlowNetwork net({Bandwidth::gb_per_s(100)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand d{ResourceId{0}, 1.0};
  const auto a = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), {&d, 1}, out);
  out.clear();
  const auto b = net.add(TimePoint::zero(), 2e9, Bandwidth::gb_per_s(100), {&d, 1}, out);
  // Both at 50 GB/s: a ends at 20 ms, b has 1e9 left.
  CHECK(finish_of(out, a).seconds() == doctest::Approx(0.02));
  CHECK(net.speed_fraction(b) == doctest::Approx(0.5));
  out.clear();
  net.finish(TimePoint::from_ps(20'000'000'000), a, out);
  // b alone again at 100 GB/s: 1e9 more bytes take 10 ms.
  CHECK(finish_of(out, b).seconds() == doctest::Approx(0.03));
}

TEST_CASE("sim/FlowNetwork: max-min fairness leaves spare capacity to unconstrained flows") {
  // Link 0: 100 GB/s shared by A and B; link 1: 30 GB/s used by B only.
  FlowNetwork net({Bandwidth::gb_per_s(100), Bandwidth::gb_per_s(30)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand da{ResourceId{0}, 1.0};
  const Demand db[] = {{ResourceId{0}, 1.0}, {ResourceId{1}, 1.0}};
  const auto a = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), {&da, 1}, out);
  const auto b = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), db, out);
  CHECK(net.speed_fraction(b) == doctest::Approx(0.3));
  CHECK(net.speed_fraction(a) == doctest::Approx(0.7));
}

TEST_CASE("sim/FlowNetwork: coefficients scale a flow's load on a link") {
  // A flow that puts 2 bytes on the link per byte of volume gets half the rate.
  FlowNetwork net({Bandwidth::gb_per_s(100)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand d{ResourceId{0}, 2.0};
  const auto f = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), {&d, 1}, out);
  CHECK(net.speed_fraction(f) == doctest::Approx(0.5));
  CHECK(finish_of(out, f).seconds() == doctest::Approx(0.02));
}
