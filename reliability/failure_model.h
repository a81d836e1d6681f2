// reliability/failure_model.h: failures of a training cluster as independent
// Poisson processes, one per component class, each with a rate per
// component-hour and a count from the cluster size.
//
// Counts: GPUs; nodes = GPUs / gpus_per_node; NICs = nodes x nics_per_node;
// links = 3 per NIC and switches = 2.5 x NICs / 64 for a 3-tier 1:1 CLOS of 64-port
// (128 x 200G split) switches (REFERENCE.md "MegaScale fabric": 192 ToR + 192
// aggregation + 96 core for 12,288 GPUs), unless the scenario gives them.
//
// The "llama3" preset: the 419 unexpected interruptions of Llama 3 405B
// pre-training (16,384 H100s, 54 days; REFERENCE.md "Failures") turned into rates
// per component-hour: GPU causes (faulty GPU 148, HBM3 72, SRAM 19, GSP 17, SDC 6,
// thermal 6 = 268) per GPU-hour; software (bug 54, NCCL watchdog 7, other 10 = 71)
// per GPU-hour; host (maintenance 32, SSD 3, PSU 3 = 38) per node-hour; NIC 7 per
// NIC-hour; switch/cable 35 split half to links, half to switches (assumed) per
// component-hour on the same CLOS count at 16,384 GPUs.
//
// Kinds: a node failure is a node going down (seen by heartbeats). A NIC, link
// or switch failure is, with probability traffic_drop_fraction, an RDMA traffic
// drop: traffic on the NIC / link silently stops, no error is raised and the
// job hangs until RDMA traffic monitoring sees the drop (else the NCCL timeout).
// The share is an assumption (nothing published splits network failures this
// way; default 0.2). Otherwise a link failure is a flap, and the other causes
// are hangs (hang_fraction), silent slowdowns (slowdown_fraction) or crashes
// with an explicit error.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "model/config.h"

namespace megascale::reliability {

enum class Cause { kGpu, kNode, kNic, kLink, kSwitch, kSoftware };
constexpr int kCauses = 6;
enum class Kind { kCrash, kHang, kSlowdown, kNodeDown, kLinkFlap, kTrafficDrop };

const char* to_string(Cause c);
const char* to_string(Kind k);
std::optional<Cause> cause_from_string(std::string_view name);
std::optional<Kind> kind_from_string(std::string_view name);

struct ComponentCounts {
  double gpus = 0, nodes = 0, nics = 0, links = 0, switches = 0;
};
ComponentCounts component_counts(int gpus, const model::HardwareConfig& hw,
                                 const model::FailureConfig& f);

// Failures per component-hour of the preset ("none": all 0).
std::array<double, kCauses> preset_rates_per_hour(const std::string& preset);

// Failures per hour of the whole cluster, per cause (explicit rates override
// the preset; every rate multiplied by rate_scale).
std::array<double, kCauses> cluster_rates_per_hour(int gpus, const model::HardwareConfig& hw,
                                                   const model::FailureConfig& f);

// The kind of a random failure of `cause`, from two uniform numbers in (0, 1):
// u_drop (traffic drop or not, for NIC / link / switch) and u_kind (hang,
// slowdown or crash, by hang_fraction and slowdown_fraction).
Kind failure_kind(Cause cause, double u_drop, double u_kind, const model::FailureConfig& f);

// How long a link may stay down before NCCL gives up: the InfiniBand/RoCE
// retransmission timer 4.096 us x 2^timeout, retried retry_cnt times
// (REFERENCE.md "Congestion control and link faults"; network/link_fault has the
// full model, which reliability/ must not depend on, so the formula is repeated):
// 4.096 us x 2^timeout x (retry + 1). Defaults 20 / 7 -> ~34 s.
double link_flap_tolerance_s(int nccl_ib_timeout, int nccl_ib_retry_cnt);

}  // namespace megascale::reliability
