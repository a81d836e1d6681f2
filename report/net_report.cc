// report/net_report.cc: fabric-alone results -> JSON / text.
#include "report/net_report.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/profile.h"

namespace megascale::report {
namespace {

using base::Json;

Json bottleneck_json(const network::Bottleneck& b) {
  Json j;
  j["kind"] = b.kind;
  j["description"] = b.description;
  j["flows"] = b.flows;
  j["capacity_gbps"] = b.capacity_gbps;
  j["rate_gbps"] = b.rate_gbps;
  if (b.link >= 0) {
    j["link"] = static_cast<int64_t>(b.link);
    j["direction"] = b.up ? "up" : "down";
  }
  return j;
}

Json cc_json(const network::CcEffectUsed& c) {
  Json j;
  j["algorithm"] = std::string(network::cc_algorithm_name(c.algorithm));
  j["applied"] = c.applied;
  j["senders_per_bottleneck"] = c.senders;
  j["achieved_bandwidth_fraction"] = c.achieved_bandwidth_fraction;
  j["added_latency_us"] = c.added_latency_us;
  j["pfc_pause_fraction"] = c.pfc_pause_fraction;
  return j;
}

std::string cc_text(const network::CcEffectUsed& c) {
  const std::string name(network::cc_algorithm_name(c.algorithm));
  if (!c.applied) return name + ": no effect on the critical flow (no switch queue shared with it)";
  return fmt::format("{}: {} sub-flows share the bottleneck queue; achieved {:.1f}% of it, +{:.2f} us queueing, "
                     "PFC paused {:.1f}% of the time",
                     name, c.senders, 100 * c.achieved_bandwidth_fraction, c.added_latency_us,
                     100 * c.pfc_pause_fraction);
}

// nccl-tests' name of the op ("all_reduce"): the measured profile's table.
std::string table_op(network::CollectiveOp op) {
  return op == network::CollectiveOp::kAllReduce       ? "all_reduce"
         : op == network::CollectiveOp::kAllGather     ? "all_gather"
         : op == network::CollectiveOp::kReduceScatter ? "reduce_scatter"
                                                       : "sendrecv";
}

std::string busbw_rule(network::CollectiveOp op) {
  return op == network::CollectiveOp::kAllReduce  ? "algbw x 2(n-1)/n"
         : op == network::CollectiveOp::kSendRecv ? "algbw"
                                                  : "algbw x (n-1)/n";
}

// The measured profile's answer for the collective that ran: its table of the
// op in a server ("intra") or across servers ("inter").
struct ProfileAnswer {
  std::string scope;
  std::optional<double> time_s;
  double busbw_gbs = 0;
};

ProfileAnswer profile_answer(const CollectiveRun& run) {
  const network::CollectiveResult& r = run.tuned.best;
  ProfileAnswer a;
  a.scope = r.servers_per_group > 1 ? "inter" : "intra";
  if (run.measured && run.measured->measured() != nullptr) {
    a.time_s = run.measured->measured()->collectives.time_s(table_op(r.op), a.scope, r.ranks, run.bytes);
  }
  if (a.time_s) a.busbw_gbs = run.bytes * model::busbw_factor(table_op(r.op), r.ranks) / *a.time_s / 1e9;
  return a;
}

}  // namespace

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_time(double s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

CollectiveRun collective_run(const sim::CollectiveAnswer& a, const std::string& placement) {
  CollectiveRun run;
  run.gpu = a.machine.gpu.name;
  run.ranks_per_server = a.job.ranks_per_server;
  run.placement = placement;
  run.bytes = a.job.bytes;
  run.spec = a.run.spec;
  run.fabric = a.run.fabric;
  run.ecmp = a.machine.ecmp;
  run.options = a.machine.options;
  run.tuned = a.run.tuned;
  run.auto_choice = !a.job.algorithm || !a.job.protocol;
  run.wall_s = a.wall_s;
  return run;
}

Json collective_json(const CollectiveRun& run) {
  const network::CollectiveResult& r = run.tuned.best;
  Json j;
  j["op"] = network::to_string(r.op);
  j["algorithm"] = network::to_string(r.algorithm);
  j["protocol"] = network::to_string(r.protocol);
  j["auto"] = run.auto_choice;
  std::vector<Json> cands;
  for (const network::TunerCandidate& c : run.tuned.candidates) {
    Json cj;
    cj["algorithm"] = network::to_string(c.algorithm);
    cj["protocol"] = network::to_string(c.protocol);
    cj["enabled"] = c.enabled;
    if (c.enabled) {
      cj["time_s"] = c.time_s;
      cj["latency_s"] = c.latency_s;
      cj["busbw_gbs"] = c.busbw_gbs;
      cj["channels"] = c.channels;
      cj["nccl_estimate_s"] = c.estimate_s;
    } else {
      cj["why_not"] = c.why_not;
    }
    cands.push_back(cj);
  }
  j["gpu"] = run.gpu;
  j["ranks"] = r.ranks;
  j["groups"] = r.groups;
  j["ranks_per_server"] = run.ranks_per_server;
  j["servers_per_group"] = r.servers_per_group;
  j["placement"] = run.placement;
  j["bytes"] = static_cast<int64_t>(std::llround(r.bytes));
  j["time_s"] = r.time_s;
  j["algbw_gbs"] = r.algbw_gbs;
  j["busbw_gbs"] = r.busbw_gbs;
  j["busbw_rule"] = busbw_rule(r.op);
  j["latency_s"] = r.latency_s;
  j["bandwidth_s"] = r.bandwidth_s;
  j["steps"] = r.steps;
  j["channels"] = r.channels;
  j["all_channels_time_s"] = r.all_channels_time_s;
  j["bottleneck"] = bottleneck_json(r.bottleneck);
  j["congestion_control"] = cc_json(r.cc);
  std::vector<Json> phases;
  for (const network::CollectivePhase& ph : r.phases) {
    Json pj;
    pj["name"] = ph.name;
    pj["steps"] = ph.steps;
    pj["channels"] = ph.channels;
    pj["all_channels_bandwidth_s"] = ph.all_channels_bandwidth_s;
    pj["step_bandwidth_s"] = ph.step.bandwidth_s;
    pj["bandwidth_s"] = ph.bandwidth_s;
    pj["latency_s"] = ph.latency_s;
    pj["flows_per_step"] = static_cast<int64_t>(ph.step.subflows);
    pj["network_flows_per_step"] = static_cast<int64_t>(ph.step.network_subflows);
    pj["cc_limited_flows"] = static_cast<int64_t>(ph.step.cc_limited_subflows);
    pj["memo_hit"] = ph.memo_hit;
    pj["bottleneck"] = bottleneck_json(ph.step.bottleneck);
    pj["congestion_control"] = cc_json(ph.step.cc);
    phases.push_back(pj);
  }
  j["phases"] = phases;
  Json fj;
  fj["preset"] = run.spec.preset;
  fj["description"] = run.fabric;
  fj["gpus"] = run.spec.gpus;
  fj["nic_gbps"] = run.spec.nic_gbps;
  fj["nic_busbw_gbs"] = run.options.nic_busbw_gbs;
  fj["nvlink_busbw_gbs"] = run.options.nvlink_busbw_gbs;
  fj["ecmp_hash"] = network::to_string(run.ecmp.hash);
  fj["qps_per_connection"] = run.ecmp.qps_per_connection;
  fj["polarized"] = run.ecmp.polarized;
  fj["routing"] = network::to_string(run.ecmp.routing);
  j["fabric"] = fj;
  j["step_solves"] = static_cast<int64_t>(r.step_solves);
  j["wall_time_s"] = run.wall_s;
  if (run.measured) {
    const ProfileAnswer a = profile_answer(run);
    Json pj;
    pj["name"] = run.measured->name;
    pj["file"] = run.measured->source_file;
    pj["scope"] = a.scope;
    if (a.time_s) {
      pj["time_s"] = *a.time_s;
      pj["busbw_gbs"] = a.busbw_gbs;
    } else {
      pj["time_s"] = nullptr;
    }
    j["profile"] = pj;
  }
  j["candidates"] = cands;  // last: the fields above are the chosen pair's
  return j;
}

std::string collective_text(const CollectiveRun& run) {
  const network::CollectiveResult& r = run.tuned.best;
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} ({}, {}) of {} over {} ranks ({} per server, {}) x {} group{}, {}\n", network::to_string(r.op),
                 network::to_string(r.algorithm), network::to_string(r.protocol), human_bytes(run.bytes), r.ranks,
                 run.ranks_per_server, run.placement, r.groups, r.groups == 1 ? "" : "s", run.gpu);
  if (run.ecmp.routing == network::RoutingMode::kAdaptive) {
    fmt::format_to(o, "  fabric      {}; adaptive routing, {} QP(s) per connection\n", run.fabric,
                   run.ecmp.qps_per_connection);
  } else {
    fmt::format_to(o, "  fabric      {}; ECMP {}, {} QP(s) per connection\n", run.fabric,
                   network::to_string(run.ecmp.hash), run.ecmp.qps_per_connection);
  }
  fmt::format_to(o, "  time        {} (latency {} + bandwidth {})\n", human_time(r.time_s), human_time(r.latency_s),
                 human_time(r.bandwidth_s));
  fmt::format_to(o, "  algbw       {:.2f} GB/s\n", r.algbw_gbs);
  fmt::format_to(o, "  busbw       {:.2f} GB/s ({}, nccl-tests)\n", r.busbw_gbs, busbw_rule(r.op));
  fmt::format_to(o, "  steps       {}\n", r.steps);
  if (r.channels > 0) {
    fmt::format_to(o, "  channels    {} of {}{}\n", r.channels, run.options.nccl.channels,
                   r.channels < run.options.nccl.channels && r.time_s != r.all_channels_time_s
                       ? fmt::format(" (NCCL runs a collective this small on fewer; on all: {})",
                                     human_time(r.all_channels_time_s))
                       : std::string());
  }
  fmt::format_to(o, "  bottleneck  {}: {}\n", r.bottleneck.kind, r.bottleneck.description);
  fmt::format_to(o, "  congestion  {}\n", cc_text(r.cc));
  out += "  phases\n";
  for (const network::CollectivePhase& ph : r.phases) {
    fmt::format_to(o, "    {:<44} {:4} steps x {}, {} flows/step, latency {}{}\n", ph.name, ph.steps,
                   human_time(ph.step.bandwidth_s), ph.step.subflows, human_time(ph.latency_s),
                   ph.memo_hit ? " (memoised)" : "");
  }
  if (run.tuned.candidates.size() > 1) {
    fmt::format_to(o,
                   "  NCCL tuner  {}{}/{} (the lowest NCCL estimate, NCCL 2.30 tuning.cc, on all channels; times "
                   "are the fabric model's on the channels NCCL runs); pairs considered:\n",
                   run.auto_choice ? "chose " : "ran ", network::to_string(r.algorithm),
                   network::to_string(r.protocol));
    for (const network::TunerCandidate& c : run.tuned.candidates) {
      const std::string pair = std::string(network::to_string(c.algorithm)) + "/" + network::to_string(c.protocol);
      if (c.enabled) {
        fmt::format_to(o, "    {:<18} {:>12}  latency {:>10}  busbw {:8.2f} GB/s  {:>2} ch  NCCL estimate {:>12}{}\n",
                       pair, human_time(c.time_s), human_time(c.latency_s), c.busbw_gbs,
                       c.channels > 0 ? std::to_string(c.channels) : std::string("-"),
                       human_time(c.estimate_s),
                       c.algorithm == r.algorithm && c.protocol == r.protocol ? "  <- chosen" : "");
      } else {
        fmt::format_to(o, "    {:<18} off: {}\n", pair, c.why_not);
      }
    }
  }
  fmt::format_to(o, "  solved in   {}\n", human_time(run.wall_s));
  if (run.measured) {
    const ProfileAnswer a = profile_answer(run);
    fmt::format_to(o, "  profile     {} ({}): ", run.measured->name, run.measured->source_file);
    if (a.time_s) {
      fmt::format_to(o, "{}, busbw {:.2f} GB/s (its measured {} {})\n", human_time(*a.time_s), a.busbw_gbs, a.scope,
                     table_op(r.op));
    } else {
      fmt::format_to(o, "no measured {} {}\n", a.scope, table_op(r.op));
    }
  }
  return out;
}

