// reliability/plan_inputs.cc: see plan_inputs.h.
#include "reliability/plan_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <fmt/format.h>

#include "model/config.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "reliability/failure_model.h"
#include "reliability/recovery_model.h"

namespace megascale::reliability {
namespace {

std::string fmt(double v, int decimals = 1) {
  return fmt::format("{:.{}f}", v, decimals);
}

// A time or bandwidth as the table shows it: whole numbers from 100 up, else
// 3 significant digits (a measured 0.144 s restart or 0.44 GB/s disk read
// printed as "0" before).
std::string figure(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v); }

}  // namespace

model::Scenario scaled_to_gpus(const model::Scenario& s, int gpus) {
  // Context parallelism is folded into dp (model/config.h): the GPUs must hold
  // whole CP groups, and dp stays a multiple of cp.
  const model::ParallelConfig& p = s.parallel;
  const int tp_pp = p.tp * p.pp;
  const std::string what = std::to_string(gpus) + " GPUs";
  if (gpus % (tp_pp * p.cp) != 0) {
    const std::string dims = p.cp > 1 ? "tp x cp x pp = " + std::to_string(p.tp) + " x " + std::to_string(p.cp) + " x "
                                      : "tp x pp = " + std::to_string(p.tp) + " x ";
    throw std::invalid_argument(what + " is not a multiple of " + dims + std::to_string(p.pp) + " = " +
                                std::to_string(tp_pp * p.cp) +
                                (p.cp > 1 ? " (the sweep keeps TP, CP and PP and derives DP)"
                                          : " (the sweep keeps TP and PP and derives DP)"));
  }
  model::Scenario x = s;
  x.parallel.dp = gpus / tp_pp;  // folded: cp x the user's dp
  x.cluster.gpus = gpus;
  std::string key;
  if (const std::optional<std::string> why = model::check_layout(x.model, x.parallel, gpus, &key)) {
    throw std::invalid_argument(what + " (dp " + std::to_string(x.parallel.replicas()) + "): " + key + ": " + *why);
  }
  const double ratio = static_cast<double>(gpus) / s.parallel.gpus();
  if (x.failures.links > 0) x.failures.links = std::max(1, static_cast<int>(std::lround(x.failures.links * ratio)));
  if (x.failures.switches > 0) {
    x.failures.switches = std::max(1, static_cast<int>(std::lround(x.failures.switches * ratio)));
  }
  return x;
}

