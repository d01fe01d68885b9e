// The NCCL calibration file: read, written back (what `trainsim calibrate` emits), read again.

#include <doctest/doctest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "config/hardware_reader.h"
#include "config/presets.h"
#include "sim/error.h"

using namespace trainsim;

TEST_CASE("topologies/NcclCalibration: nccl.json round-trips through to_json") {
  const std::string file = config::preset_file("calibration", "nccl", "test", "");
  const topo::NcclCalibration a = config::read_nccl_calibration(file);
  CHECK(a.base_latency_us[1][2] == doctest::Approx(8.4));  // Ring / Simple
  CHECK(a.hw_latency_us[0][4][2] == doctest::Approx(25));  // NVLink / NVLS / Simple
  CHECK(a.nvls_channels[2] == doctest::Approx(16));        // Hopper
  CHECK(a.buffer_bytes[2] == doctest::Approx(4194304));    // Simple: 4 MiB
  const std::string copy = "/tmp/trainsim_nccl_" + std::to_string(getpid()) + ".json";
  std::ofstream(copy) << config::to_json(a).dump(2);
  const topo::NcclCalibration b = config::read_nccl_calibration(copy);
  std::remove(copy.c_str());
  CHECK(b.base_latency_us == a.base_latency_us);
  CHECK(b.hw_latency_us == a.hw_latency_us);
  CHECK(b.per_ch_max_nvls_tree_bw == a.per_ch_max_nvls_tree_bw);
  CHECK(b.tree_correction == a.tree_correction);
  CHECK(b.intra_speeds_hopper == a.intra_speeds_hopper);
  CHECK(b.pcie_x16_bw == a.pcie_x16_bw);
  CHECK(b.max_threads == a.max_threads);
  CHECK(b.launch_us == a.launch_us);
  CHECK(b.ring_first_loop_fraction == a.ring_first_loop_fraction);
  CHECK(b.p2p_net_efficiency == a.p2p_net_efficiency);
}

TEST_CASE("topologies/NcclCalibration: a missing or out-of-range constant names its JSON path") {
  const std::string file = "/tmp/trainsim_nccl_bad_" + std::to_string(getpid()) + ".json";
  const topo::NcclCalibration a =
      config::read_nccl_calibration(config::preset_file("calibration", "nccl", "test", ""));
  config::Json doc = config::to_json(a);
  doc["execution"]["launch_us"] = -1;
  std::ofstream(file) << doc.dump();
  CHECK_THROWS_WITH_AS(config::read_nccl_calibration(file),
                       doctest::Contains("/execution/launch_us"), InputError);
  doc = config::to_json(a);
  doc.erase("runtime");
  std::ofstream(file) << doc.dump();
  CHECK_THROWS_WITH_AS(config::read_nccl_calibration(file), doctest::Contains("runtime"),
                       InputError);
  std::remove(file.c_str());
}
