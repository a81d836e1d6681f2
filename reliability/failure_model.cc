// reliability/failure_model.cc: see failure_model.h for the sources.
#include "reliability/failure_model.h"

#include <cmath>

namespace megascale::reliability {

const char* to_string(Cause c) {
  switch (c) {
    case Cause::kGpu: return "gpu";
    case Cause::kNode: return "node";
    case Cause::kNic: return "nic";
    case Cause::kLink: return "link";
    case Cause::kSwitch: return "switch";
    case Cause::kSoftware: return "software";
  }
  return "?";
}

const char* to_string(Kind k) {
  switch (k) {
    case Kind::kCrash: return "crash";
    case Kind::kHang: return "hang";
    case Kind::kSlowdown: return "slowdown";
    case Kind::kNodeDown: return "node_down";
    case Kind::kLinkFlap: return "link_flap";
    case Kind::kTrafficDrop: return "traffic_drop";
  }
  return "?";
}

std::optional<Cause> cause_from_string(std::string_view name) {
  for (int i = 0; i < kCauses; ++i) {
    if (name == to_string(static_cast<Cause>(i))) return static_cast<Cause>(i);
  }
  return std::nullopt;
}

std::optional<Kind> kind_from_string(std::string_view name) {
  for (Kind k : {Kind::kCrash, Kind::kHang, Kind::kSlowdown, Kind::kNodeDown, Kind::kLinkFlap,
                 Kind::kTrafficDrop}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

namespace {
double clos_links(double nics) { return 3.0 * nics; }
double clos_switches(double nics) { return 2.5 * nics / 64.0; }
}  // namespace

ComponentCounts component_counts(int gpus, const model::HardwareConfig& hw,
                                 const model::FailureConfig& f) {
  ComponentCounts c;
  c.gpus = gpus;
  c.nodes = std::ceil(static_cast<double>(gpus) / hw.gpus_per_node);
  c.nics = c.nodes * hw.nics_per_node;
  c.links = f.links > 0 ? f.links : clos_links(c.nics);
  c.switches = f.switches > 0 ? f.switches : clos_switches(c.nics);
  return c;
}

std::array<double, kCauses> preset_rates_per_hour(const std::string& preset) {
  std::array<double, kCauses> r{};
  if (preset != "llama3") return r;
  // Llama 3 405B: 16,384 GPUs, 2,048 nodes of 8, one NIC per GPU, 54 days.
  const double hours = 54.0 * 24.0;
  const double gpus = 16384, nodes = 2048, nics = 16384;
  r[static_cast<int>(Cause::kGpu)] = 268.0 / (gpus * hours);
  r[static_cast<int>(Cause::kSoftware)] = 71.0 / (gpus * hours);
  r[static_cast<int>(Cause::kNode)] = 38.0 / (nodes * hours);
  r[static_cast<int>(Cause::kNic)] = 7.0 / (nics * hours);
  r[static_cast<int>(Cause::kLink)] = 17.5 / (clos_links(nics) * hours);
  r[static_cast<int>(Cause::kSwitch)] = 17.5 / (clos_switches(nics) * hours);
  return r;
}

std::array<double, kCauses> cluster_rates_per_hour(int gpus, const model::HardwareConfig& hw,
                                                   const model::FailureConfig& f) {
  std::array<double, kCauses> per = preset_rates_per_hour(f.preset);
  const double given[kCauses] = {f.gpu_per_hour,  f.node_per_hour,   f.nic_per_hour,
                                 f.link_per_hour, f.switch_per_hour, f.software_per_hour};
  for (int i = 0; i < kCauses; ++i) {
    if (given[i] >= 0) per[i] = given[i];
  }
  const ComponentCounts c = component_counts(gpus, hw, f);
  const double count[kCauses] = {c.gpus, c.nodes, c.nics, c.links, c.switches, c.gpus};
  std::array<double, kCauses> out{};
  for (int i = 0; i < kCauses; ++i) out[i] = per[i] * count[i] * f.rate_scale;
  return out;
}

Kind failure_kind(Cause cause, double u_drop, double u_kind, const model::FailureConfig& f) {
  if (cause == Cause::kNode) return Kind::kNodeDown;
  const bool network = cause == Cause::kNic || cause == Cause::kLink || cause == Cause::kSwitch;
  if (network && u_drop < f.traffic_drop_fraction) return Kind::kTrafficDrop;
  if (cause == Cause::kLink) return Kind::kLinkFlap;
  if (u_kind < f.hang_fraction) return Kind::kHang;
  if (u_kind < f.hang_fraction + f.slowdown_fraction) return Kind::kSlowdown;
  return Kind::kCrash;
}

double link_flap_tolerance_s(int nccl_ib_timeout, int nccl_ib_retry_cnt) {
  return 4.096e-6 * std::ldexp(1.0, nccl_ib_timeout) * (nccl_ib_retry_cnt + 1);
}

}  // namespace megascale::reliability
