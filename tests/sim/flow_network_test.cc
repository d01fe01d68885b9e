#include "sim/flow_network.h"

#include <doctest/doctest.h>
#include <map>
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
  CHECK(net.has_pending());
  net.flush(TimePoint::zero(), out);
  CHECK(!net.has_pending());
  // Both at 50 GB/s: a ends at 20 ms, b has 1e9 left.
  CHECK(finish_of(out, a).seconds() == doctest::Approx(0.02));
  CHECK(net.speed_fraction(b) == doctest::Approx(0.5));
  out.clear();
  net.finish(a);
  net.flush(TimePoint::from_ps(20'000'000'000), out);
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
  net.flush(TimePoint::zero(), out);
  CHECK(net.speed_fraction(b) == doctest::Approx(0.3));
  CHECK(net.speed_fraction(a) == doctest::Approx(0.7));
}

TEST_CASE("sim/FlowNetwork: coefficients scale a flow's load on a link") {
  // A flow that puts 2 bytes on the link per byte of volume gets half the rate.
  FlowNetwork net({Bandwidth::gb_per_s(100)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand d{ResourceId{0}, 2.0};
  const auto f = net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), {&d, 1}, out);
  net.flush(TimePoint::zero(), out);
  CHECK(net.speed_fraction(f) == doctest::Approx(0.5));
  CHECK(finish_of(out, f).seconds() == doctest::Approx(0.02));
}

namespace {
// A fat-tree-like pattern: flows over pairs of 12 links with different rates and volumes.
struct Pattern {
  std::vector<std::vector<Demand>> demands;
  std::vector<double> rates_GBps, volumes;
};
Pattern pattern(int flows) {
  Pattern p;
  for (int i = 0; i < flows; ++i) {
    const auto a = static_cast<std::uint32_t>(i % 12), b = static_cast<std::uint32_t>((i * 5 + 3) % 12);
    std::vector<Demand> d{{ResourceId{a}, 1.0}};
    if (b != a) d.push_back({ResourceId{b}, 0.5 + 0.25 * (i % 3)});
    p.demands.push_back(d);
    p.rates_GBps.push_back(20.0 + 7.0 * (i % 5));
    p.volumes.push_back(1e8 * (1 + i % 7));
  }
  return p;
}
std::vector<Bandwidth> links() {
  std::vector<Bandwidth> c;
  for (int i = 0; i < 12; ++i) c.push_back(Bandwidth::gb_per_s(40.0 + 10.0 * (i % 4)));
  return c;
}
}  // namespace

TEST_CASE("sim/FlowNetwork: changes at one instant solved together give the rates of solving each") {
  const Pattern p = pattern(40);
  FlowNetwork each(links()), together(links());
  std::vector<FlowNetwork::Reschedule> out_each, out_together;
  std::vector<FlowNetwork::FlowId> ids_each, ids_together;
  for (std::size_t i = 0; i < p.volumes.size(); ++i) {
    ids_each.push_back(each.add(TimePoint::zero(), p.volumes[i], Bandwidth::gb_per_s(p.rates_GBps[i]), p.demands[i], out_each));
    each.flush(TimePoint::zero(), out_each);
    ids_together.push_back(
        together.add(TimePoint::zero(), p.volumes[i], Bandwidth::gb_per_s(p.rates_GBps[i]), p.demands[i], out_together));
  }
  together.flush(TimePoint::zero(), out_together);
  CHECK(together.stats().solves < each.stats().solves);
  CHECK(together.stats().solves <= 3);  // one per connected component of links (3 here)
  CHECK(4 * together.stats().solves < each.stats().solves);
  // The same max-min rates, and every flow has a finish time.
  std::map<FlowNetwork::FlowId, TimePoint> finish;
  for (const auto& r : out_together) finish[r.flow] = r.finish;
  for (std::size_t i = 0; i < ids_each.size(); ++i) {
    CHECK(together.speed_fraction(ids_together[i]) == doctest::Approx(each.speed_fraction(ids_each[i])).epsilon(1e-9));
    CHECK(finish.count(ids_together[i]) == 1);
  }
  // Some flows are held below their own maximum, or the test proves nothing.
  int slowed = 0;
  for (auto f : ids_together) slowed += together.speed_fraction(f) < 0.999 ? 1 : 0;
  CHECK(slowed > 10);

  // Finishing ten flows and starting five at one instant: one flush, the same rates again.
  const TimePoint t = TimePoint::from_ps(1'000'000);
  for (int i = 0; i < 10; ++i) {
    each.finish(ids_each[static_cast<std::size_t>(3 * i)]);
    each.flush(t, out_each);
    together.finish(ids_together[static_cast<std::size_t>(3 * i)]);
  }
  for (std::size_t i = 0; i < 5; ++i) {
    ids_each.push_back(each.add(t, p.volumes[i], Bandwidth::gb_per_s(p.rates_GBps[i]), p.demands[i], out_each));
    each.flush(t, out_each);
    ids_together.push_back(together.add(t, p.volumes[i], Bandwidth::gb_per_s(p.rates_GBps[i]), p.demands[i], out_together));
  }
  together.flush(t, out_together);
  for (std::size_t i = 0; i < ids_each.size(); ++i) {
    if (i < 30 && i % 3 == 0) continue;  // finished
    CHECK(together.speed_fraction(ids_together[i]) == doctest::Approx(each.speed_fraction(ids_each[i])).epsilon(1e-9));
  }
}

TEST_CASE("sim/FlowNetwork: more flows on one link than a solve takes all get a rate within capacity") {
  FlowNetwork net({Bandwidth::gb_per_s(100)});
  std::vector<FlowNetwork::Reschedule> out;
  const Demand d{ResourceId{0}, 1.0};
  std::vector<FlowNetwork::FlowId> ids;
  const std::size_t n = FlowNetwork::kMaxComponentFlows + 72;
  for (std::size_t i = 0; i < n; ++i) ids.push_back(net.add(TimePoint::zero(), 1e9, Bandwidth::gb_per_s(100), {&d, 1}, out));
  net.flush(TimePoint::zero(), out);
  std::map<FlowNetwork::FlowId, TimePoint> finish;
  for (const auto& r : out) finish[r.flow] = r.finish;
  double used = 0;
  for (auto f : ids) {
    CHECK(finish.count(f) == 1);
    used += net.speed_fraction(f) * 100;
  }
  CHECK(used <= 100 * (1 + 1e-9));
  CHECK(used >= 99);
}
