// network/congestion.cc: the shared bottleneck-queue fluid model, the incast
// report and plot, and the memoised congestion_effect() (see congestion.h).
#include "network/congestion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <fmt/format.h>

#include "base/svg.h"

namespace megascale::network {
namespace {

constexpr double kBytesPerUsPerGbps = 125.0;  // 1 Gb/s = 1e9/8 B/s = 125 B/us
constexpr double kEpsBytes = 1e-6;

double bpus(double gbps) { return gbps * kBytesPerUsPerGbps; }

struct Feedback {
  double acked_bytes = 0;
  double delay_x_bytes = 0;  // sum of delay_us * bytes, for the byte-weighted mean
  bool cnp = false;
};

// Per-flow sender state: the controller, the receiver's CNP pacing, and the
// feedback delay line.
struct Sender {
  std::optional<DcqcnReactionPoint> dcqcn;
  std::optional<SwiftSender> swift;
  std::optional<HybridSender> hybrid;
  DcqcnNotificationPoint np{50};
  double to_send = 0;     // bytes not yet injected (infinite for endless flows)
  int delay_steps = 1;
  std::vector<Feedback> ring;  // size delay_steps + 1
  bool finished = false;
  double fixed_rate_gbps = -1;  // kNone with an initial rate
};

double controller_rate_gbps(const Sender& s, CcAlgorithm cc, double line_gbps) {
  switch (cc) {
    case CcAlgorithm::kNone: return s.fixed_rate_gbps > 0 ? s.fixed_rate_gbps : line_gbps;
    case CcAlgorithm::kDcqcn: return std::min(line_gbps, s.dcqcn->rate_gbps());
    case CcAlgorithm::kSwift: return s.swift->rate_gbps(line_gbps);
    case CcAlgorithm::kHybrid: return s.hybrid->rate_gbps(line_gbps);
  }
  return line_gbps;
}

bool uses_ecn(CcAlgorithm cc) { return cc == CcAlgorithm::kDcqcn || cc == CcAlgorithm::kHybrid; }

std::string fmt(double v) {
  if (!std::isfinite(v)) return "null";
  return fmt::format("{:.6g}", v);
}

}  // namespace

std::string_view cc_algorithm_name(CcAlgorithm cc) {
  switch (cc) {
    case CcAlgorithm::kNone: return "none";
    case CcAlgorithm::kDcqcn: return "dcqcn";
    case CcAlgorithm::kSwift: return "swift";
    case CcAlgorithm::kHybrid: return "hybrid";
  }
  return "?";
}

std::optional<CcAlgorithm> parse_cc_algorithm(std::string_view name) {
  for (CcAlgorithm cc : {CcAlgorithm::kNone, CcAlgorithm::kDcqcn, CcAlgorithm::kSwift,
                         CcAlgorithm::kHybrid}) {
    if (name == cc_algorithm_name(cc)) return cc;
  }
  return std::nullopt;
}

CcAlgorithm cc_choice(std::string_view name) {
  if (const auto cc = parse_cc_algorithm(name)) return *cc;
  throw std::invalid_argument("must be hybrid, dcqcn, swift or none, got '" + std::string(name) + "'");
}

FluidResult run_fluid(const FluidNetwork& net, const FluidOptions& opt) {
  const int F = static_cast<int>(net.flows.size());
  const int P = static_cast<int>(net.ports.size());
  if (P == 0) throw std::invalid_argument("run_fluid: no ports");
  if (opt.dt_us <= 0 || opt.duration_us <= 0 || opt.mtu_bytes <= 0)
    throw std::invalid_argument("run_fluid: dt, duration and mtu must be positive");
  if (opt.observed_port < 0 || opt.observed_port >= P)
    throw std::invalid_argument("run_fluid: observed_port out of range");
  for (const auto& port : net.ports) {
    if (port.capacity_gbps <= 0 || port.buffer_bytes <= 0)
      throw std::invalid_argument("run_fluid: port '" + port.name +
                                  "' needs positive capacity and buffer");
  }
  const double dt = opt.dt_us;

  // ---- static structure -----------------------------------------------------
  std::vector<int> offset(F + 1, 0);
  for (int f = 0; f < F; ++f) {
    const auto& fl = net.flows[f];
    if (fl.path.empty()) throw std::invalid_argument("run_fluid: flow with empty path");
    for (int p : fl.path)
      if (p < 0 || p >= P) throw std::invalid_argument("run_fluid: path names an unknown port");
    if (fl.line_rate_gbps <= 0 || fl.base_rtt_us <= 0 || !(fl.size_bytes > 0))
      throw std::invalid_argument("run_fluid: flow needs positive rate, RTT and size");
    offset[f + 1] = offset[f] + static_cast<int>(fl.path.size());
  }
  // Link ids: sender NIC f -> f; output link of port p -> F + p.
  auto upstream_link = [&](int f, int k) { return k == 0 ? f : F + net.flows[f].path[k - 1]; };
  std::vector<std::vector<std::pair<int, int>>> members(P);  // (flow, hop)
  for (int f = 0; f < F; ++f)
    for (int k = 0; k < static_cast<int>(net.flows[f].path.size()); ++k)
      members[net.flows[f].path[k]].push_back({f, k});

  // Ports in an order where every flow visits its ports front to back (Kahn).
  std::vector<int> order;
  {
    std::vector<std::vector<int>> next(P);
    std::vector<int> indeg(P, 0);
    for (const auto& fl : net.flows)
      for (std::size_t k = 0; k + 1 < fl.path.size(); ++k) {
        next[fl.path[k]].push_back(fl.path[k + 1]);
        ++indeg[fl.path[k + 1]];
      }
    for (int p = 0; p < P; ++p)
      if (indeg[p] == 0) order.push_back(p);
    for (std::size_t i = 0; i < order.size(); ++i)
      for (int n : next[order[i]])
        if (--indeg[n] == 0) order.push_back(n);
    if (static_cast<int>(order.size()) != P)
      throw std::invalid_argument("run_fluid: flow paths form a cycle of ports");
  }

  std::vector<double> cap_bpus(P), limit(P), xoff(P), xon(P);
  for (int p = 0; p < P; ++p) cap_bpus[p] = bpus(net.ports[p].capacity_gbps);
  for (int p = 0; p < P; ++p) {
    xoff[p] = opt.pfc.xoff_bytes >= 0 ? opt.pfc.xoff_bytes : net.ports[p].buffer_bytes;
    xon[p] = std::max(0.0, xoff[p] - opt.pfc.xon_gap_bytes);
    double headroom = 0;
    if (opt.pfc.enabled) {
      std::vector<int> seen;
      for (auto [f, k] : members[p]) {
        const int link = upstream_link(f, k);
        if (std::find(seen.begin(), seen.end(), link) != seen.end()) continue;
        seen.push_back(link);
        const double rate = k == 0 ? bpus(net.flows[f].line_rate_gbps)
                                   : cap_bpus[net.flows[f].path[k - 1]];
        headroom += rate * (opt.pfc.reaction_us + dt) + opt.mtu_bytes;
      }
    }
    limit[p] = std::max(net.ports[p].buffer_bytes, xoff[p]) + headroom;
  }

  // ---- senders ------------------------------------------------------------------
  std::vector<Sender> snd(F);
  for (int f = 0; f < F; ++f) {
    const auto& fl = net.flows[f];
    Sender& s = snd[f];
    s.to_send = fl.size_bytes;
    s.delay_steps = std::max(1, static_cast<int>(std::llround(fl.base_rtt_us / dt)));
    s.ring.assign(s.delay_steps + 1, Feedback{});
    SwiftParams sp = opt.cc_config.swift;
    sp.mtu_bytes = opt.mtu_bytes;
    const double line = bpus(fl.line_rate_gbps);
    sp.max_cwnd = std::min(sp.max_cwnd, line *
                                            (fl.base_rtt_us + sp.base_target_queue_us +
                                             sp.hops * sp.hop_scale_us + sp.fs_range_us) /
                                            opt.mtu_bytes);
    // Start at line rate (one BDP of window) unless told otherwise.
    const double init_gbps = fl.initial_rate_gbps < 0
                                 ? fl.line_rate_gbps
                                 : std::min(fl.initial_rate_gbps, fl.line_rate_gbps);
    const double init_cwnd = bpus(init_gbps) * fl.base_rtt_us / opt.mtu_bytes;
    switch (opt.cc) {
      case CcAlgorithm::kNone:
        if (fl.initial_rate_gbps >= 0) s.fixed_rate_gbps = init_gbps;
        break;
      case CcAlgorithm::kDcqcn:
        if (init_gbps < fl.line_rate_gbps) {
          s.dcqcn.emplace(fl.line_rate_gbps, opt.cc_config.dcqcn, init_gbps, fl.start_us);
        } else {
          s.dcqcn.emplace(fl.line_rate_gbps, opt.cc_config.dcqcn);
        }
        s.np = DcqcnNotificationPoint(opt.cc_config.dcqcn.cnp_interval_us);
        break;
      case CcAlgorithm::kSwift: s.swift.emplace(sp, fl.base_rtt_us, init_cwnd); break;
      case CcAlgorithm::kHybrid: {
        HybridParams hp = opt.cc_config.hybrid;
        hp.swift = sp;
        s.hybrid.emplace(hp, fl.base_rtt_us, init_cwnd);
        s.np = DcqcnNotificationPoint(hp.cnp_interval_us);
        break;
      }
    }
  }

  // ---- dynamic state ----------------------------------------------------------
  std::vector<double> occ(offset[F], 0.0), arr(offset[F], 0.0);
  std::vector<double> q(P, 0.0);
  const int R = std::max(1, static_cast<int>(std::llround(opt.pfc.reaction_us / dt)));
  std::vector<std::vector<char>> assert_hist(R, std::vector<char>(P, 0));
  std::vector<char> asserting(P, 0), link_paused(F + P, 0);
  std::vector<double> delivered_step(F, 0.0);
  // Within each step: how long each sender injected and each port served (us),
  // so that a flow's last byte is placed inside the step it arrives in rather
  // than at its end (a 1-byte flow took a whole dt_us, and congestion_effect
  // read that as a bandwidth fraction of 1e-4).
  std::vector<double> inject_us(F, 0.0), busy_us(P, 0.0);
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> uni(0.0, 1.0);

  FluidResult res;
  res.flows.assign(F, FluidFlowStats{});
  res.ports.assign(P, FluidPortStats{});
  for (int p = 0; p < P; ++p) {
    res.ports[p].limit_bytes = limit[p];
    res.ports[p].xoff_bytes = xoff[p];
  }
  const double steady_from = opt.steady_from_us >= 0 ? opt.steady_from_us : opt.duration_us / 2;
  std::vector<double> steady_delivered(F, 0.0), q_sum(P, 0.0), q_steady_sum(P, 0.0);
  double steady_time = 0;

  // Sample accumulators for the observed port.
  const int obs = opt.observed_port;
  double acc_q = 0, acc_inj = 0, acc_out = 0, acc_paused_frac = 0, acc_t = 0;
  bool acc_paused = false;
  double next_sample = opt.sample_interval_us;

  bool any_finite = false;
  for (const auto& fl : net.flows) any_finite |= std::isfinite(fl.size_bytes);

  const long steps = static_cast<long>(std::ceil(opt.duration_us / dt - 1e-9));
  long s_step = 0;
  for (; s_step < steps; ++s_step) {
    const double t = s_step * dt;
    auto active = [&](int f) { return !snd[f].finished && t >= net.flows[f].start_us; };

    // PFC state decided pfc.reaction_us ago.
    std::fill(link_paused.begin(), link_paused.end(), 0);
    const auto& asrt = assert_hist[s_step % R];
    for (int p = 0; p < P; ++p) {
      if (!asrt[p]) continue;
      for (auto [f, k] : members[p])
        if (active(f)) link_paused[upstream_link(f, k)] = 1;
    }

    // 1. Feedback that left the congestion point one base RTT ago.
    for (int f = 0; f < F; ++f) {
      Sender& s = snd[f];
      Feedback& fb = s.ring[s_step % (s.delay_steps + 1)];
      if (fb.acked_bytes > 0) {
        const double delay = fb.delay_x_bytes / fb.acked_bytes;
        const double pkts = fb.acked_bytes / opt.mtu_bytes;
        if (s.swift) s.swift->on_ack(t, pkts, delay);
        if (s.hybrid) s.hybrid->on_ack(t, pkts, delay);
      }
      if (fb.cnp) {
        if (s.dcqcn) s.dcqcn->on_cnp(t);
        if (s.hybrid) s.hybrid->on_cnp(t);
        ++res.flows[f].cnps;
      }
      fb = Feedback{};
      if (s.dcqcn) s.dcqcn->advance(t);
      if (s.hybrid) s.hybrid->advance(t);
    }

    // 2. Injections.
    double inj_total = 0;
    int active_senders = 0, paused_senders = 0;
    std::fill(arr.begin(), arr.end(), 0.0);
    std::fill(inject_us.begin(), inject_us.end(), 0.0);
    for (int f = 0; f < F; ++f) {
      if (!active(f)) continue;
      Sender& s = snd[f];
      ++active_senders;
      if (link_paused[f]) {
        ++paused_senders;
        res.flows[f].paused_us += dt;
        continue;
      }
      if (s.to_send <= kEpsBytes) continue;
      const double rate = controller_rate_gbps(s, opt.cc, net.flows[f].line_rate_gbps);
      const double inj = std::min(bpus(rate) * dt, s.to_send);
      inject_us[f] = inj / bpus(rate);
      s.to_send -= inj;
      arr[offset[f]] += inj;
      inj_total += inj;
      if (s.dcqcn) s.dcqcn->on_bytes_sent(t, inj);
    }

    // 3. Ports in topological order: serve backlog + this step's arrivals (a
    //    fluid FIFO: split in proportion to each flow's bytes), forward the
    //    served bytes to the next port within the same step, drop what exceeds
    //    the hard limit (reachable only without PFC; dropped bytes are sent again).
    std::fill(delivered_step.begin(), delivered_step.end(), 0.0);
    double obs_out = 0;
    for (int p : order) {
      double avail = 0, arrived = 0;
      for (auto [f, k] : members[p]) {
        avail += occ[offset[f] + k] + arr[offset[f] + k];
        arrived += arr[offset[f] + k];
      }
      double frac = 0;
      if (avail > kEpsBytes && !link_paused[F + p]) frac = std::min(1.0, cap_bpus[p] * dt / avail);
      busy_us[p] = avail * frac / cap_bpus[p];
      double backlog = 0;
      for (auto [f, k] : members[p]) {
        const int i = offset[f] + k;
        const double here = occ[i] + arr[i];
        const double d = here * frac;
        occ[i] = here - d;
        backlog += occ[i];
        if (d <= 0) continue;
        res.ports[p].served_bytes += d;
        if (p == obs) obs_out += d;
        if (k + 1 < static_cast<int>(net.flows[f].path.size())) {
          arr[i + 1] += d;
        } else {
          delivered_step[f] += d;
        }
      }
      if (backlog > limit[p] && arrived > 0) {
        const double ratio = std::min(1.0, (backlog - limit[p]) / arrived);
        for (auto [f, k] : members[p]) {
          const int i = offset[f] + k;
          const double drop = std::min(occ[i], arr[i] * ratio);
          if (drop <= 0) continue;
          occ[i] -= drop;
          snd[f].to_send += drop;
          res.flows[f].dropped_bytes += drop;
          res.ports[p].dropped_bytes += drop;
          res.total_dropped_bytes += drop;
          backlog -= drop;
        }
      }
      q[p] = std::max(0.0, backlog);
    }

    // 4. Feedback generation at the receivers for the delivered bytes: the
    //    fabric delay they saw (base RTT + backlog / C at each port) and ECN marks
    //    (RED on each port's backlog).
    for (int f = 0; f < F; ++f) {
      const double d = delivered_step[f];
      if (d <= 0) continue;
      Sender& s = snd[f];
      const auto& path = net.flows[f].path;
      double qdelay = 0, no_mark = 1;
      for (int p : path) {
        qdelay += q[p] / cap_bpus[p];
        if (net.ports[p].ecn) no_mark *= 1.0 - red_mark_probability(q[p], opt.cc_config.red);
      }
      Feedback& fb = s.ring[(s_step + s.delay_steps) % (s.delay_steps + 1)];
      fb.acked_bytes += d;
      fb.delay_x_bytes += d * (net.flows[f].base_rtt_us + qdelay);
      if (uses_ecn(opt.cc) && no_mark < 1.0) {
        const double p_any = 1.0 - std::pow(no_mark, d / opt.mtu_bytes);
        if (uni(rng) < p_any && s.np.on_marked_packet(t)) fb.cnp = true;
      }
      res.flows[f].delivered_bytes += d;
      if (t >= steady_from) steady_delivered[f] += d;
    }

    // 5. PFC thresholds, effective R steps later.
    for (int p = 0; p < P; ++p) {
      if (opt.pfc.enabled) {
        if (q[p] > xoff[p]) asserting[p] = 1;
        else if (q[p] < xon[p]) asserting[p] = 0;
      }
      assert_hist[s_step % R][p] = asserting[p];
      if (asserting[p]) res.ports[p].pause_asserted_us += dt;
    }

    // 6. Statistics, completion.
    const bool steady = t >= steady_from;
    if (steady) steady_time += dt;
    for (int p = 0; p < P; ++p) {
      auto& ps = res.ports[p];
      ps.max_queue_bytes = std::max(ps.max_queue_bytes, q[p]);
      q_sum[p] += q[p] * dt;
      if (steady) {
        q_steady_sum[p] += q[p] * dt;
        ps.steady_max_queue_bytes = std::max(ps.steady_max_queue_bytes, q[p]);
      }
    }
    bool all_done = any_finite;
    for (int f = 0; f < F; ++f) {
      Sender& s = snd[f];
      if (s.finished) continue;
      if (t >= net.flows[f].start_us) res.flows[f].active_us += dt;
      const double size = net.flows[f].size_bytes;
      if (std::isfinite(size) && res.flows[f].delivered_bytes >= size - 1e-3) {
        s.finished = true;
        // The step's last bytes arrive spread over the longest time a hop of
        // its path (its NIC injecting, a port serving) was busy in this step;
        // the flow is done when its remaining bytes have arrived.
        double busy = inject_us[f];
        for (int p : net.flows[f].path) busy = std::max(busy, busy_us[p]);
        const double d = delivered_step[f];
        const double need = size - (res.flows[f].delivered_bytes - d);
        const double share = d > 0 ? std::clamp(need / d, 0.0, 1.0) : 1.0;
        res.flows[f].finish_us = t + std::min(dt, busy * share);
      } else if (std::isfinite(size)) {
        all_done = false;
      }
    }

    // Sampling of the observed port.
    bool obs_paused = false;
    for (auto [f, k] : members[obs])
      if (active(f) && link_paused[upstream_link(f, k)]) obs_paused = true;
    acc_q += q[obs] * dt;
    acc_inj += inj_total;
    acc_out += obs_out;
    acc_paused |= obs_paused;
    acc_paused_frac += (active_senders ? double(paused_senders) / active_senders : 0.0) * dt;
    acc_t += dt;
    const double t_end = t + dt;
    const bool last = s_step + 1 == steps || (opt.stop_when_done && all_done);
    if (t_end >= next_sample - 1e-9 || last) {
      FluidSample smp;
      smp.t_us = t_end;
      smp.queue_bytes = acc_q / acc_t;
      smp.total_rate_gbps = acc_inj / acc_t / kBytesPerUsPerGbps;
      smp.throughput_gbps = acc_out / acc_t / kBytesPerUsPerGbps;
      smp.paused = acc_paused;
      smp.paused_senders_fraction = acc_paused_frac / acc_t;
      res.series.push_back(smp);
      acc_q = acc_inj = acc_out = acc_paused_frac = acc_t = 0;
      acc_paused = false;
      next_sample += opt.sample_interval_us;
    }
    if (opt.stop_when_done && all_done) {
      ++s_step;
      break;
    }
  }

  res.end_us = s_step * dt;
  for (int p = 0; p < P; ++p) {
    res.ports[p].mean_queue_bytes = res.end_us > 0 ? q_sum[p] / res.end_us : 0;
    res.ports[p].steady_mean_queue_bytes = steady_time > 0 ? q_steady_sum[p] / steady_time : 0;
  }
  for (int f = 0; f < F; ++f) {
    res.flows[f].steady_rate_gbps =
        steady_time > 0 ? steady_delivered[f] / steady_time / kBytesPerUsPerGbps : 0;
    res.flows[f].final_rate_gbps =
        controller_rate_gbps(snd[f], opt.cc, net.flows[f].line_rate_gbps);
  }
  return res;
}

FluidNetwork incast_network(int senders, double capacity_gbps, double line_rate_gbps,
                            double flow_bytes, double base_rtt_us, double buffer_bytes,
                            const std::vector<double>& start_us) {
  if (senders < 1) throw std::invalid_argument("incast_network: senders must be >= 1");
  FluidNetwork net;
  net.ports.push_back(FluidPortSpec{"bottleneck", capacity_gbps, buffer_bytes, true});
  for (int i = 0; i < senders; ++i) {
    FluidFlowSpec fl;
    fl.path = {0};
    fl.line_rate_gbps = line_rate_gbps;
    fl.start_us = i < static_cast<int>(start_us.size()) ? start_us[i] : 0.0;
    fl.size_bytes = flow_bytes;
    fl.base_rtt_us = base_rtt_us;
    net.flows.push_back(fl);
  }
  return net;
}

FluidNetwork pfc_hol_chain(int congested, double capacity_gbps, double uplink_gbps,
                           double base_rtt_us, double buffer_bytes) {
  if (congested < 1) throw std::invalid_argument("pfc_hol_chain: congested must be >= 1");
  FluidNetwork net;
  net.ports.push_back(FluidPortSpec{"s2_to_busy_receiver", capacity_gbps, buffer_bytes, true});
  net.ports.push_back(FluidPortSpec{"s2_to_idle_receiver", capacity_gbps, buffer_bytes, true});
  net.ports.push_back(FluidPortSpec{"s1_uplink", uplink_gbps, buffer_bytes, true});
  for (int i = 0; i <= congested; ++i) {
    FluidFlowSpec fl;
    fl.path = {2, i < congested ? 0 : 1};
    fl.line_rate_gbps = capacity_gbps;
    fl.base_rtt_us = base_rtt_us;
    net.flows.push_back(fl);
  }
  return net;
}

IncastReport incast_report(const IncastOptions& o) {
  IncastReport rep;
  rep.options = o;
  FluidNetwork net =
      incast_network(o.senders, o.capacity_gbps, o.capacity_gbps, o.flow_bytes, o.base_rtt_us,
                     o.buffer_bytes);
  FluidOptions fo;
  fo.cc = o.cc;
  fo.cc_config = o.cc_config;
  fo.pfc.enabled = o.pfc;
  fo.duration_us = o.duration_us;
  fo.sample_interval_us = o.sample_interval_us;
  fo.steady_from_us = o.duration_us / 2;
  fo.seed = o.seed;
  const FluidResult r = run_fluid(net, fo);
  const auto& port = r.ports[0];
  rep.series = r.series;
  rep.steady_mean_queue_bytes = port.steady_mean_queue_bytes;
  rep.steady_max_queue_bytes = port.steady_max_queue_bytes;
  rep.max_queue_bytes = port.max_queue_bytes;
  rep.queue_limit_bytes = port.limit_bytes;
  rep.pfc_xoff_bytes = port.xoff_bytes;
  double paused = 0, active = 0, sum = 0, sum2 = 0;
  for (const auto& f : r.flows) {
    paused += f.paused_us;
    active += f.active_us;
    sum += f.steady_rate_gbps;
    sum2 += f.steady_rate_gbps * f.steady_rate_gbps;
  }
  rep.pause_fraction = active > 0 ? paused / active : 0;
  rep.port_pause_asserted_fraction = r.end_us > 0 ? port.pause_asserted_us / r.end_us : 0;
  rep.throughput_fraction =
      r.end_us > 0 ? port.served_bytes / (bpus(o.capacity_gbps) * r.end_us) : 0;
  rep.dropped_bytes = r.total_dropped_bytes;
  rep.jain_fairness = sum2 > 0 ? sum * sum / (r.flows.size() * sum2) : 0;
  return rep;
}

// ---- SVG ---------------------------------------------------------------------

namespace {

struct Panel {
  std::string title, unit;
  std::vector<double> y;
  double ref = -1;  // horizontal reference line (< 0: none)
  std::string ref_label;
};

void draw_panel(base::Svg& svg, const Panel& p, const std::vector<double>& t, double x0, double y0, double w,
                double h) {
  double ymax = 0;
  for (double v : p.y) ymax = std::max(ymax, v);
  if (p.ref > 0) ymax = std::max(ymax, p.ref);
  const base::LinearScale y{0.0, base::nice_ceiling(1.1 * ymax, 4), y0 + h, y0};
  const base::LinearScale x{0.0, t.empty() ? 1.0 : std::max(t.back(), 1e-9), x0, x0 + w};
  svg.rect(x0, y0, w, h, "none", {{"stroke", "#888"}});
  svg.text(x0, y0 - 6, p.title + " (" + p.unit + ")", {{"font-size", "13"}});
  const auto tick = [](double v) { return fmt(v); };
  base::draw_axis(svg, y, base::AxisSide::kLeft, x0, "", tick, 4);
  base::draw_axis(svg, x, base::AxisSide::kBottom, y0 + h, "", tick, 6);
  if (p.ref > 0) {
    svg.line(x0, y(p.ref), x0 + w, y(p.ref), "#c33", {{"stroke-dasharray", "4,3"}});
    svg.text(x0 + w - 4, y(p.ref) - 4, p.ref_label, {{"font-size", "10"}, {"text-anchor", "end"}, {"fill", "#c33"}});
  }
  base::Svg::Points line;
  for (std::size_t i = 0; i < t.size() && i < p.y.size(); ++i) line.emplace_back(x(t[i]), y(p.y[i]));
  svg.polyline(line, "#1f77b4", {{"stroke-width", "1.2"}});
}

}  // namespace

std::string incast_svg(const IncastReport& rep) {
  const double W = 900, panel_h = 170, x0 = 70, w = W - x0 - 30, gap = 60, top = 60;
  std::vector<double> t;
  Panel q{"bottleneck queue", "KB", {}, rep.pfc_xoff_bytes / 1e3, "PFC XOFF"};
  Panel r{"total sender rate", "Gb/s", {}, rep.options.capacity_gbps, "capacity"};
  Panel z{"PFC-paused senders", "fraction", {}, -1, ""};
  for (const auto& s : rep.series) {
    t.push_back(s.t_us);
    q.y.push_back(s.queue_bytes / 1e3);
    r.y.push_back(s.total_rate_gbps);
    z.y.push_back(s.paused_senders_fraction);
  }
  const double H = top + 3 * (panel_h + gap);
  base::Svg svg(W, H);
  svg.text(x0, 24,
           std::to_string(rep.options.senders) + ":1 incast, " + std::string(cc_algorithm_name(rep.options.cc)) + ", " +
               fmt(rep.options.capacity_gbps) + " Gb/s, base RTT " + fmt(rep.options.base_rtt_us) + " us, PFC " +
               (rep.options.pfc ? "on" : "off"),
           {{"font-size", "15"}});
  svg.text(x0, 42,
           "steady mean queue " + fmt(rep.steady_mean_queue_bytes / 1e3) + " KB, max " +
               fmt(rep.max_queue_bytes / 1e3) + " KB, paused " + fmt(100 * rep.pause_fraction) +
               "% of sender time, throughput " + fmt(100 * rep.throughput_fraction) + "% of C; time axis in us",
           {{"font-size", "11"}});
  draw_panel(svg, q, t, x0, top + 10, w, panel_h);
  draw_panel(svg, r, t, x0, top + 10 + panel_h + gap, w, panel_h);
  draw_panel(svg, z, t, x0, top + 10 + 2 * (panel_h + gap), w, panel_h);
  return svg.str();
}

base::Json incast_report_json(const IncastReport& rep) {
  const auto& op = rep.options;
  base::Json j;
  j["senders"] = op.senders;
  j["cc"] = std::string(cc_algorithm_name(op.cc));
  j["capacity_gbps"] = op.capacity_gbps;
  j["base_rtt_us"] = op.base_rtt_us;
  j["duration_us"] = op.duration_us;
  j["pfc"] = op.pfc;
  j["buffer_bytes"] = op.buffer_bytes;
  j["steady_mean_queue_bytes"] = rep.steady_mean_queue_bytes;
  j["steady_max_queue_bytes"] = rep.steady_max_queue_bytes;
  j["max_queue_bytes"] = rep.max_queue_bytes;
  j["queue_limit_bytes"] = rep.queue_limit_bytes;
  j["pfc_xoff_bytes"] = rep.pfc_xoff_bytes;
  j["pause_fraction"] = rep.pause_fraction;
  j["port_pause_asserted_fraction"] = rep.port_pause_asserted_fraction;
  j["throughput_fraction"] = rep.throughput_fraction;
  j["dropped_bytes"] = rep.dropped_bytes;
  j["jain_fairness"] = rep.jain_fairness;
  base::Json series;
  auto arr = [&](const char* name, auto get) {
    base::Json a = base::Json::array();
    for (const FluidSample& x : rep.series) a.push_back(get(x));
    series[name] = std::move(a);
  };
  arr("t_us", [](const FluidSample& x) { return x.t_us; });
  arr("queue_bytes", [](const FluidSample& x) { return x.queue_bytes; });
  arr("total_rate_gbps", [](const FluidSample& x) { return x.total_rate_gbps; });
  arr("throughput_gbps", [](const FluidSample& x) { return x.throughput_gbps; });
  arr("paused", [](const FluidSample& x) { return x.paused; });
  arr("paused_senders_fraction", [](const FluidSample& x) { return x.paused_senders_fraction; });
  j["series"] = std::move(series);
  return j;
}

// ---- congestion_effect ---------------------------------------------------------

namespace {

std::mutex g_memo_mu;
std::map<CongestionInput, CongestionEffect>& memo() {
  static std::map<CongestionInput, CongestionEffect> m;
  return m;
}

CongestionEffect compute_effect(const CongestionInput& in) {
  const double c_bpus = bpus(in.link_capacity_gbps);
  FluidNetwork net = incast_network(in.senders_per_bottleneck, in.link_capacity_gbps,
                                    in.link_capacity_gbps, in.flow_bytes, in.base_rtt_us);
  FluidOptions fo;
  fo.cc = in.controller;
  fo.pfc.enabled = in.pfc;
  fo.duration_us = kCongestionHorizonUs;
  fo.steady_from_us = kCongestionHorizonUs * 0.75;  // the last quarter
  fo.sample_interval_us = 10;
  fo.stop_when_done = true;
  const FluidResult r = run_fluid(net, fo);
  const auto& port = r.ports[0];

  CongestionEffect e;
  const double total = in.flow_bytes * in.senders_per_bottleneck;
  double delivered = 0, paused = 0, active = 0, last_finish = 0;
  bool all_done = true;
  for (const auto& f : r.flows) {
    delivered += f.delivered_bytes;
    paused += f.paused_us;
    active += f.active_us;
    if (f.finish_us < 0) all_done = false;
    last_finish = std::max(last_finish, f.finish_us);
  }
  const double qdelay_sum_us = port.mean_queue_bytes * r.end_us / c_bpus;  // integral of q/C dt
  if (all_done) {
    e.completion_time_us = last_finish;
    e.added_latency_us = qdelay_sum_us / std::max(r.end_us, 1e-9);
    e.pfc_pause_fraction = active > 0 ? paused / active : 0;
  } else {
    // Extrapolate the rest of the transfer at the last quarter's steady state.
    double steady_rate_bpus = 0;
    for (const auto& f : r.flows) steady_rate_bpus += bpus(f.steady_rate_gbps);
    steady_rate_bpus = std::max(steady_rate_bpus, 1e-9);
    const double rest_us = (total - delivered) / steady_rate_bpus;
    const double steady_qdelay_us = port.steady_mean_queue_bytes / c_bpus;
    // Pause fraction of the steady window, from the port's series.
    double steady_paused = 0, steady_t = 0;
    for (const auto& smp : r.series) {
      if (smp.t_us <= fo.steady_from_us) continue;
      steady_paused += smp.paused_senders_fraction;
      steady_t += 1;
    }
    const double steady_pause_frac = steady_t > 0 ? steady_paused / steady_t : 0;
    e.extrapolated = true;
    e.completion_time_us = r.end_us + rest_us;
    e.added_latency_us = (qdelay_sum_us + steady_qdelay_us * rest_us) / e.completion_time_us;
    const double n = in.senders_per_bottleneck;
    e.pfc_pause_fraction = (paused + steady_pause_frac * n * rest_us) / (active + n * rest_us);
  }
  e.achieved_bandwidth_fraction = total / (c_bpus * e.completion_time_us);
  // Downsample the series to <= 256 points.
  const std::size_t stride = std::max<std::size_t>(1, (r.series.size() + 255) / 256);
  for (std::size_t i = 0; i < r.series.size(); i += stride) e.queue_series.push_back(r.series[i]);
  return e;
}

}  // namespace

CongestionEffect congestion_effect(const CongestionInput& in) {
  if (in.senders_per_bottleneck < 1 || !(in.flow_bytes > 0) || !std::isfinite(in.flow_bytes) ||
      !(in.link_capacity_gbps > 0) || !(in.base_rtt_us >= 1))
    throw std::invalid_argument(
        "congestion_effect: needs senders >= 1, finite flow_bytes > 0, capacity > 0, "
        "base_rtt_us >= 1");
  {
    std::lock_guard<std::mutex> lock(g_memo_mu);
    auto it = memo().find(in);
    if (it != memo().end()) return it->second;
  }
  CongestionEffect e = compute_effect(in);  // outside the lock: slow, deterministic
  std::lock_guard<std::mutex> lock(g_memo_mu);
  return memo().emplace(in, std::move(e)).first->second;
}

std::size_t congestion_cache_size() {
  std::lock_guard<std::mutex> lock(g_memo_mu);
  return memo().size();
}

void clear_congestion_cache() {
  std::lock_guard<std::mutex> lock(g_memo_mu);
  memo().clear();
}

}  // namespace megascale::network
