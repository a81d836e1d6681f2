// sim/network_crosscheck.cc: see network_crosscheck.h.
#include "sim/network_crosscheck.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include <fmt/format.h>

#include "model/payload.h"
#include "network/collectives.h"
#include "network/simgrid_check.h"
#include "sim/comm_costs.h"
#include "sim/event_engine.h"
#include "sim/op_costs.h"
#include "sim/variability.h"

namespace megascale::sim {
namespace {

using model::Op;
using model::OpKind;


// A communication op of the step: a send of one replica, or a DP collective of
// all replicas (replica = -1).
struct CommOp {
  int replica;
  int rank;
  int index;
  double start_s = 0;
  double event_s = 0;      // its duration in the run being re-timed
  double bandwidth_s = 0;  // SimGrid: slowest flow
  double latency_s = 0;    // NCCL's cost form
};

struct Stats {
  double sum = 0, max = 0;
  int n = 0;
  void add(double simgrid_s, double event_s) {
    const double d = std::fabs(simgrid_s - event_s) / std::max(event_s, 1e-12);
    sum += d;
    max = std::max(max, d);
    ++n;
  }
  double mean() const { return n > 0 ? sum / n : 0.0; }
};

}  // namespace

NetworkCrossCheck network_crosscheck(const model::Scenario& s, const SimOptions& o,
                                     const CrossCheckOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const model::ParallelConfig& p = s.parallel;
  if (o.comm != CommModel::kNetwork || !o.fabric)
    throw std::invalid_argument("network_crosscheck: needs the network communication model and a fabric");
  if (o.max_replicas < p.dp)
    throw std::invalid_argument("network_crosscheck: every DP replica must be simulated (max_replicas " +
                                std::to_string(o.max_replicas) + " < DP " + std::to_string(p.dp) + ")");
  if (options.rounds < 1) throw std::invalid_argument("network_crosscheck: rounds must be >= 1");

  const JobInputs in(s, o);
  const OpCosts& costs = in.costs;
  const model::Schedule& schedule = in.schedule;
  const StepFactors f = in.variability.step(0);
  const int ranks = p.pp;
  const int n = p.dp;

  // Refuse before simulating anything when the flow set would be too large:
  // every send is TP flows, every DP collective TP x DP, each of `qps` sub-flows.
  {
    size_t per_replica = 0;
    for (const model::RankSchedule& rank : schedule.ranks)
      for (const Op& op : rank.ops)
        per_replica += model::is_send(op.kind) || (model::is_dp_collective(op.kind) && n > 1) ? 1 : 0;
    const size_t estimate = per_replica * static_cast<size_t>(n) * static_cast<size_t>(p.tp) *
                            static_cast<size_t>(std::max(1, o.fabric->ecmp.qps_per_connection));
    if (estimate > options.max_flows)
      throw std::invalid_argument("network_crosscheck: ~" + std::to_string(estimate) +
                                  " flows, more than the " + std::to_string(options.max_flows) +
                                  " this check allows (use a smaller job or fewer micro-batches)");
  }
  const network::Topology topology = network::Topology::build(o.fabric->spec);
  const network::Router router(topology, o.fabric->ecmp);
  network::CollectiveSimulator fabric(topology, router, o.fabric->collectives);
  const network::NcclLatency& lat = o.fabric->collectives.latency;

  // SimGrid's op times once known: [replica][rank][op], < 0 = none.
  std::vector<std::vector<std::vector<double>>> override_s(n, std::vector<std::vector<double>>(ranks));
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < ranks; ++r) override_s[i][r].assign(schedule.ranks[r].ops.size(), -1.0);
  const auto duration = [&](int i, int r, const Op& op) {
    const size_t k = static_cast<size_t>(&op - schedule.ranks[r].ops.data());
    const double fixed = override_s[i][r][k];
    return fixed >= 0 ? fixed : costs.duration_s(r, op, f.factor(i, r));
  };
  // The first run is the event simulation as it is; later runs take SimGrid's
  // op times, which already include the transfers met on the way (no NIC sharing
  // on top).
  const EventOptions first_run{o.share_nic, std::nullopt};
  const EventOptions retimed_run{false, std::nullopt};

  // NCCL latency of the DP collective (rank, kind, bytes), from network/'s run.
  std::map<std::tuple<int, OpKind, double>, double> dp_latency;
  auto collective_latency_s = [&](int rank, OpKind kind, double bytes) {
    const auto key = std::make_tuple(rank, kind, bytes);
    if (auto it = dp_latency.find(key); it != dp_latency.end()) return it->second;
    network::CollectiveRequest req;
    req.op = kind == OpKind::kDpAllGather       ? network::CollectiveOp::kAllGather
             : kind == OpKind::kDpReduceScatter ? network::CollectiveOp::kReduceScatter
                                                : network::CollectiveOp::kAllReduce;
    req.bytes = bytes;
    for (int t = 0; t < p.tp; ++t) {
      std::vector<int> g;
      for (int d = 0; d < n; ++d) g.push_back(gpu_of(p, t, d, rank));
      req.groups.push_back(std::move(g));
    }
    const double l = fabric.run(req).latency_s;
    dp_latency.emplace(key, l);
    return l;
  };

