// model/fused_overlap.cc: the fused TP collective + GEMM pipeline with SM sharing.
#include "model/fused_overlap.h"

#include <algorithm>
#include <stdexcept>
#include <vector>
#include <string>

namespace megascale::model {
namespace {

struct Interval {
  double begin_s;
  double end_s;
};

// End of a compute piece started at `start_s`: it progresses at 1/piece_shared_s
// while communication is in flight (the union of `busy`, sorted and disjoint)
// and at 1/piece_s otherwise.
double advance_piece(double start_s, double piece_s, double piece_shared_s,
                     const std::vector<Interval>& busy) {
  double t = start_s;
  double left = 1.0;  // fraction of the piece still to do
  for (const Interval& iv : busy) {
    if (iv.end_s <= t) continue;
    if (iv.begin_s > t) {  // a stretch without communication first
      const double free_s = iv.begin_s - t;
      if (left * piece_s <= free_s) return t + left * piece_s;
      left -= free_s / piece_s;
      t = iv.begin_s;
    }
    const double shared_s = iv.end_s - t;
    if (left * piece_shared_s <= shared_s) return t + left * piece_shared_s;
    left -= shared_s / piece_shared_s;
    t = iv.end_s;
  }
  return t + left * piece_s;
}

}  // namespace

double fused_pair_time_s(int chunks, double piece_s, double piece_shared_s, double comm_s,
                          CommSide side) {
  const int n = std::max(1, chunks);
  const double c = comm_s / n;
  piece_shared_s = std::max(piece_shared_s, piece_s);
  std::vector<Interval> busy;
  double end_s = 0;
  if (side == CommSide::kBefore) {
    // Communication pieces back to back from 0 (in flight throughout [0, n c]);
    // piece i computes once its data has arrived.
    busy.push_back({0.0, n * c});
    double t = 0;
    for (int i = 0; i < n; ++i) {
      t = advance_piece(std::max(t, (i + 1) * c), piece_s, piece_shared_s, busy);
    }
    end_s = std::max(t, n * c);
  } else {
    // Compute pieces back to back; communication piece i follows compute piece i.
    // The communication schedule depends on when compute ends, and compute's pace
    // on communication: build both piece by piece (piece i's compute can only be
    // slowed by communication pieces < i, which are known by then).
    double t = 0;
    double comm_t = 0;
    for (int i = 0; i < n; ++i) {
      t = advance_piece(t, piece_s, piece_shared_s, busy);
      const double begin = std::max(comm_t, t);
      comm_t = begin + c;
      if (!busy.empty() && busy.back().end_s >= begin) {
        busy.back().end_s = comm_t;
      } else {
        busy.push_back({begin, comm_t});
      }
    }
    end_s = std::max(t, comm_t);
  }
  return end_s;
}

GpuProfile without_comm_sms(const GpuProfile& gpu, int comm_ctas) {
  GpuProfile g = gpu;
  g.sm_count = std::max(1, gpu.sm_count - std::max(0, comm_ctas));
  // Peak tensor throughput is per SM: the remaining SMs have their share of it.
  g.peak_tflops = gpu.peak_tflops * g.sm_count / gpu.sm_count;
  return g;
}

const char* to_string(UbMethod m) {
  switch (m) {
    case UbMethod::kRingExchange: return "ring_exchange";
    case UbMethod::kPipeline: return "pipeline";
    case UbMethod::kBulk: return "bulk";
  }
  return "?";
}

std::optional<UbMethod> ub_default_method(std::string_view te_gemm) {
  for (const UbGemm& g : kUbGemms) {
    if (g.name == te_gemm) return g.method;
  }
  return std::nullopt;
}

bool ub_method_allowed(std::string_view te_gemm, UbMethod m) {
  const std::optional<UbMethod> d = ub_default_method(te_gemm);
  if (!d) throw std::logic_error("ub_method_allowed: '" + std::string(te_gemm) + "' is not a userbuffers GEMM");
  // TE's initialize_ub: the forward reduce-scatters (layers_reduce_scatter_overlap
  // proj_fprop, fc2_fprop) take "pipeline" or "ring_exchange"; the all-gathers
  // only "ring_exchange"; the dgrad / wgrad overlaps only "bulk".
  return m == *d || (*d == UbMethod::kPipeline && m == UbMethod::kRingExchange);
}

UbOverlap ub_overlap(const Optimizations& o, std::string_view te_gemm, int tp) {
  UbOverlap u;
  const std::optional<UbMethod> method = ub_default_method(te_gemm);
  if (!method) throw std::logic_error("ub_overlap: '" + std::string(te_gemm) + "' is not a userbuffers GEMM");
  const auto it = o.userbuffers.find(std::string(te_gemm));
  const UbOverlapConfig cfg = it != o.userbuffers.end() ? it->second : UbOverlapConfig{};
  u.method = cfg.method.value_or(*method);
  switch (u.method) {
    case UbMethod::kRingExchange:
      u.num_sm = cfg.num_sm.value_or(kUbRingExchangeSms);
      // aggregate pairs the all-gather's pieces (split_overlap_ag); the
      // reduce-scatter ring always runs tp pieces (split_overlap_rs).
      u.num_splits = *method == UbMethod::kRingExchange && cfg.aggregate.value_or(false) && tp >= 4 ? tp / 2 : tp;
      u.sm_margin = cfg.set_sm_margin.value_or(false);
      break;
    case UbMethod::kPipeline:
      u.num_sm = cfg.num_sm.value_or(kUbCommSms);
      u.num_splits = cfg.num_splits.value_or(kUbPipelineSplits);
      u.sm_margin = cfg.set_sm_margin.value_or(o.tp_overlap_sm_margin);
      break;
    case UbMethod::kBulk:
      u.num_sm = cfg.num_sm.value_or(kUbCommSms);
      u.num_splits = 1;
      u.sm_margin = cfg.set_sm_margin.value_or(o.tp_overlap_sm_margin);
      break;
  }
  return u;
}

}  // namespace megascale::model