std::vector<Assumption> recovery_assumptions(const model::Scenario& s) {
  const model::RecoveryConfig& r = s.recovery;
  const model::FailureConfig& f = s.failures;
  const model::RecoveryConfig d;  // the defaults, whose sources scenarios/README.md gives
  const model::FailureConfig fd;
  auto label = [](bool is_default, const std::string& source) {
    return is_default ? source : std::string("scenario");
  };
  const std::string assumed = "assumption";
  std::vector<Assumption> a;
  // Without a preset every rate not given is 0 (FailureConfig: < 0 = "from the
  // preset"): say that no failure is modelled rather than "explicit rates".
  const bool any_rate = f.gpu_per_hour > 0 || f.node_per_hour > 0 || f.nic_per_hour > 0 || f.link_per_hour > 0 ||
                        f.switch_per_hour > 0 || f.software_per_hour > 0;
  std::string rates = f.preset == "llama3" ? "llama3 preset"
                      : any_rate           ? "explicit rates"
                                           : "none: no failure is modelled (add [failures] preset = \"llama3\" or rates)";
  if (f.rate_scale != 1.0 && (f.preset == "llama3" || any_rate)) rates += " x " + fmt(f.rate_scale, 2);
  a.push_back({"failure_rates", rates,
               f.preset == "llama3" ? "Llama 3 405B interruptions (REFERENCE.md \"Failures\"); scale: scenario"
               : any_rate           ? "scenario"
                                    : "default (no [failures] table or no rate in it)"});
  a.push_back({"traffic_drop_fraction", fmt(100 * f.traffic_drop_fraction, 0) + "% of NIC/link/switch failures",
               label(f.traffic_drop_fraction == fd.traffic_drop_fraction, assumed)});
  a.push_back({"hang_slowdown_fractions",
               fmt(100 * f.hang_fraction, 0) + "% hang, " + fmt(100 * f.slowdown_fraction, 0) + "% slowdown",
               label(f.hang_fraction == fd.hang_fraction && f.slowdown_fraction == fd.slowdown_fraction, assumed)});
  a.push_back({"failures_during_recovery", f.during_recovery ? "on" : "off",
               label(f.during_recovery == fd.during_recovery, "model choice (reliability/run_model.h)")});
  a.push_back({"link_flap_tolerance",
               fmt(reliability::link_flap_tolerance_s(f.nccl_ib_timeout, f.nccl_ib_retry_cnt), 1) + " s",
               "NCCL IB retransmission 4.096 us x 2^timeout x (retry + 1) (REFERENCE.md)"});
  a.push_back({"heartbeat", figure(r.heartbeat_period_s) + " s x " + std::to_string(r.heartbeat_misses) + " misses",
               label(r.heartbeat_period_s == d.heartbeat_period_s && r.heartbeat_misses == d.heartbeat_misses, assumed)});
  a.push_back({"error_report_s", figure(r.error_report_s) + " s", label(r.error_report_s == d.error_report_s, assumed)});
  a.push_back({"anomaly_detect_s",
               figure(r.anomaly_detect_s) + " s" + (r.traffic_anomaly_detection ? "" : " (detection off)"),
               label(r.anomaly_detect_s == d.anomaly_detect_s, assumed)});
  a.push_back({"traffic_drop_detect_s",
               figure(r.traffic_drop_detect_s) + " s" + (r.traffic_anomaly_detection ? "" : " (detection off)"),
               label(r.traffic_drop_detect_s == d.traffic_drop_detect_s, assumed)});
  a.push_back({"nccl_timeout_s", figure(r.nccl_timeout_s) + " s",
               label(r.nccl_timeout_s == d.nccl_timeout_s, "PyTorch ProcessGroupNCCL default")});
  a.push_back({"slowdown_detect_s", figure(r.slowdown_detect_s) + " s",
               label(r.slowdown_detect_s == d.slowdown_detect_s, assumed)});
  a.push_back({"self_check_s", figure(r.self_check_s) + " s",
               label(r.self_check_s == d.self_check_s,
                     "assumption (MegaScale publishes detection + diagnosis < 10 min on average)")});
  a.push_back({"false_negative_positive", fmt(100 * r.false_negative, 0) + "% / " + fmt(100 * r.false_positive, 0) + "%",
               label(r.false_negative == d.false_negative && r.false_positive == d.false_positive, assumed)});
  a.push_back({"manual_handling_s", figure(r.manual_handling_s) + " s",
               label(r.manual_handling_s == d.manual_handling_s, assumed)});
  a.push_back({"spares_replace_repair",
               std::to_string(r.spare_nodes) + " nodes, " + figure(r.replacement_s) + " s, " + fmt(r.repair_s / 86400, 1) + " d",
               label(r.spare_nodes == d.spare_nodes && r.replacement_s == d.replacement_s && r.repair_s == d.repair_s,
                     assumed)});
  a.push_back({"process_start_s", figure(r.process_start_s) + " s", label(r.process_start_s == d.process_start_s, assumed)});
  a.push_back({"comm_init", r.init, "fitted to MegaScale NSDI'24's one published point per design at 2,048 GPUs"});
  a.push_back({"storage_read_gbs", figure(r.storage_read_gbs) + " GB/s",
               label(r.storage_read_gbs == d.storage_read_gbs, assumed)});
  a.push_back({"storage_write_gbs", figure(r.storage_write_gbs) + " GB/s",
               label(r.storage_write_gbs == d.storage_write_gbs, assumed)});
  const model::GpuProfile& gpu = model::hardware_profile(s);
  a.push_back({"pcie_gbs", figure(r.pcie_gbs) + " GB/s per GPU",
               label(r.pcie_gbs == d.pcie_gbs, "assumption (spec-sheet PCIe peak of " + gpu.name + ": " +
                                                    fmt(gpu.pcie_gbps / 8, 1) + " GB/s)")});
  return a;
}

Sweep parse_sweep(const std::string& spec) {
  Sweep out;
  const size_t eq = spec.find('=');
  out.quantity = spec.substr(0, eq);
  if (eq == std::string::npos || (out.quantity != "checkpoint_interval" && out.quantity != "gpus")) {
    throw std::invalid_argument("expected checkpoint_interval=V1,V2,... (durations like 5m) or gpus=N1,N2,..., got '" +
                                spec + "'");
  }
  std::stringstream in(spec.substr(eq + 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    if (out.quantity == "gpus") {
      char* end = nullptr;
      const long n = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || n < 1 || n > 10000000)
        throw std::invalid_argument("gpus: bad GPU count '" + item + "' (a positive integer)");
      out.values.push_back(static_cast<double>(n));
    } else {
      const std::optional<double> v = model::parse_duration_s(item);
      if (!v) {
        throw std::invalid_argument("checkpoint_interval: bad duration '" + item + "' (a number with s, m, h or d)");
      }
      if (*v <= 0) throw std::invalid_argument("checkpoint_interval: '" + item + "' must be longer than 0 s");
      out.values.push_back(*v);
    }
    // A value given twice (5m,300s) ran twice, one more row of the same figures.
    if (std::find(out.values.begin(), out.values.end() - 1, out.values.back()) != out.values.end() - 1) {
      throw std::invalid_argument(out.quantity + ": '" + item + "' is given twice (the same " +
                                  (out.quantity == "gpus" ? "GPU count" : "interval") + " as an earlier value)");
    }
  }
  if (out.values.empty()) throw std::invalid_argument("no values");
  return out;
}

}  // namespace megascale::reliability