Json ecmp_json(const network::EcmpStatistics& s, network::EcmpHash hash) {
  Json measured, theory, j;
  measured["mean_paths_used_fraction"] = s.mean_paths_used_fraction;
  measured["collective_efficiency"] = s.collective_efficiency;
  measured["mean_max_load_flows"] = s.mean_max_load_flows;
  theory["mean_paths_used_fraction"] = s.theory_paths_used_fraction;
  theory["collective_efficiency"] = s.theory_collective_efficiency;
  j["paths"] = s.paths;
  j["flows"] = s.flows;
  j["qps"] = s.qps;
  j["trials"] = s.trials;
  j["hash"] = network::to_string(hash);
  j["mean_paths_used_fraction"] = s.mean_paths_used_fraction;
  j["collective_efficiency"] = s.collective_efficiency;
  j["measured"] = measured;
  j["theory"] = theory;
  return j;
}

std::string ecmp_text(const network::EcmpStatistics& s, network::EcmpHash hash) {
  std::string out;
  auto o = std::back_inserter(out);
  fmt::format_to(o, "{} flows x {} QP(s) on {} equal-cost paths, {} trials ({})\n", s.flows, s.qps, s.paths, s.trials,
                 network::to_string(hash));
  out += "                              measured   theory\n";
  fmt::format_to(o, "  paths used (fraction)       {:8.4f}  {:8.4f}\n", s.mean_paths_used_fraction,
                 s.theory_paths_used_fraction);
  // No exact theory above kMaxExactBalls QPs on several paths (network/ecmp_stats.h): "n/a".
  fmt::format_to(o, "  collective efficiency       {:8.4f}  {}\n", s.collective_efficiency,
                 std::isfinite(s.theory_collective_efficiency) ? fmt::format("{:8.4f}", s.theory_collective_efficiency)
                                                               : fmt::format("{:>8}", "n/a"));
  fmt::format_to(o, "  E[max load] (flows)         {:8.4f}\n", s.mean_max_load_flows);
  return out;
}