  NetworkCrossCheck out;
  EventTimeline t = run_events(schedule, n, duration, first_run);
  out.event_step_s = t.iteration_s;
  for (int round = 0; round < options.rounds; ++round) {
    std::vector<CommOp> ops;
    std::vector<network::StepFlow> transfers;
    std::vector<double> starts;
    std::vector<size_t> op_of;  // per transfer
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Op>& list = schedule.ranks[r].ops;
      for (int k = 0; k < static_cast<int>(list.size()); ++k) {
        const Op& op = list[k];
        if (model::is_send(op.kind)) {
          for (int i = 0; i < n; ++i) {
            const model::OpTiming& at = t.at(i, r, k);
            ops.push_back({i, r, k, at.start_s, at.end_s - at.start_s});
            const bool nvlink = topology.server_of_gpu(gpu_of(p, 0, i, r)) ==
                                topology.server_of_gpu(gpu_of(p, 0, i, op.peer));
            ops.back().latency_s = (lat.base_us + (nvlink ? lat.nvlink_hop_us : lat.network_hop_us)) * 1e-6;
            for (int tp = 0; tp < p.tp; ++tp) {
              transfers.push_back({gpu_of(p, tp, i, r), gpu_of(p, tp, i, op.peer), 0, static_cast<double>(op.bytes)});
              starts.push_back(at.start_s);
              op_of.push_back(ops.size() - 1);
            }
          }
        } else if (model::is_dp_collective(op.kind) && n > 1) {
          double start = 0, end = 0;
          for (int i = 0; i < n; ++i) {
            start = std::max(start, t.at(i, r, k).start_s);
            end = std::max(end, t.at(i, r, k).end_s);
          }
          ops.push_back({-1, r, k, start, end - start});
          const double payload = model::dp_payload_bytes(s, r, op.chunk, op.kind);
          const double edge = payload * (n - 1) / n * (op.kind == OpKind::kDpAllReduce ? 2.0 : 1.0);
          ops.back().latency_s = collective_latency_s(r, op.kind, payload);
          for (int tp = 0; tp < p.tp; ++tp) {
            for (int d = 0; d < n; ++d) {
              transfers.push_back({gpu_of(p, tp, d, r), gpu_of(p, tp, (d + 1) % n, r), 0, edge});
              starts.push_back(start);
              op_of.push_back(ops.size() - 1);
            }
          }
        }
      }
    }

    // Routed op by op: network/ divides a GPU's NVLink bandwidth among the NVLink
    // flows of one collective step, i.e. of one op; flows of different ops share
    // the links they meet on inside SimGrid.
    network::FlowSet flows;
    std::vector<size_t> flow_op;  // per sub-flow
    {
      network::FlowSet one;
      std::vector<uint32_t> transfer_of;
      std::vector<uint8_t> on_network;
      size_t begin = 0;
      while (begin < transfers.size()) {
        size_t end = begin;
        while (end < transfers.size() && op_of[end] == op_of[begin]) ++end;
        fabric.subflows(std::span<const network::StepFlow>(transfers.data() + begin, end - begin),
                        std::span<const double>(starts.data() + begin, end - begin), &one, &transfer_of,
                        &on_network);
        for (size_t j = 0; j < one.size(); ++j) {
          flows.add(one.path(j), one.bytes(j), one.rate_cap_gbps(j), one.start_s(j));
          flow_op.push_back(op_of[begin]);
        }
        begin = end;
      }
    }
    if (flows.size() > options.max_flows)
      throw std::invalid_argument("network_crosscheck: " + std::to_string(flows.size()) +
                                  " flows, more than the " + std::to_string(options.max_flows) +
                                  " this check allows (use a smaller job or fewer micro-batches)");
    if (flows.empty()) break;  // no pipeline and no DP: nothing crosses the fabric
    const network::SimGridResult sg = network::simgrid_completion_times(fabric.link_capacity_gbps(), flows);
    out.simgrid_wall_s += sg.build_wall_s + sg.run_wall_s;
    out.flows = flows.size();
    for (size_t j = 0; j < flows.size(); ++j) {
      CommOp& c = ops[flow_op[j]];
      c.bandwidth_s = std::max(c.bandwidth_s, sg.completion_s[j] - flows.start_s(j));
    }

    Stats send, dp;
    for (const CommOp& c : ops) {
      const double simgrid_s = c.bandwidth_s + c.latency_s;
      (c.replica >= 0 ? send : dp).add(simgrid_s, c.event_s);
      if (c.replica >= 0) {
        override_s[c.replica][c.rank][c.index] = simgrid_s;
      } else {
        for (int i = 0; i < n; ++i) override_s[i][c.rank][c.index] = simgrid_s;
      }
    }
    if (round == 0) {  // the event simulation's own op times against SimGrid's
      out.send_ops = send.n;
      out.dp_ops = dp.n;
      out.send_mean_rel_diff = send.mean();
      out.send_max_rel_diff = send.max;
      out.dp_mean_rel_diff = dp.mean();
      out.dp_max_rel_diff = dp.max;
      double worst = -1;
      for (const CommOp& c : ops) {
        if (c.replica < 0) continue;
        const double sg_s = c.bandwidth_s + c.latency_s;
        const double d = std::fabs(sg_s - c.event_s) / std::max(c.event_s, 1e-12);
        if (d <= worst) continue;
        worst = d;
        const Op& op = schedule.ranks[c.rank].ops[c.index];
        out.worst_send = fmt::format(
            "replica {} pp rank {} {} mb {} chunk {} to pp rank {} at {:.4f} s: event {:.3f} ms, SimGrid {:.3f} ms",
            c.replica, c.rank, model::to_string(op.kind), op.microbatch, op.chunk, op.peer, c.start_s, c.event_s * 1e3,
            sg_s * 1e3);
      }
    }
    out.rounds = round + 1;
    t = run_events(schedule, n, duration, retimed_run);
  }
  out.simgrid_step_s = t.iteration_s;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace megascale::sim
