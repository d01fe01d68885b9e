#include "topologies/cluster.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>

#include "sim/check.h"

namespace trainsim::topo {

// A named namespace, not an anonymous one: Cluster::Impl (external linkage) holds a Graph.
namespace cluster_graph {

enum class VertexKind { kGpu, kSwitch, kNic, kLeaf, kSpine };

struct VertexProps {
  VertexKind kind = VertexKind::kGpu;
  int index = 0;
};

struct EdgeProps {
  std::uint32_t id = 0;
};

using Graph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;

}  // namespace cluster_graph
using namespace cluster_graph;

struct Cluster::Impl {
  Graph graph;
  std::vector<double> capacity;  // bytes/s per directed link
  std::vector<Duration> latency;
  std::vector<std::string> name;
  std::vector<std::uint32_t> gpu_to_switch, switch_to_gpu, gpu_to_nic, nic_to_gpu;
  std::vector<std::uint32_t> nic_to_leaf, leaf_to_nic, leaf_to_spine, spine_to_leaf;
  std::vector<int> leaf_of_nic;
  int num_leaves = 0;

  std::uint32_t link(Vertex from, Vertex to, double bytes_per_s, Duration delay,
                     std::string label) {
    const auto id = static_cast<std::uint32_t>(capacity.size());
    boost::add_edge(from, to, EdgeProps{id}, graph);
    capacity.push_back(bytes_per_s);
    latency.push_back(delay);
    name.push_back(std::move(label));
    return id;
  }
};

Cluster::Cluster(const ClusterSpec& spec) : spec_(spec), impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  const int gpn = spec_.gpus_per_node;
  const int nodes = spec_.num_nodes;
  const int nics = std::max(1, spec_.inter_node.nics_per_node);
  const int gpus = gpn * nodes;
  const NcclCalibration& nccl = spec_.nccl;
  // Effective capacities. NVLink: NCCL's per-link effective speed times the link count (topo.h
  // SM80 20 GB/s, SM90 20.6, SM100 40.1). PCIe GPU-NIC: NCCL's model (topo.cc), Gen4 x16 = 24 GB/s,
  // Gen5 x16 = 48 GB/s. NIC and switch ports: line rate times the share RDMA achieves
  // (NcclCalibration::p2p_net_efficiency, ~96% measured by NVIDIA, nccl #412 / nccl-tests #267).
  const double pcie = spec_.pcie_x16_GBps() * 1e9;
  double nvlink = spec_.nvlink_GBps() * 1e9;
  if (nvlink <= 0) nvlink = pcie;
  const Duration hop = spec_.inter_node.latency;
  const double port = spec_.inter_node.nic_bandwidth.bytes_per_second() * nccl.p2p_net_efficiency;

  std::vector<Vertex> gpu_v, switch_v, nic_v, leaf_v;
  for (int g = 0; g < gpus; ++g)
    gpu_v.push_back(boost::add_vertex(VertexProps{VertexKind::kGpu, g}, m.graph));
  for (int n = 0; n < nodes; ++n)
    switch_v.push_back(boost::add_vertex(VertexProps{VertexKind::kSwitch, n}, m.graph));
  for (int i = 0; i < nodes * nics; ++i)
    nic_v.push_back(boost::add_vertex(VertexProps{VertexKind::kNic, i}, m.graph));

  const int per_leaf = std::max(1, spec_.inter_node.nodes_per_leaf);
  const bool rail = spec_.inter_node.topology == "rail_optimized";
  const int units = (nodes + per_leaf - 1) / per_leaf;
  m.num_leaves = rail ? units * nics : units;
  for (int l = 0; l < m.num_leaves; ++l)
    leaf_v.push_back(boost::add_vertex(VertexProps{VertexKind::kLeaf, l}, m.graph));
  const Vertex spine = boost::add_vertex(VertexProps{VertexKind::kSpine, 0}, m.graph);

  for (int g = 0; g < gpus; ++g) {
    const int node = g / gpn;
    const std::string gname = "gpu" + std::to_string(g);
    m.gpu_to_switch.push_back(m.link(gpu_v[static_cast<std::size_t>(g)],
                                     switch_v[static_cast<std::size_t>(node)], nvlink,
                                     spec_.intra_node.latency, gname + "->nvswitch"));
    m.switch_to_gpu.push_back(m.link(switch_v[static_cast<std::size_t>(node)],
                                     gpu_v[static_cast<std::size_t>(g)], nvlink, Duration::zero(),
                                     "nvswitch->" + gname));
    const int nic = nic_of(g);
    m.gpu_to_nic.push_back(m.link(gpu_v[static_cast<std::size_t>(g)],
                                  nic_v[static_cast<std::size_t>(nic)], pcie, Duration::zero(),
                                  gname + "->nic" + std::to_string(nic)));
    m.nic_to_gpu.push_back(m.link(nic_v[static_cast<std::size_t>(nic)],
                                  gpu_v[static_cast<std::size_t>(g)], pcie, Duration::zero(),
                                  "nic" + std::to_string(nic) + "->" + gname));
  }
  std::vector<int> leaf_ports(static_cast<std::size_t>(m.num_leaves), 0);
  for (int i = 0; i < nodes * nics; ++i) {
    const int node = i / nics, local = i % nics;
    const int leaf = rail ? (node / per_leaf) * nics + local : node / per_leaf;
    m.leaf_of_nic.push_back(leaf);
    ++leaf_ports[static_cast<std::size_t>(leaf)];
    const std::string nname = "nic" + std::to_string(i), lname = "leaf" + std::to_string(leaf);
    m.nic_to_leaf.push_back(m.link(nic_v[static_cast<std::size_t>(i)],
                                   leaf_v[static_cast<std::size_t>(leaf)], port, hop,
                                   nname + "->" + lname));
    m.leaf_to_nic.push_back(m.link(leaf_v[static_cast<std::size_t>(leaf)],
                                   nic_v[static_cast<std::size_t>(i)], port, Duration::zero(),
                                   lname + "->" + nname));
  }
  const double over = std::max(1.0, spec_.inter_node.oversubscription);
  for (int l = 0; l < m.num_leaves; ++l) {
    const double up = leaf_ports[static_cast<std::size_t>(l)] * port / over;
    const std::string lname = "leaf" + std::to_string(l);
    m.leaf_to_spine.push_back(
        m.link(leaf_v[static_cast<std::size_t>(l)], spine, up, hop, lname + "->spine"));
    m.spine_to_leaf.push_back(
        m.link(spine, leaf_v[static_cast<std::size_t>(l)], up, hop, "spine->" + lname));
  }
}