std::string incast_text(const network::IncastOptions& o, const network::IncastReport& r) {
  std::string out;
  auto to = std::back_inserter(out);
  fmt::format_to(to, "incast: {} senders -> one {:.0f} Gb/s port, {}, PFC {}, {:.0f} us simulated\n", o.senders,
                 o.capacity_gbps, network::cc_algorithm_name(o.cc), o.pfc ? "on" : "off", o.duration_us);
  fmt::format_to(to,
                 "  queue       steady mean {:.1f} KB, steady max {:.1f} KB, max {:.1f} KB (PFC XOFF {:.1f} KB, limit {:.1f} KB)\n",
                 r.steady_mean_queue_bytes / 1e3, r.steady_max_queue_bytes / 1e3, r.max_queue_bytes / 1e3,
                 r.pfc_xoff_bytes / 1e3, r.queue_limit_bytes / 1e3);
  fmt::format_to(to, "  throughput  {:.1f}% of the port; Jain fairness {:.3f}; dropped {:.0f} bytes\n",
                 100 * r.throughput_fraction, r.jain_fairness, r.dropped_bytes);
  fmt::format_to(to, "  PFC         senders paused {:.1f}% of their active time; port asserted {:.1f}%\n",
                 100 * r.pause_fraction, 100 * r.port_pause_asserted_fraction);
  // About twenty rows, each the mean of a block of consecutive samples (and the
  // block's largest queue): one sample in `every` would alias a PFC or
  // rate-control cycle near the block's length, and showed a queue growing while
  // every sender was paused (64 senders, no congestion control).
  const size_t every = std::max<size_t>(1, r.series.size() / 20);
  fmt::format_to(to, "  series (each row: the mean of {} samples of {:g} us, up to t_us)\n", every,
                 o.sample_interval_us);
  out += "        t_us   queue_KB   max_queue_KB   rate_gbps   throughput_gbps   paused_senders\n";
  for (size_t i = 0; i < r.series.size(); i += every) {
    const size_t end = std::min(r.series.size(), i + every);
    double queue = 0, queue_max = 0, rate = 0, out_gbps = 0, paused = 0;
    for (size_t j = i; j < end; ++j) {
      const network::FluidSample& s = r.series[j];
      queue += s.queue_bytes;
      queue_max = std::max(queue_max, s.queue_bytes);
      rate += s.total_rate_gbps;
      out_gbps += s.throughput_gbps;
      paused += s.paused_senders_fraction;
    }
    const double n = static_cast<double>(end - i);
    fmt::format_to(to, "  {:10.0f} {:10.1f} {:14.1f} {:11.1f} {:17.1f} {:16.3f}\n", r.series[end - 1].t_us,
                   queue / n / 1e3, queue_max / 1e3, rate / n, out_gbps / n, paused / n);
  }
  return out;
}

}  // namespace megascale::report
