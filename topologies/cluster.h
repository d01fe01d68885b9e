#pragma once
// Cluster: the machine as a graph (Boost.Graph inside): GPUs, one NVSwitch fabric per node,
// NICs, leaf switches and a non-blocking spine above them (one vertex: the spine layer with ideal
// load balancing). Every directed link is a resource of the flow network with its effective
// capacity and a latency. GPU g sits on node g / gpus_per_node and uses NIC
// (g mod gpus_per_node) * nics / gpus_per_node. Rail-optimized fabrics connect NIC i of every node
// of a scalable unit to leaf i of that unit; fat trees connect all NICs of a node to the leaf of
// its rack. Leaf uplinks carry the leaf's downlink capacity / oversubscription.

#include <memory>
#include <string>
#include <vector>

#include "sim/flow_network.h"
#include "topologies/hardware.h"

namespace trainsim::topo {

using sim::ResourceId;

class Cluster {
 public:
  explicit Cluster(const ClusterSpec& spec);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const ClusterSpec& spec() const { return spec_; }
  int num_gpus() const { return spec_.num_gpus(); }
  int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
  int nic_of(int gpu) const;  // global NIC index
  int leaf_of_nic(int nic) const;
  int num_leaves() const;

  std::size_t num_links() const;
  Bandwidth link_capacity(ResourceId link) const;
  std::string link_name(ResourceId link) const;
  // Multiplies one link's capacity (a degraded link or NIC).
  void scale_link(ResourceId link, double factor);
  // The GPU's link into its NIC and the NIC's link into the fabric (both directions).
  std::vector<ResourceId> nic_links(int gpu) const;
  // The GPU's NVLink (or PCIe) link into its node's switch and back.
  ResourceId to_switch(int gpu) const;
  ResourceId from_switch(int gpu) const;

  // Links on the route from GPU a to GPU b, in order (empty when a == b).
  void route(int a, int b, std::vector<ResourceId>& out) const;
  // Sum of the link latencies on that route (switch hops; zero when a == b).
  Duration route_latency(int a, int b) const;
  Duration link_latency(ResourceId link) const;
  // True when every GPU can reach every other (a breadth-first search over the graph).
  bool connected() const;
  std::size_t num_vertices() const;

 private:
  struct Impl;
  ClusterSpec spec_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim::topo
