// sim/fabric_config.cc: see fabric_config.h.
#include "sim/fabric_config.h"

#include <algorithm>
#include <cstdint>

namespace megascale::sim {
namespace {

// GpuProfile::nvlink_gbs is bidirectional GB/s; FabricSpec wants Gb/s per direction.
double nvlink_gbps_of(const model::GpuProfile& gpu) { return gpu.nvlink_gbs / 2.0 * 8.0; }


}  // namespace

network::FabricSpec fabric_spec(const model::NetworkConfig& net, const model::HardwareConfig& hw,
                                const model::GpuProfile& gpu, int gpus) {
  // Whole servers: a job on part of a node (4 of 8 GPUs), or whose last node
  // is part-used, runs on the first `gpus` GPUs of a fabric of whole servers,
  // as the closed form counts its servers (model/fabric_tiers.h); the fabric
  // builder refuses a GPU count that is not a multiple of the server's.
  const int per_server = std::max(hw.gpus_per_node, 1);
  gpus = static_cast<int>((static_cast<int64_t>(gpus) + per_server - 1) / per_server * per_server);
  network::FabricSpec s = network::fabric_preset(net.preset, gpus);
  s.gpus_per_server = hw.gpus_per_node;
  s.nics_per_server = hw.nics_per_node;
  s.nic_gbps = hw.nic_gbps;
  s.switch_radix = net.switch_radix;
  s.switch_port_gbps = net.switch_port_gbps;
  s.split_ports = net.split_ports;
  s.tiers = net.tiers;
  s.oversubscription = net.oversubscription;
  s.rail_optimized = net.rail_optimized;
  s.switch_latency_us = net.switch_latency_us;
  s.link_latency_us = net.link_latency_us;
  s.nvlink_gbps = net.nvlink_gbps > 0 ? net.nvlink_gbps : nvlink_gbps_of(gpu);
  s.pcie_gbps = gpu.pcie_gbps;
  return s;
}

network::FabricSpec default_fabric_spec(const model::GpuProfile& gpu, int gpus) {
  network::FabricSpec s = network::megascale_clos(gpus);
  s.gpus_per_server = 8;
  // A profile whose server is a larger NVLink domain (GB200 NVL72: 72 NICs,
  // one per GPU) keeps its one NIC per GPU on an 8-GPU server.
  s.nics_per_server = std::min(s.gpus_per_server, gpu.default_nics_per_node);
  s.nic_gbps = gpu.default_nic_gbps;
  s.nvlink_gbps = nvlink_gbps_of(gpu);
  s.pcie_gbps = gpu.pcie_gbps;
  return s;
}

network::EcmpConfig ecmp_config(const model::NetworkConfig& net) {
  network::EcmpConfig e;
  const std::optional<network::EcmpHash> hash = network::parse_ecmp_hash(net.ecmp_hash);
  if (!hash) throw network::FabricError("ecmp_hash", "unknown hash '" + net.ecmp_hash + "' (allowed: crc32, murmur3)");
  e.hash = *hash;
  e.polarized = net.polarization;
  const std::optional<network::RoutingMode> routing = network::parse_routing_mode(net.routing);
  if (!routing) throw network::FabricError("routing", "unknown routing '" + net.routing + "' (allowed: ecmp, adaptive)");
  e.routing = *routing;
  e.qps_per_connection = net.qps_per_connection;
  if (e.qps_per_connection < 1 || e.qps_per_connection > network::kMaxQpsPerConnection) {
    throw network::FabricError("qps_per_connection", "must be in 1.." + std::to_string(network::kMaxQpsPerConnection) +
                                                         ", got " + std::to_string(e.qps_per_connection));
  }
  return e;
}

network::CollectiveOptions collective_options(const model::GpuProfile& gpu, double nic_gbps,
                                              const model::NetworkConfig& net) {
  network::CollectiveOptions o;
  o.nvlink_busbw_gbs = gpu.nvlink_busbw_gbs;
  o.nic_busbw_gbs = model::nic_busbw_gbs(nic_gbps);
  o.nccl = network::nccl_system_for(gpu.compute_capability > 0 ? gpu.compute_capability : 80, gpu.host_cpu_amd != 0,
                                    gpu.nccl_nvlink_ctas > 0 ? gpu.nccl_nvlink_ctas : 24, gpu.nvls_busbw_gbs);
  const std::optional<network::CcAlgorithm> cc = network::parse_cc_algorithm(net.congestion_control);
  if (!cc) {
    throw network::FabricError("congestion_control", "unknown algorithm '" + net.congestion_control +
                                                         "' (allowed: dcqcn, swift, hybrid, none)");
  }
  o.congestion_control = *cc;  // "none": the fluid model with no controller (PFC only)
  return o;
}

}  // namespace megascale::sim
