// sim/comm_costs.cc: see comm_costs.h.
#include "sim/comm_costs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>
#include <fmt/format.h>

#include "model/collective_cost.h"
#include "model/hardware.h"
#include "model/job_schedule.h"
#include "model/payload.h"
#include "model/profile.h"

namespace megascale::sim {
namespace {

void fill_analytical(const model::Scenario& s, const model::Estimate& e, CommTimes* t) {
  const model::ParallelConfig& p = s.parallel;
  const model::GpuProfile& gpu = model::hardware_profile(s);
  const model::ParallelLinks link = model::parallel_links(s, gpu);
  t->p2p_s = p.pp > 1 ? e.p2p_s : 0.0;
  for (int r = 0; r < p.pp; ++r) {
    for (int c = 0; c < p.vpp; ++c) {
      const model::CollectiveKind reduce =
          p.zero_stage == 0 ? model::CollectiveKind::kAllReduce : model::CollectiveKind::kReduceScatter;
      t->dp_reduce_s[r * p.vpp + c] =
          model::collective_time_s(reduce, p.dp, model::dp_payload_bytes(s, r, c, model::OpKind::kDpReduceScatter), link.dp);
      t->dp_gather_s[r * p.vpp + c] =
          p.zero_stage == 0 ? 0.0
                            : model::collective_time_s(model::CollectiveKind::kAllGather, p.dp,
                                                       model::dp_payload_bytes(s, r, c, model::OpKind::kDpAllGather), link.dp);
    }
  }
  // Tied embeddings only (model::embedding_sync_needed; the CPU engine's output
  // layer is untied): the closed form's own figure (model/estimator.h).
  t->embedding_sync_s = e.breakdown.embedding_sync_s;
}

std::string note(const char* what, const network::CollectiveResult& r) {
  return fmt::format("{}: {} ({}) of {:.1f} MB over {} ranks x {} groups: {:.3f} ms, busbw {:.1f} GB/s, bottleneck {}",
                     what, network::to_string(r.op), network::to_string(r.algorithm), r.bytes / 1e6, r.ranks, r.groups,
                     r.time_s * 1e3, r.busbw_gbs, r.bottleneck.kind);
}

// Times the scenario's collectives on its fabric, memoised by (op, bytes).
class NetworkTimer {
 public:
  NetworkTimer(const model::Scenario& s, const FabricInputs& f)
      : s_(s),
        topology_(network::Topology::build(f.spec)),
        router_(topology_, f.ecmp),
        sim_(topology_, router_, f.collectives) {
    if (s.parallel.gpus() > topology_.spec().gpus)
      throw network::FabricError("gpus", "the job needs " + std::to_string(s.parallel.gpus()) +
                                             " GPUs; the fabric has " + std::to_string(topology_.spec().gpus));
  }

  // All TP x PP data-parallel groups at once.
  double dp(network::CollectiveOp op, double bytes, CommTimes* t) {
    const model::ParallelConfig& p = s_.parallel;
    std::vector<std::vector<int>> groups;
    for (int r = 0; r < p.pp; ++r) {
      for (int tp = 0; tp < p.tp; ++tp) {
        std::vector<int> g;
        for (int d = 0; d < p.dp; ++d) g.push_back(gpu_of(p, tp, d, r));
        groups.push_back(std::move(g));
      }
    }
    return run("dp", op, bytes, std::move(groups), t);
  }

  // One message of `bytes` from every stage to its next (`step` = +1) or previous
  // (-1) stage, every (TP rank, replica) pipeline at once; per sending stage, the
  // latency of one NCCL send plus its slowest transfer. The wrap-around between
  // the last and the first stage only when `wrap`.
  std::vector<double> p2p_boundaries(double bytes, int step, bool wrap, CommTimes* t) {
    const model::ParallelConfig& p = s_.parallel;
    std::vector<network::StepFlow> flows;
    std::vector<int> stage_of;
    for (int d = 0; d < p.dp; ++d) {
      for (int tp = 0; tp < p.tp; ++tp) {
        for (int r = 0; r < p.pp; ++r) {
          const int to = r + step;
          if (!wrap && (to < 0 || to >= p.pp)) continue;
          flows.push_back({gpu_of(p, tp, d, r), gpu_of(p, tp, d, (to + p.pp) % p.pp), 0, bytes});
          stage_of.push_back(r);
        }
      }
    }
    std::vector<double> out(static_cast<size_t>(p.pp), 0.0);
    if (flows.empty() || bytes <= 0) return out;
    const network::StepOutcome o = sim_.solve_step(flows);
    ++t->solves;
    const network::NcclLatency& lat = sim_.options().latency;
    const double hop_us = o.network_subflows > 0
                              ? lat.network_hop_us + o.network_path_latency_us + o.mean_added_latency_us
                              : lat.nvlink_hop_us + o.nvlink_path_latency_us;
    for (size_t i = 0; i < flows.size(); ++i) {
      double& s = out[static_cast<size_t>(stage_of[i])];
      s = std::max(s, (lat.base_us + hop_us) * 1e-6 + o.transfer_bandwidth_s[i]);
    }
    t->notes.push_back(fmt::format("pp {}: sendrecv of {:.1f} MB, per boundary {:.3f}-{:.3f} ms",
                                   step > 0 ? "to next stage" : "to previous stage", bytes / 1e6,
                                   *std::min_element(out.begin(), out.end()) * 1e3,
                                   *std::max_element(out.begin(), out.end()) * 1e3));
    return out;
  }

