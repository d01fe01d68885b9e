#include "config/hardware_reader.h"

#include <limits>

#include "config/presets.h"

namespace trainsim::config {

namespace {


using sim::Bandwidth;
using sim::Bytes;
using sim::Duration;
using sim::FlopRate;

topo::GemmCalibration read_gemm(ObjectReader r) {
  topo::GemmCalibration g;
  r.allow({"description", "fit"});
  g.max_efficiency = r.require_double("max_efficiency", 0.01, 1.0);
  g.wave_overhead = Duration::from_seconds(r.require_double("wave_overhead_us", 0, 1e6) * 1e-6);
  g.launch_overhead = Duration::from_seconds(r.require_double("launch_overhead_us", 0, 1e6) * 1e-6);
  const Json* tiles = r.raw("tiles");
  if (tiles == nullptr || !tiles->is_array() || tiles->empty()) r.fail("tiles", "expected a non-empty array of [m, n] tile sizes");
  g.tiles.clear();
  for (std::size_t i = 0; i < tiles->size(); ++i) {
    const Json& t = (*tiles)[i];
    if (!t.is_array() || t.size() != 2 || !t[0].is_number_integer() || !t[1].is_number_integer() ||
        t[0].get<std::int64_t>() < 1 || t[1].get<std::int64_t>() < 1 || t[0].get<std::int64_t>() > 4096 ||
        t[1].get<std::int64_t>() > 4096) {
      throw InputError(r.file_of("tiles"), join_path(r.path_of("tiles"), i),
                       "expected a tile [m, n] of two integers in [1, 4096], got " + describe(t));
    }
    g.tiles.push_back({t[0].get<std::int64_t>(), t[1].get<std::int64_t>()});
  }
  r.finish();
  return g;
}

topo::AttentionPassCalibration read_attention_pass(ObjectReader r) {
  topo::AttentionPassCalibration p;
  r.allow({"description"});
  p.efficiency = r.require_double("efficiency", 0.01, 1.0);
  p.softmax_rate = r.get_double("softmax_Telements_per_s", 0, 0, 1e6) * 1e12;
  p.softmax_overlap = r.get_double("softmax_overlap", 0, 0, 1);
  p.row_overhead = r.get_double("row_overhead", 0, 0, 1e3);
  p.dropout_rate = r.get_double("dropout_Telements_per_s", 0, 0, 1e6) * 1e12;
  r.finish();
  return p;
}

template <std::size_t N>
std::array<double, N> read_row(ObjectReader& r, const std::string& key, double min, double max) {
  const Json* v = r.raw(key);
  if (v == nullptr || !v->is_array() || v->size() != N) {
    r.fail(key, "expected an array of " + std::to_string(N) + " numbers" + (v ? ", got " + describe(*v) : ""));
  }
  std::array<double, N> out{};
  for (std::size_t i = 0; i < N; ++i) {
    const Json& x = (*v)[i];
    if (!x.is_number() || x.get<double>() < min || x.get<double>() > max) {
      throw InputError(r.file_of(key), join_path(r.path_of(key), i),
                       "expected a number in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + describe(x));
    }
    out[i] = x.get<double>();
  }
  return out;
}

std::vector<double> read_list(ObjectReader& r, const std::string& key) {
  const Json* v = r.raw(key);
  if (v == nullptr || !v->is_array() || v->empty()) r.fail(key, "expected a non-empty array of numbers");
  std::vector<double> out;
  for (std::size_t i = 0; i < v->size(); ++i) {
    const Json& x = (*v)[i];
    if (!x.is_number() || !(x.get<double>() > 0) || x.get<double>() > 1e4) {
      throw InputError(r.file_of(key), join_path(r.path_of(key), i), "expected a positive number, got " + describe(x));
    }
    out.push_back(x.get<double>());
  }
  return out;
}

constexpr const char* kAlgorithms[] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
constexpr const char* kArchs[] = {"volta", "ampere", "hopper", "blackwell"};

// {"Tree": [LL, LL128, Simple], ...} for every algorithm.
std::array<std::array<double, 3>, 7> read_algorithm_table(ObjectReader r) {
  std::array<std::array<double, 3>, 7> out{};
  for (std::size_t a = 0; a < 7; ++a) out[a] = read_row<3>(r, kAlgorithms[a], 0, 1e4);
  r.finish();
  return out;
}

// {"volta": [1 node, 2 nodes, more], ...}
std::array<std::array<double, 3>, 4> read_arch_table(ObjectReader r) {
  std::array<std::array<double, 3>, 4> out{};
  for (std::size_t a = 0; a < 4; ++a) out[a] = read_row<3>(r, kArchs[a], 0, 1e4);
  r.finish();
  return out;
}

std::array<double, 4> read_arch_values(ObjectReader r, double min, double max) {
  std::array<double, 4> out{};
  for (std::size_t a = 0; a < 4; ++a) out[a] = r.require_double(kArchs[a], min, max);
  r.finish();
  return out;
}

}  // namespace

topo::ComputeCalibration read_compute_calibration(const std::string& file) {
  const Json doc = read_json_file(file);
  ObjectReader r(doc, file, "");
  r.allow({"description", "gpu", "fit", "sources"});
  topo::ComputeCalibration c;
  c.source = r.require_string("source");
  ObjectReader gemm = r.object("gemm");
  gemm.allow({"description"});
  c.gemm_16bit = read_gemm(gemm.object("bf16"));
  c.gemm_fp8 = gemm.has("fp8") ? read_gemm(gemm.object("fp8")) : c.gemm_16bit;
  c.gemm_tf32 = gemm.has("tf32") ? read_gemm(gemm.object("tf32")) : c.gemm_16bit;
  gemm.finish();
  ObjectReader flash = r.object("flash_attention");
  flash.allow({"description", "sources", "fit"});
  c.attention.tile = flash.get_int("tile", c.attention.tile, 1, 4096);
  c.attention.implementation = flash.get_string("implementation", "");
  c.attention.forward = read_attention_pass(flash.object("forward"));
  c.attention.backward = read_attention_pass(flash.object("backward"));
  flash.finish();
  if (const Json* alternatives = r.raw("flash_attention_alternatives")) {
    if (!alternatives->is_object()) r.fail("flash_attention_alternatives", "expected an object of implementations");
    for (const auto& [name, value] : alternatives->items()) {
      ObjectReader a(value, file, "/flash_attention_alternatives/" + name);
      topo::AttentionCalibration alt;
      alt.implementation = name;
      alt.description = a.get_string("description", "");
      alt.speed = a.get_double("speed", 1.0, 0.05, 20.0);
      if (a.has("like")) {
        // Priced as another implementation's kernel model at `speed` (resolved below).
        alt.like = a.require_string("like");
        for (const char* key : {"tile", "forward", "backward"}) {
          if (a.has(key)) a.fail(key, std::string("not with \"like\": the passes are those of \"") + alt.like + "\"");
        }
      } else {
        alt.tile = a.get_int("tile", alt.tile, 1, 4096);
        alt.forward = read_attention_pass(a.object("forward"));
        alt.backward = read_attention_pass(a.object("backward"));
      }
      a.finish();
      if (name.empty() || name == c.attention.implementation) r.fail("flash_attention_alternatives", "expected names other than flash_attention's implementation");
      c.attention_alternatives.push_back(std::move(alt));
    }
    const std::string unresolved = c.resolve_like_attention();
    if (!unresolved.empty()) {
      ObjectReader a((*alternatives)[unresolved], file, "/flash_attention_alternatives/" + unresolved);
      a.fail("like", "expected flash_attention's implementation (\"" + c.attention.implementation +
                         "\") or an alternative with passes of its own");
    }
  }
  ObjectReader mem = r.object("memory_bound");
  mem.allow({"description", "sources"});
  c.memory_efficiency = mem.require_double("bandwidth_efficiency", 0.01, 1.0);
  c.memory_kernel_overhead = Duration::from_seconds(mem.require_double("kernel_overhead_us", 0, 1e6) * 1e-6);
  c.optimizer_efficiency = mem.require_double("optimizer_bandwidth_efficiency", 0.01, 1.0);
  mem.finish();
  if (r.has("training")) {
    ObjectReader training = r.object("training");
    training.allow({"description", "sources", "fit"});
    c.sustained_fraction = training.require_double("sustained_fraction", 0.05, 1.0);
    c.attention_scale = training.get_double("attention_scale", 1.0, 0.05, 2.0);
    c.fp8_gemm_scale = training.get_double("fp8_gemm_scale", 1.0, 0.05, 2.0);
    c.speed_spread = training.get_double("speed_spread", topo::ComputeCalibration::kDefaultSpeedSpread, 0.0, 0.2);
    c.host_issue = Duration::from_seconds(training.get_double("host_issue_us", 0.0, 0.0, 1e5) * 1e-6);
    training.finish();
  }
  if (r.has("intra_node_ring")) {
    ObjectReader ring = r.object("intra_node_ring");
    ring.allow({"description", "sources"});
    topo::ComputeCalibration::RingCalibration rc;
    rc.min_bytes = ring.require_double("min_bytes", 0, 1e15);
    rc.latency_us = ring.require_double("latency_us", 0, 1e4);
    rc.step_us = ring.require_double("step_us", 0, 1e3);
    rc.link_GBps = ring.require_double("link_GBps", 1e-3, 1e5);
    rc.user_GBps = ring.require_double("user_GBps", 1e-3, 1e6);
    rc.fill_bytes = ring.get_double("fill_bytes", 0.0, 0, 1e15);
    rc.fill_GBps = ring.get_double("fill_GBps", 0.0, 0, 1e6);
    if ((rc.fill_bytes > 0) != (rc.fill_GBps > 0)) {
      ring.fail("fill_GBps", "expected fill_bytes and fill_GBps both positive (a start-up term) or both absent");
    }
    ring.finish();
    c.intra_node_ring = rc;
  }
  // The record of the in-training fit, when it has one: how well the calibration reproduced the
  // runs it was fitted to. The rest of "fit" only documents.
  if (const Json* fit = r.raw("fit")) {
    if (!fit->is_object()) r.fail("fit", "expected an object (the record of how the calibration was fitted)");
    if (fit->contains("training")) {
      ObjectReader record((*fit)["training"], file, "/fit/training");
      record.allow({"from", "mape_before", "notes", "error_bars", "description"});
      topo::ComputeCalibration::Accuracy a;
      a.architecture = record.require_string("architecture");
      a.cases = record.require_int("cases", 1, 1000000);
      a.mape = record.require_double("mape", 0, 100);
      a.max_abs_error = record.require_double("max_abs_error", 0, 1000);
      if (record.has("held_out")) {
        ObjectReader out = record.object("held_out");
        out.allow({"by", "cases", "max_abs_error", "families"});
        a.held_out_mape = out.require_double("mape", 0, 100);
        out.finish();
      }
      record.finish();
      c.accuracy = a;
    }
    if (fit->contains("checks")) {
      const Json& list = (*fit)["checks"];
      if (!list.is_array()) r.fail("fit", "expected \"checks\" to be an array of suite checks");
      for (std::size_t i = 0; i < list.size(); ++i) {
        ObjectReader record(list[i], file, "/fit/checks/" + std::to_string(i));
        topo::ComputeCalibration::Check k;
        k.suite = record.require_string("suite");
        k.architecture = record.require_string("architecture");
        k.cases = record.require_int("cases", 1, 1000000);
        k.mape = record.require_double("mape", 0, 100);
        k.max_abs_error = record.require_double("max_abs_error", 0, 1000);
        k.mean_time_error = record.require_double("mean_time_error", -1, 1000);
        record.finish();
        c.checks.push_back(std::move(k));
      }
    }
  }
  r.finish();
  return c;
}

topo::NcclCalibration read_nccl_calibration(const std::string& file) {
  const Json doc = read_json_file(file);
  ObjectReader r(doc, file, "");
  r.allow({"description", "sources", "nccl_version"});
  topo::NcclCalibration c;
  c.source = r.require_string("source");
  c.base_latency_us = read_algorithm_table(r.object("base_latency_us"));
  ObjectReader hw = r.object("hw_latency_us");
  c.hw_latency_us[0] = read_algorithm_table(hw.object("nvlink"));
  c.hw_latency_us[1] = read_algorithm_table(hw.object("pci"));
  c.hw_latency_us[2] = read_algorithm_table(hw.object("net"));
  hw.finish();
  c.ll_max_bw = read_arch_table(r.object("ll_max_bw"));
  c.per_ch_max_ring_ll128_bw = read_arch_table(r.object("per_ch_max_ring_ll128_bw"));
  c.per_ch_max_tree_ll128_bw = read_arch_table(r.object("per_ch_max_tree_ll128_bw"));
  c.per_ch_max_tree_bw = read_arch_table(r.object("per_ch_max_tree_bw"));
  c.per_ch_max_nvls_tree_bw = read_arch_table(r.object("per_ch_max_nvls_tree_bw"));
  ObjectReader corr = r.object("tree_correction");
  c.tree_correction[0] = read_row<24>(corr, "LL", 0, 1);
  c.tree_correction[1] = read_row<24>(corr, "LL128", 0, 1);
  c.tree_correction[2] = read_row<24>(corr, "Simple", 0, 1);
  corr.finish();
  c.nvls_efficiency = read_arch_values(r.object("nvls_efficiency"), 0, 1);
  c.nvlink_link_bw = read_arch_values(r.object("nvlink_link_bw_GBps"), 0, 1e3);
  ObjectReader speeds = r.object("graph_search_speeds_GBps");
  c.intra_speeds_pre_hopper = read_list(speeds, "intra_pre_hopper");
  c.inter_speeds_pre_hopper = read_list(speeds, "inter_pre_hopper");
  c.intra_speeds_hopper = read_list(speeds, "intra_hopper");
  c.inter_speeds_hopper = read_list(speeds, "inter_hopper");
  c.intra_speeds_blackwell = read_list(speeds, "intra_blackwell");
  c.inter_speeds_blackwell = read_list(speeds, "inter_blackwell");
  speeds.finish();
  c.net_overhead_us = r.require_double("net_overhead_us", 0, 1e3);
  c.net_overhead_amd_us = r.require_double("net_overhead_amd_us", 0, 1e3);
  c.plateau_factor = r.require_double("plateau_factor", 1, 10);
  c.ll_ring_fraction = r.require_double("ll_ring_fraction", 0.01, 1);
  c.ll128_efficiency = r.require_double("ll128_efficiency", 0.01, 1);
  c.tree_efficiency = r.require_double("tree_efficiency", 0.01, 1);
  c.tree_ll_divisor = r.require_double("tree_ll_divisor", 1, 100);
  const auto ll128 = read_row<2>(r, "tree_ll128_factors", 0.01, 1);
  c.tree_ll128_intra_factor = ll128[0];
  c.tree_ll128_inter_factor = ll128[1];
  ObjectReader pat = r.object("pat");
  c.pat_efficiency = pat.require_double("efficiency", 0.01, 1);
  c.pat_log_latency_divisor = pat.require_double("log_latency_divisor", 0.1, 100);
  c.pat_rank_latency_us = pat.require_double("rank_latency_us", 0, 1e3);
  pat.finish();
  ObjectReader collnet = r.object("collnet");
  c.collnet_inter_efficiency = collnet.require_double("inter_efficiency", 0.01, 1);
  c.collnet_direct_hopper_efficiency = collnet.require_double("direct_hopper_efficiency", 0.01, 1);
  c.collnet_arity_latency_us = collnet.require_double("arity_latency_us", 0, 1e3);
  collnet.finish();
  ObjectReader pcie = r.object("pcie_x16_GBps");
  c.pcie_x16_bw = {pcie.require_double("gen3", 0.1, 1e4), pcie.require_double("gen4", 0.1, 1e4),
                   pcie.require_double("gen5", 0.1, 1e4), pcie.require_double("gen6", 0.1, 1e4)};
  pcie.finish();
  ObjectReader search = r.object("search");
  search.allow({"description"});
  c.search_speed_ratio = search.require_double("speed_ratio", 0, 1);
  c.dup_channels_min_bw = search.require_double("dup_channels_min_bw", 0, 1e4);
  c.dup_channels_sm90_bw = search.require_double("dup_channels_sm90_bw", 0, 1e4);
  c.max_channels = static_cast<int>(search.require_int("max_channels", 1, 1024));
  c.multi_node_dup_bw = search.require_double("multi_node_dup_bw", 0, 1e4);
  c.multi_node_dup_below = static_cast<int>(search.require_int("multi_node_dup_below", 1, 1024));
  c.ring_max_channels = static_cast<int>(search.require_int("ring_max_channels", 1, 1024));
  c.max_nvls_arity = static_cast<int>(search.require_int("max_nvls_arity", 1, 1024));
  c.max_direct_arity = static_cast<int>(search.require_int("max_direct_arity", 1, 1024));
  search.finish();
  ObjectReader rt = r.object("runtime");
  rt.allow({"description", "sources"});
  c.steps = static_cast<int>(rt.require_int("steps", 1, 1024));
  c.buffer_bytes = read_row<3>(rt, "buffer_bytes", 1024, 1e10);
  c.ll128_data_fraction = rt.require_double("ll128_data_fraction", 0.01, 1);
  c.ring_chunk_steps = static_cast<int>(rt.require_int("ring_chunk_steps", 1, 1024));
  c.nvls_chunk_bytes = rt.require_double("nvls_chunk_bytes", 1024, 1e10);
  c.nvls_channels = read_arch_values(rt.object("nvls_channels"), 0, 1024);
  c.nvls_channels_multi_node = read_arch_values(rt.object("nvls_channels_multi_node"), 0, 1024);
  c.max_threads = read_row<3>(rt, "max_threads", 32, 4096);
  c.thread_threshold = read_row<3>(rt, "thread_threshold", 1, 1e6);
  rt.finish();
  ObjectReader ex = r.object("execution");
  ex.allow({"description", "sources"});
  c.launch_us = ex.require_double("launch_us", 0, 1e4);
  c.ring_first_loop_fraction = ex.require_double("ring_first_loop_fraction", 0, 10);
  c.nvls_pipeline_stages = static_cast<int>(ex.require_int("nvls_pipeline_stages", 1, 64));
  ex.finish();
  ObjectReader p2p = r.object("p2p");
  p2p.allow({"description", "sources"});
  c.p2p_nvlink_efficiency = p2p.require_double("nvlink_efficiency", 0.01, 1);
  c.p2p_net_efficiency = p2p.require_double("net_efficiency", 0.01, 1);
  c.p2p_latency_us = p2p.require_double("latency_us", 0, 1e4);
  ObjectReader chunk = p2p.object("chunk_bytes");
  c.p2p_net_chunk_bytes = chunk.require_double("net", 1024, 1e10);
  c.p2p_nvlink_chunk_bytes = chunk.require_double("nvlink", 1024, 1e10);
  c.p2p_pcie_chunk_bytes = chunk.require_double("pcie", 1024, 1e10);
  chunk.finish();
  c.p2p_net_channel_GBps = p2p.require_double("net_channel_GBps", 0.1, 1e4);
  c.p2p_peers_per_batch = static_cast<int>(p2p.require_int("peers_per_batch", 1, 1024));
  p2p.finish();
  r.finish();
  return c;
}

topo::GpuSpec read_gpu(const std::string& name_or_file, const std::string& from_file, const std::string& path) {
  const std::string file = resolve_file(name_or_file, "gpus", from_file, path);
  const Json doc = read_json_file(file);
  ObjectReader r(doc, file, "");
  r.allow({"description", "sources"});
  topo::GpuSpec g;
  g.name = r.require_string("name");
  g.architecture = static_cast<topo::Architecture>(r.get_choice("architecture", 0, {"ampere", "hopper", "blackwell"}));
  g.dense_16bit = FlopRate::tflops(r.require_double("dense_16bit_tflops", 1, 1e6));
  g.dense_tf32 = FlopRate::tflops(r.require_double("dense_tf32_tflops", 1, 1e6));
  g.dense_fp8 = FlopRate::tflops(r.get_double("dense_fp8_tflops", 0, 0, 1e6));
  g.dense_fp4 = FlopRate::tflops(r.get_double("dense_fp4_tflops", 0, 0, 1e6));
  g.fp32 = FlopRate::tflops(r.require_double("fp32_tflops", 0.1, 1e6));
  g.memory = Bytes(static_cast<std::int64_t>(r.require_double("memory_GiB", 1, 1e5) * 1073741824.0));
  g.memory_bandwidth = Bandwidth::gb_per_s(r.require_double("memory_bandwidth_GBps", 1, 1e6));
  g.sm_count = r.require_int("sm_count", 1, 100000);
  g.l2_cache = Bytes(static_cast<std::int64_t>(r.require_double("l2_cache_MB", 0, 1e5) * 1e6));
  g.nvlink_generation = static_cast<int>(r.get_int("nvlink_generation", 0, 0, 10));
  g.nvlink_links = static_cast<int>(r.get_int("nvlink_links", 0, 0, 1000));
  g.nvlink_bandwidth = Bandwidth::gb_per_s(r.get_double("nvlink_bandwidth_GBps", 0, 0, 1e6));
  g.host_copy_bandwidth = Bandwidth::gb_per_s(r.get_double("host_copy_GBps", 0, 0, 1e6));
  const std::string cal = r.require_string("calibration");
  g.calibration = read_compute_calibration(resolve_file(cal, "calibration", file, "/calibration"));
  r.finish();
  return g;
}

topo::ClusterSpec read_cluster(const Json& section, const std::string& file, const std::string& path) {
  Json preset;
  std::string preset_path;
  ObjectReader r(section, file, path);
  r.allow({"description", "sources"});
  if (section.is_object() && section.contains("preset")) {
    const std::string name = r.require_string("preset");
    preset_path = preset_file("clusters", name, file, join_path(path, "preset"));
    preset = read_json_file(preset_path);
    if (preset.is_object() && preset.contains("preset")) {
      throw InputError(preset_path, "/preset", "a preset cannot name another preset");
    }
    r.set_base(preset, preset_path, "");
  }
  topo::ClusterSpec c;
  c.name = r.get_string("name", "custom cluster");
  c.gpu = read_gpu(r.require_string("gpu"), r.file_of("gpu"), r.path_of("gpu"));
  c.gpus_per_node = static_cast<int>(r.require_int("gpus_per_node", 1, 1024));
  const std::optional<std::int64_t> nodes = r.get_optional_int("num_nodes", 1, 1 << 20);
  const std::optional<std::int64_t> gpus = r.get_optional_int("num_gpus", 1, std::int64_t{1} << 24);
  if (gpus) {
    if (section.contains("num_nodes") && !section["num_nodes"].is_null()) {
      r.fail("num_gpus", "give num_nodes or num_gpus, not both");
    }
    if (*gpus % c.gpus_per_node != 0) {
      r.fail("num_gpus", "expected a multiple of gpus_per_node (" + std::to_string(c.gpus_per_node) +
                             "): GPUs must fill whole nodes, got " + std::to_string(*gpus));
    }
    c.num_nodes = static_cast<int>(*gpus / c.gpus_per_node);
  } else {
    c.num_nodes = static_cast<int>(nodes.value_or(1));
  }
  if (static_cast<std::int64_t>(c.num_nodes) * c.gpus_per_node > (std::int64_t{1} << 22)) {
    r.fail(gpus ? "num_gpus" : "num_nodes", "more than 4,194,304 GPUs is not supported");
  }
  ObjectReader intra = r.object("intra_node");
  intra.allow({"description", "sources"});
  c.intra_node.fabric = intra.get_choice("fabric", 0, {"nvswitch", "pcie"}) == 0 ? "nvswitch" : "pcie";
  c.intra_node.nvswitch_generation = static_cast<int>(intra.get_int("nvswitch_generation", 0, 0, 10));
  c.intra_node.nvswitches = static_cast<int>(intra.get_int("nvswitches", 0, 0, 1024));
  c.intra_node.nvls = intra.get_bool("nvls", false);
  c.intra_node.bandwidth = Bandwidth::gb_per_s(intra.require_double("bandwidth_GBps", 0.1, 1e6));
  c.intra_node.latency = Duration::from_seconds(intra.get_double("latency_us", 0.5, 0, 1e4) * 1e-6);
  if (c.intra_node.nvls && c.intra_node.fabric != "nvswitch") {
    intra.fail("nvls", "NVLink SHARP needs an NVSwitch fabric; this node's fabric is PCIe");
  }
  if (c.intra_node.nvls && c.intra_node.nvswitch_generation != 0 && c.intra_node.nvswitch_generation < 3) {
    intra.fail("nvls", "NVLink SHARP needs NVSwitch generation 3 or later, got generation " +
                           std::to_string(c.intra_node.nvswitch_generation));
  }
  intra.finish();
  ObjectReader inter = r.object("inter_node");
  inter.allow({"description", "sources"});
  c.inter_node.topology = inter.get_choice("topology", 0, {"rail_optimized", "fat_tree"}) == 0 ? "rail_optimized" : "fat_tree";
  c.inter_node.nics_per_node = static_cast<int>(inter.require_int("nics_per_node", 1, 64));
  c.inter_node.nic = inter.get_string("nic", "");
  c.inter_node.nic_bandwidth = Bandwidth::gbit_per_s(inter.require_double("nic_bandwidth_Gbps", 0.1, 1e5));
  c.inter_node.switch_radix = static_cast<int>(inter.get_int("switch_radix", 64, 2, 4096));
  c.inter_node.oversubscription = inter.get_double("oversubscription", 1.0, 1.0, 1000.0);
  const std::optional<std::int64_t> per_leaf = inter.get_optional_int("nodes_per_leaf", 1, 1 << 20);
  c.inter_node.nodes_per_leaf =
      per_leaf ? static_cast<int>(*per_leaf) : topo::nodes_per_leaf_for_radix(c.inter_node);
  c.inter_node.latency = Duration::from_seconds(inter.get_double("latency_us", 1.0, 0, 1e4) * 1e-6);
  c.inter_node.nic_latency = Duration::from_seconds(inter.get_double("nic_latency_us", 0.0, 0, 1e5) * 1e-6);
  c.inter_node.gpudirect_rdma = inter.get_bool("gpudirect_rdma", true);
  c.inter_node.sharp = inter.get_bool("sharp", false);
  // NICs grouped behind each GPU as one device (hardware.h): the spec counts devices from here on.
  const int nics = c.inter_node.nics_per_node;
  c.inter_node.nics_per_gpu = static_cast<int>(inter.get_int("nics_per_gpu", 1, 1, 64));
  if (nics % c.inter_node.nics_per_gpu != 0) {
    inter.fail("nics_per_gpu", "expected a divisor of nics_per_node (" + std::to_string(nics) + "), got " +
                                   std::to_string(c.inter_node.nics_per_gpu));
  }
  c.inter_node.nics_per_node = nics / c.inter_node.nics_per_gpu;
  // Each GPU needs its own group.
  if (c.inter_node.nics_per_gpu > 1 && c.inter_node.nics_per_node < c.gpus_per_node) {
    inter.fail("nics_per_gpu", std::to_string(c.inter_node.nics_per_gpu) + " NICs per GPU leave " +
                                   std::to_string(c.inter_node.nics_per_node) + " groups for " + std::to_string(c.gpus_per_node) +
                                   " GPUs per node: expected nics_per_node = gpus_per_node x nics_per_gpu (" +
                                   std::to_string(c.gpus_per_node * c.inter_node.nics_per_gpu) + ")");
  }
  // A node with more NICs than GPUs must say how its GPUs use them, unless it is part of a
  // preset's node (a GPU count set over the preset's: 4 GPUs of a DGX), which keeps one device
  // per GPU and leaves the rest idle.
  const bool part_of_preset_node =
      inter.file_of("nics_per_node") == preset_path && r.file_of("gpus_per_node") != preset_path;
  if (c.inter_node.nics_per_node > c.gpus_per_node && !part_of_preset_node) {
    inter.fail("nics_per_node", std::to_string(nics) + " NICs for " + std::to_string(c.gpus_per_node) +
                                    " GPUs per node: give inter_node.nics_per_gpu, the NICs behind each GPU that act as "
                                    "one device (AWS p5: 4 EFA NICs per GPU), or count only the NICs the GPUs use");
  }
  c.inter_node.nic_bandwidth =
      Bandwidth::bytes_per_s(c.inter_node.nic_bandwidth.bytes_per_second() * c.inter_node.nics_per_gpu);
  inter.finish();
  c.pcie_generation = static_cast<int>(r.get_int("pcie_generation", 4, 3, 6));
  // NCCL treats every CPU but an x86 AMD one as Intel (src/graph/tuning.cc getNetOverhead: 1 us
  // unless x86 AMD; the LL bandwidth row likewise): "arm" (Grace) behaves as "intel".
  static const char* const kVendors[] = {"intel", "amd", "arm"};
  c.cpu_vendor = kVendors[r.get_choice("cpu_vendor", 0, {"intel", "amd", "arm"})];
  // NCCL's own tuning constants unless the cluster names other ones.
  const std::string nccl = r.get_string("nccl_calibration", "nccl.json");
  c.nccl = read_nccl_calibration(resolve_file(nccl, "calibration", r.file_of("nccl_calibration"), r.path_of("nccl_calibration")));
  if (r.has("calibration")) {
    const std::string cal = r.require_string("calibration");
    c.gpu.calibration = read_compute_calibration(resolve_file(cal, "calibration", r.file_of("calibration"), r.path_of("calibration")));
  }
  if (c.intra_node.nvls && c.gpu.architecture == topo::Architecture::kAmpere) {
    intra.fail("nvls", "NVLink SHARP needs NVSwitch gen3 (Hopper or later); this cluster's GPU is Ampere");
  }
  r.finish();
  return c;
}

namespace {

Json gemm_json(const topo::GemmCalibration& g) {
  Json tiles = Json::array();
  for (const auto& t : g.tiles) tiles.push_back({t[0], t[1]});
  return Json{{"max_efficiency", g.max_efficiency},
              {"wave_overhead_us", g.wave_overhead.microseconds()},
              {"launch_overhead_us", g.launch_overhead.microseconds()},
              {"tiles", tiles}};
}

}  // namespace

Json to_json(const topo::ComputeCalibration& c) {
  Json out;
  out["source"] = c.source;
  out["gemm"] = Json{{"bf16", gemm_json(c.gemm_16bit)}, {"fp8", gemm_json(c.gemm_fp8)}, {"tf32", gemm_json(c.gemm_tf32)}};
  auto pass = [](const topo::AttentionPassCalibration& p) {
    Json j{{"efficiency", p.efficiency}, {"softmax_Telements_per_s", p.softmax_rate * 1e-12},
           {"softmax_overlap", p.softmax_overlap}, {"row_overhead", p.row_overhead}};
    if (p.dropout_rate > 0) {
      char rate[32];  // as fitted (4 significant digits), without the binary noise of the unit change
      std::snprintf(rate, sizeof rate, "%.4g", p.dropout_rate * 1e-12);
      j["dropout_Telements_per_s"] = std::strtod(rate, nullptr);
    }
    return j;
  };
  out["flash_attention"] = Json{{"implementation", c.attention.implementation},
                                {"tile", c.attention.tile},
                                {"forward", pass(c.attention.forward)},
                                {"backward", pass(c.attention.backward)}};
  if (!c.attention_alternatives.empty()) {
    Json alternatives = Json::object();
    for (const topo::AttentionCalibration& a : c.attention_alternatives) {
      Json alt = a.like.empty() ? Json{{"tile", a.tile}, {"forward", pass(a.forward)}, {"backward", pass(a.backward)}}
                                : Json{{"like", a.like}};
      if (a.speed != 1.0 || !a.like.empty()) alt["speed"] = a.speed;
      if (!a.description.empty()) alt["description"] = a.description;
      alternatives[a.implementation] = alt;
    }
    out["flash_attention_alternatives"] = alternatives;
  }
  out["memory_bound"] = Json{{"bandwidth_efficiency", c.memory_efficiency},
                             {"kernel_overhead_us", c.memory_kernel_overhead.microseconds()},
                             {"optimizer_bandwidth_efficiency", c.optimizer_efficiency}};
  if (c.intra_node_ring) {
    out["intra_node_ring"] = Json{{"min_bytes", c.intra_node_ring->min_bytes},
                                  {"latency_us", c.intra_node_ring->latency_us},
                                  {"step_us", c.intra_node_ring->step_us},
                                  {"link_GBps", c.intra_node_ring->link_GBps},
                                  {"user_GBps", c.intra_node_ring->user_GBps}};
    if (c.intra_node_ring->fill_GBps > 0) {
      out["intra_node_ring"]["fill_bytes"] = c.intra_node_ring->fill_bytes;
      out["intra_node_ring"]["fill_GBps"] = c.intra_node_ring->fill_GBps;
    }
  }
  out["training"] = Json{{"sustained_fraction", c.sustained_fraction},
                         {"attention_scale", c.attention_scale},
                         {"fp8_gemm_scale", c.fp8_gemm_scale},
                         {"host_issue_us", c.host_issue.microseconds()},
                         {"speed_spread", c.speed_spread}};
  return out;
}

Json to_json(const topo::NcclCalibration& c) {
  auto alg_table = [](const std::array<std::array<double, 3>, 7>& t) {
    Json o;
    for (std::size_t a = 0; a < 7; ++a) o[kAlgorithms[a]] = t[a];
    return o;
  };
  auto arch_table = [](const std::array<std::array<double, 3>, 4>& t) {
    Json o;
    for (std::size_t a = 0; a < 4; ++a) o[kArchs[a]] = t[a];
    return o;
  };
  auto arch_values = [](const std::array<double, 4>& t) {
    Json o;
    for (std::size_t a = 0; a < 4; ++a) o[kArchs[a]] = t[a];
    return o;
  };
  Json out;
  out["source"] = c.source;
  out["base_latency_us"] = alg_table(c.base_latency_us);
  out["hw_latency_us"] = Json{{"nvlink", alg_table(c.hw_latency_us[0])},
                              {"pci", alg_table(c.hw_latency_us[1])},
                              {"net", alg_table(c.hw_latency_us[2])}};
  out["ll_max_bw"] = arch_table(c.ll_max_bw);
  out["per_ch_max_ring_ll128_bw"] = arch_table(c.per_ch_max_ring_ll128_bw);
  out["per_ch_max_tree_ll128_bw"] = arch_table(c.per_ch_max_tree_ll128_bw);
  out["per_ch_max_tree_bw"] = arch_table(c.per_ch_max_tree_bw);
  out["per_ch_max_nvls_tree_bw"] = arch_table(c.per_ch_max_nvls_tree_bw);
  out["tree_correction"] = Json{{"LL", c.tree_correction[0]}, {"LL128", c.tree_correction[1]}, {"Simple", c.tree_correction[2]}};
  out["nvls_efficiency"] = arch_values(c.nvls_efficiency);
  out["nvlink_link_bw_GBps"] = arch_values(c.nvlink_link_bw);
  out["graph_search_speeds_GBps"] = Json{{"intra_pre_hopper", c.intra_speeds_pre_hopper},
                                         {"inter_pre_hopper", c.inter_speeds_pre_hopper},
                                         {"intra_hopper", c.intra_speeds_hopper},
                                         {"inter_hopper", c.inter_speeds_hopper},
                                         {"intra_blackwell", c.intra_speeds_blackwell},
                                         {"inter_blackwell", c.inter_speeds_blackwell}};
  out["net_overhead_us"] = c.net_overhead_us;
  out["net_overhead_amd_us"] = c.net_overhead_amd_us;
  out["plateau_factor"] = c.plateau_factor;
  out["ll_ring_fraction"] = c.ll_ring_fraction;
  out["ll128_efficiency"] = c.ll128_efficiency;
  out["tree_efficiency"] = c.tree_efficiency;
  out["tree_ll_divisor"] = c.tree_ll_divisor;
  out["tree_ll128_factors"] = Json::array({c.tree_ll128_intra_factor, c.tree_ll128_inter_factor});
  out["pat"] = Json{{"efficiency", c.pat_efficiency},
                    {"log_latency_divisor", c.pat_log_latency_divisor},
                    {"rank_latency_us", c.pat_rank_latency_us}};
  out["collnet"] = Json{{"inter_efficiency", c.collnet_inter_efficiency},
                        {"direct_hopper_efficiency", c.collnet_direct_hopper_efficiency},
                        {"arity_latency_us", c.collnet_arity_latency_us}};
  out["pcie_x16_GBps"] = Json{{"gen3", c.pcie_x16_bw[0]}, {"gen4", c.pcie_x16_bw[1]},
                              {"gen5", c.pcie_x16_bw[2]}, {"gen6", c.pcie_x16_bw[3]}};
  out["search"] = Json{{"speed_ratio", c.search_speed_ratio},
                       {"dup_channels_min_bw", c.dup_channels_min_bw},
                       {"dup_channels_sm90_bw", c.dup_channels_sm90_bw},
                       {"max_channels", c.max_channels},
                       {"multi_node_dup_bw", c.multi_node_dup_bw},
                       {"multi_node_dup_below", c.multi_node_dup_below},
                       {"ring_max_channels", c.ring_max_channels},
                       {"max_nvls_arity", c.max_nvls_arity},
                       {"max_direct_arity", c.max_direct_arity}};
  out["runtime"] = Json{{"steps", c.steps},
                        {"buffer_bytes", c.buffer_bytes},
                        {"ll128_data_fraction", c.ll128_data_fraction},
                        {"ring_chunk_steps", c.ring_chunk_steps},
                        {"nvls_chunk_bytes", c.nvls_chunk_bytes},
                        {"nvls_channels", arch_values(c.nvls_channels)},
                        {"nvls_channels_multi_node", arch_values(c.nvls_channels_multi_node)},
                        {"max_threads", c.max_threads},
                        {"thread_threshold", c.thread_threshold}};
  out["execution"] = Json{{"launch_us", c.launch_us},
                          {"ring_first_loop_fraction", c.ring_first_loop_fraction},
                          {"nvls_pipeline_stages", c.nvls_pipeline_stages}};
  out["p2p"] = Json{{"nvlink_efficiency", c.p2p_nvlink_efficiency},
                    {"net_efficiency", c.p2p_net_efficiency},
                    {"latency_us", c.p2p_latency_us},
                    {"chunk_bytes", Json{{"net", c.p2p_net_chunk_bytes},
                                         {"nvlink", c.p2p_nvlink_chunk_bytes},
                                         {"pcie", c.p2p_pcie_chunk_bytes}}},
                    {"net_channel_GBps", c.p2p_net_channel_GBps},
                    {"peers_per_batch", c.p2p_peers_per_batch}};
  return out;
}

}  // namespace trainsim::config