Cluster::~Cluster() = default;

int Cluster::nic_of(int gpu) const {
  const int gpn = spec_.gpus_per_node;
  const int nics = std::max(1, spec_.inter_node.nics_per_node);
  const int local = gpu % gpn;
  return (gpu / gpn) * nics + (local * nics) / gpn;
}

int Cluster::leaf_of_nic(int nic) const {
  return impl_->leaf_of_nic[static_cast<std::size_t>(nic)];
}
int Cluster::num_leaves() const { return impl_->num_leaves; }
std::size_t Cluster::num_links() const { return impl_->capacity.size(); }
std::size_t Cluster::num_vertices() const { return boost::num_vertices(impl_->graph); }

Bandwidth Cluster::link_capacity(ResourceId link) const {
  return Bandwidth::bytes_per_s(impl_->capacity[sim::index(link)]);
}

std::string Cluster::link_name(ResourceId link) const { return impl_->name[sim::index(link)]; }

void Cluster::scale_link(ResourceId link, double factor) {
  impl_->capacity[sim::index(link)] *= factor;
}

std::vector<ResourceId> Cluster::nic_links(int gpu) const {
  const Impl& m = *impl_;
  const auto g = static_cast<std::size_t>(gpu);
  const auto nic = static_cast<std::size_t>(nic_of(gpu));
  return {ResourceId{m.gpu_to_nic[g]}, ResourceId{m.nic_to_gpu[g]}, ResourceId{m.nic_to_leaf[nic]},
          ResourceId{m.leaf_to_nic[nic]}};
}

ResourceId Cluster::to_switch(int gpu) const {
  return ResourceId{impl_->gpu_to_switch[static_cast<std::size_t>(gpu)]};
}
ResourceId Cluster::from_switch(int gpu) const {
  return ResourceId{impl_->switch_to_gpu[static_cast<std::size_t>(gpu)]};
}

void Cluster::route(int a, int b, std::vector<ResourceId>& out) const {
  if (a == b) return;
  const Impl& m = *impl_;
  const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
  if (node_of(a) == node_of(b)) {
    out.push_back(ResourceId{m.gpu_to_switch[ua]});
    out.push_back(ResourceId{m.switch_to_gpu[ub]});
    return;
  }
  const auto na = static_cast<std::size_t>(nic_of(a)), nb = static_cast<std::size_t>(nic_of(b));
  out.push_back(ResourceId{m.gpu_to_nic[ua]});
  out.push_back(ResourceId{m.nic_to_leaf[na]});
  const int la = m.leaf_of_nic[na], lb = m.leaf_of_nic[nb];
  if (la != lb) {
    out.push_back(ResourceId{m.leaf_to_spine[static_cast<std::size_t>(la)]});
    out.push_back(ResourceId{m.spine_to_leaf[static_cast<std::size_t>(lb)]});
  }
  out.push_back(ResourceId{m.leaf_to_nic[nb]});
  out.push_back(ResourceId{m.nic_to_gpu[ub]});
}

Duration Cluster::link_latency(ResourceId link) const { return impl_->latency[sim::index(link)]; }

Duration Cluster::route_latency(int a, int b) const {
  std::vector<ResourceId> path;
  route(a, b, path);
  Duration total;
  for (ResourceId r : path) total += link_latency(r);
  return total;
}

bool Cluster::connected() const {
  const Graph& g = impl_->graph;
  const std::size_t n = boost::num_vertices(g);
  std::vector<boost::default_color_type> color(n);
  // Every GPU reaches the first GPU's switch and, through the fabric, every other GPU: search
  // from GPU 0 and check that every GPU vertex was reached.
  boost::breadth_first_search(g, boost::vertex(0, g),
                              boost::color_map(boost::make_iterator_property_map(
                                  color.begin(), boost::get(boost::vertex_index, g))));
  for (std::size_t v = 0; v < n; ++v) {
    if (g[v].kind == VertexKind::kGpu && color[v] == boost::white_color) return false;
  }
  return true;
}

}  // namespace trainsim::topo