  // First and last stage of every (TP rank, replica).
  double embedding(double bytes, CommTimes* t) {
    const model::ParallelConfig& p = s_.parallel;
    std::vector<std::vector<int>> groups;
    for (int d = 0; d < p.dp; ++d)
      for (int tp = 0; tp < p.tp; ++tp) groups.push_back({gpu_of(p, tp, d, 0), gpu_of(p, tp, d, p.pp - 1)});
    return run("embedding", network::CollectiveOp::kAllReduce, bytes, std::move(groups), t);
  }

 private:
  double run(const char* what, network::CollectiveOp op, double bytes,
             std::vector<std::vector<int>> groups, CommTimes* t) {
    if (bytes <= 0) return 0.0;
    const auto key = std::make_pair(std::string(what) + network::to_string(op), bytes);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    network::CollectiveRequest req;
    req.op = op;
    req.algorithm = network::CollectiveAlgorithm::kRing;
    req.bytes = bytes;
    req.groups = std::move(groups);
    const network::CollectiveResult r = sim_.run(req);
    ++t->solves;
    t->notes.push_back(note(what, r));
    memo_.emplace(key, r.time_s);
    return r.time_s;
  }

  const model::Scenario& s_;
  network::Topology topology_;
  network::Router router_;
  network::CollectiveSimulator sim_;
  std::map<std::pair<std::string, double>, double> memo_;
};

void fill_network(const model::Scenario& s, const FabricInputs& f, CommTimes* t) {
  const model::ParallelConfig& p = s.parallel;
  NetworkTimer net(s, f);
  if (p.pp > 1) {
    const double bytes = static_cast<double>(model::p2p_message_bytes(s));
    const bool wrap = p.vpp > 1;  // interleaved: the last stage feeds the first's next chunk
    t->p2p_next_s = net.p2p_boundaries(bytes, +1, wrap, t);
    t->p2p_prev_s = net.p2p_boundaries(bytes, -1, wrap, t);
    // A stage without a send in a direction (V = 1 ends) has 0 there.
    t->p2p_s = std::max(*std::max_element(t->p2p_next_s.begin(), t->p2p_next_s.end()),
                        *std::max_element(t->p2p_prev_s.begin(), t->p2p_prev_s.end()));
    if (model::embedding_sync_needed(s)) {
      t->embedding_sync_s =
          net.embedding(static_cast<double>(s.model.vocab) * s.model.hidden / p.tp *
                                 model::grad_element_bytes(s.optimizations),
                         t);
    }
  }
  if (p.dp > 1) {
    for (int r = 0; r < p.pp; ++r) {
      for (int c = 0; c < p.vpp; ++c) {
        const network::CollectiveOp reduce =
            p.zero_stage == 0 ? network::CollectiveOp::kAllReduce : network::CollectiveOp::kReduceScatter;
        t->dp_reduce_s[r * p.vpp + c] = net.dp(reduce, model::dp_payload_bytes(s, r, c, model::OpKind::kDpReduceScatter), t);
        t->dp_gather_s[r * p.vpp + c] =
            p.zero_stage == 0 ? 0.0
                              : net.dp(network::CollectiveOp::kAllGather,
                                       model::dp_payload_bytes(s, r, c, model::OpKind::kDpAllGather), t);
      }
    }
  }
}

}  // namespace

const char* to_string(CommModel m) {
  switch (m) {
    case CommModel::kNetwork: return "network";
    case CommModel::kAnalytical: return "analytical";
    case CommModel::kZero: return "zero";
  }
  return "unknown";
}

std::optional<CommModel> parse_comm_model(std::string_view name) {
  for (CommModel m : {CommModel::kNetwork, CommModel::kAnalytical, CommModel::kZero})
    if (name == to_string(m)) return m;
  return std::nullopt;
}

CommTimes comm_times(const model::Scenario& s, const model::Estimate& e, CommModel model,
                     const FabricInputs* fabric) {
  const auto t0 = std::chrono::steady_clock::now();
  const model::ParallelConfig& p = s.parallel;
  CommTimes t;
  t.model = model;
  t.pp = p.pp;
  t.vpp = p.vpp;
  t.dp_reduce_s.assign(static_cast<size_t>(p.pp) * p.vpp, 0.0);
  t.dp_gather_s.assign(static_cast<size_t>(p.pp) * p.vpp, 0.0);
  switch (model) {
    case CommModel::kZero:
      break;
    case CommModel::kAnalytical:
      fill_analytical(s, e, &t);
      break;
    case CommModel::kNetwork:
      if (fabric == nullptr) throw std::invalid_argument("comm_times: the network model needs a fabric");
      fill_network(s, *fabric, &t);
      break;
  }
  if (p.dp <= 1) {
    std::fill(t.dp_reduce_s.begin(), t.dp_reduce_s.end(), 0.0);
    std::fill(t.dp_gather_s.begin(), t.dp_gather_s.end(), 0.0);
  }
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

}  // namespace megascale::sim
