#include "topologies/cluster.h"

#include <doctest/doctest.h>

#include "config/scenario.h"

using namespace trainsim;

TEST_CASE("topologies/Cluster: a rail-optimized DGX fabric connects every GPU") {
  const topo::ClusterSpec spec = config::load_cluster("dgx-h100", 64);
  topo::Cluster cluster(spec);
  CHECK(cluster.num_gpus() == 512);
  CHECK(cluster.connected());
  // 8 rails x 2 scalable units of 32 nodes.
  CHECK(cluster.num_leaves() == 16);
  std::vector<sim::ResourceId> path;
  cluster.route(0, 7, path);  // same node: through the NVSwitch
  CHECK(path.size() == 2);
  path.clear();
  cluster.route(0, 8, path);  // next node, same rail, same leaf
  CHECK(path.size() == 4);
  path.clear();
  cluster.route(0, 8 * 40, path);  // another scalable unit: up through the core
  CHECK(path.size() == 6);
  path.clear();
  cluster.route(3, 8 * 40 + 3, path);
  CHECK(cluster.link_name(path[1]).find("leaf3") != std::string::npos);  // rail 3
}

TEST_CASE("topologies/Cluster: oversubscription shrinks leaf uplinks, not NIC ports") {
  topo::ClusterSpec spec = config::load_cluster("dgx-a100-80gb", 40);
  spec.inter_node.topology = "fat_tree";
  spec.inter_node.nodes_per_leaf = 4;
  spec.inter_node.oversubscription = 4.0;
  topo::Cluster cluster(spec);
  std::vector<sim::ResourceId> path;
  cluster.route(0, 8 * 20, path);
  REQUIRE(path.size() == 6);
  const double nic = cluster.link_capacity(path[1]).bytes_per_second();
  const double up = cluster.link_capacity(path[2]).bytes_per_second();
  CHECK(up == doctest::Approx(nic * 32 / 4.0));  // 4 nodes x 8 NICs per leaf, 4:1
  CHECK(cluster.connected());
}

TEST_CASE("topologies/Cluster: nodes per leaf follow the switch radix and the taper") {
  topo::InterNodeSpec net;
  net.switch_radix = 64;
  net.nics_per_node = 8;
  net.topology = "rail_optimized";
  CHECK(topo::nodes_per_leaf_for_radix(net) == 32);  // 32 ports down, 32 up (DGX H100 SuperPOD SU)
  net.oversubscription = 3.0;
  CHECK(topo::nodes_per_leaf_for_radix(net) == 48);  // 48 down, 16 up
  net.topology = "fat_tree";
  CHECK(topo::nodes_per_leaf_for_radix(net) == 6);  // 48 down ports / 8 NICs per node
  // The presets derive it: 40-port HDR leaves give the DGX A100 SuperPOD's 20-node units.
  CHECK(config::load_cluster("dgx-a100-80gb", 40).inter_node.nodes_per_leaf == 20);
  CHECK(config::load_cluster("dgx-h100", 40).inter_node.nodes_per_leaf == 32);
}

TEST_CASE("topologies/Cluster: route latency counts the switch hops") {
  const topo::ClusterSpec spec = config::load_cluster("dgx-h100", 64);
  topo::Cluster cluster(spec);
  const double hop = spec.inter_node.latency.seconds();
  CHECK(cluster.route_latency(0, 0).seconds() == 0.0);
  CHECK(cluster.route_latency(0, 1).seconds() ==
        doctest::Approx(spec.intra_node.latency.seconds()));
  CHECK(cluster.route_latency(0, 8).seconds() == doctest::Approx(hop));  // one leaf
  CHECK(cluster.route_latency(0, 8 * 40).seconds() ==
        doctest::Approx(3 * hop));  // leaf, spine, leaf
}
