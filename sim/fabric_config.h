// sim/fabric_config.h: a scenario's [hardware] / [cluster] / [network] tables, or
// a GPU profile alone, -> network/'s plain parameters.
//
// network/ depends on nothing of ours (DESIGN.md), so the translation from
// model/'s vocabulary lives here, above both layers:
//   FabricSpec        <- NetworkConfig (preset, switches, tiers, ratios,
//                        latencies) + HardwareConfig (GPUs and NICs per server,
//                        NIC line rate) + the GPU profile's NVLink (when
//                        network.nvlink_gbps is 0: nvlink_gbs bidirectional GB/s
//                        / 2 x 8 = Gb/s per direction; A100: 600 -> 2400) and
//                        PCIe generation (4.0 for A100, 5.0 for H100/H200);
//   EcmpConfig        <- network.ecmp_hash, polarization, qps_per_connection, routing;
//   CollectiveOptions <- the profile's NCCL NVLink busbw (model/hardware.h) and
//                        nic_busbw_gbs(line rate) (line rate / 8 x 0.96), and
//                        network.congestion_control.
// Values the scenario parser has already validated are checked again only where
// network/ would misread them; a bad one raises network::FabricError naming the
// parameter ("ecmp_hash", "congestion_control").
//
// Thread-safety: pure functions.
#pragma once

#include "model/config.h"
#include "model/hardware.h"
#include "network/collectives.h"
#include "network/routing.h"
#include "network/topology.h"

namespace megascale::sim {

// The scenario's fabric with `gpus` GPUs (normally cluster.gpus).
network::FabricSpec fabric_spec(const model::NetworkConfig& net, const model::HardwareConfig& hw,
                                const model::GpuProfile& gpu, int gpus);
// The MegaScale 3-tier fabric (network::megascale_clos) for `gpus` GPUs of this
// profile: 8 per server, the profile's NICs per server (at most 8: one NIC per
// GPU where the profile's server is a larger NVLink domain) and NIC line rate.
network::FabricSpec default_fabric_spec(const model::GpuProfile& gpu, int gpus);

network::EcmpConfig ecmp_config(const model::NetworkConfig& net);

// `nic_gbps`: the NIC line rate (hardware.nic_gbps, or the profile's default).
network::CollectiveOptions collective_options(const model::GpuProfile& gpu, double nic_gbps,
                                              const model::NetworkConfig& net);

}  // namespace megascale::sim
