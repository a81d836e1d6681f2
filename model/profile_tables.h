// model/profile_tables.h: the measured tables of a hardware profile and how a
// kernel's time is read off them.
//
// defines: GemmPoint, GemmTable, AttentionPoint, AttentionTable, KernelPoint,
// KernelTable, CollectivePoint, ProtocolCurve, CollectiveTable, InsituPoint,
// InsituTable, ProfileTables
//
// A profile (model/profile.h) may carry measurements instead of single
// efficiencies: GEMM time by (m, n, k, layout), attention by (sequence, head
// dim, window), element-wise / normalisation / optimizer kernels by element
// count, and collectives by (op, scope, ranks, bytes) as measured points plus
// per-protocol latency / bandwidth curves. Where they come from: `megascale
// calibrate micro` (the engine's own Device and Comm), `calibrate import`
// (nccl-tests output, GEMM sweep CSVs). Each table keeps the "ranks" it was
// measured with: how many processes of one machine ran the same kernel at once
// (two ranks on two cores share caches and memory bandwidth).
//
// Interpolation (why these forms):
//   GEMM: time = 2mnk / rate; log(rate) is interpolated trilinearly in
//     (log2 m, log2 n, log2 k) over the product grid of the measured axis
//     values, so the time is exact at every measured shape. Grid cells that were
//     not measured (a sweep capped by FLOPs, or a scattered CSV) take the rate of
//     the nearest measured shape in log2 space. Outside the grid the rate is
//     clamped to its edge (large GEMMs saturate; tiny ones are launch-bound).
//     Measured on this project's machine, trilinear interpolation over an
//     octave grid predicts held-out Eigen shapes within 3.8% on average (max
//     26% for a 48-wide dimension); the default sweep uses half octaves.
//   Attention: time per (sequence x query head), bilinear in (log2 seq, log2
//     head dim) of log(time); a sliding window interpolates linearly in the
//     fraction of keys a query sees between the full causal mask (window 0)
//     and the narrowest measured window at that (seq, head dim), because the
//     masked softmax is the only part whose work depends on the window.
//   Kernels and collectives: log-log linear interpolation in elements / bytes
//     between measured points; beyond the last point the time scales linearly
//     with size at the last point's rate (bandwidth-bound), below the first
//     point it stays at the first point's time (launch / latency-bound).
//
// Thread-safety: immutable after construction; lookups are const and pure.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace megascale::model {

// ---- GEMM -------------------------------------------------------------------

// Layout of C (m x n) = op(A) op(B) with row-major storage, as the engine calls
// it: "nt" = A (m x k) times B stored (n x k) (a linear layer's forward),
// "nn" = A (m x k) B (k x n) (input gradient), "tn" = A stored (k x m) (weight
// gradient), "any" = measured without a layout (an imported sweep).
// `warm`: measured with every operand in cache, repeated; otherwise (the
// default, and what an import holds) the operands a training step finds in
// memory were cold: B (weights or a stashed activation) and C (the output or
// the weight gradient) rotate through a buffer larger than the last-level
// cache (engine/microbench.h).
struct GemmPoint {
  int ranks = 1;
  std::string layout = "any";
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;
  double spread = 0;  // (max - min) / median over the repeats, 0 if unknown
  bool warm = false;
};

// A value over (log2 m, log2 n, log2 k): trilinear on the product grid of the
// axis values seen, cells not given taking the nearest given one.
class LogGrid3 {
 public:
  LogGrid3() = default;
  // (m, n, k, value) samples; repeated shapes are averaged.
  explicit LogGrid3(const std::vector<std::pair<std::array<int64_t, 3>, double>>& samples);
  double at(int64_t m, int64_t n, int64_t k) const;

 private:
  std::vector<double> lm_, ln_, lk_;  // sorted distinct log2 axis values
  std::vector<double> value_;         // [i][j][l] flattened, every cell filled
};

class GemmTable {
 public:
  GemmTable() = default;
  explicit GemmTable(std::vector<GemmPoint> points);

  bool empty() const { return points_.empty(); }
  const std::vector<GemmPoint>& points() const { return points_; }
  // Seconds of one GEMM whose B and C operands are a fraction `cold` out of
  // cache (1: all, model/engine_ops.h cold_fraction). The cold time comes
  // from the cold grid; where warm points were measured too, the warm time is
  // the cold time over the interpolated cold / warm ratio, and the result
  // blends the two. The layout and rank count fall back to what was measured
  // ("any" layout, the nearest rank count at or below `ranks`).
  // REQUIRES: !empty(), m, n, k > 0.
  double time_s(int64_t m, int64_t n, int64_t k, const std::string& layout, int ranks, double cold = 1.0) const;

 private:
  struct Grids {
    LogGrid3 log_rate;                 // log(2mnk / seconds), cold (or unlabelled) points
    std::optional<LogGrid3> log_ratio; // log(cold seconds / warm seconds) where both were measured
  };
  const Grids& grids(const std::string& layout, int ranks) const;
  std::vector<GemmPoint> points_;
  std::map<std::pair<std::string, int>, Grids> grids_;
};

// ---- attention ----------------------------------------------------------------

struct AttentionPoint {
  int ranks = 1;
  int seq = 0;
  int head_dim = 0;
  int window = 0;         // 0 = full causal mask
  bool backward = false;
  double seconds = 0;     // per (sequence x query head)
  double spread = 0;
  bool warm = false;      // as GemmPoint: stash and outputs cold unless warm
};

class AttentionTable {
 public:
  AttentionTable() = default;
  explicit AttentionTable(std::vector<AttentionPoint> points);

  bool empty() const { return points_.empty(); }
  const std::vector<AttentionPoint>& points() const { return points_; }
  // Seconds for one (sequence x query head) of causal attention over `seq`
  // positions with head dim `head_dim` and sliding window `window` (0: none),
  // blending cold and warm measurements by `cold` as GemmTable does.
  double time_s(int seq, int head_dim, int window, bool backward, int ranks, double cold = 1.0) const;

 private:
  double one_time_s(int seq, int head_dim, int window, bool backward, int ranks, bool warm) const;
  double full_time_s(int seq, int head_dim, bool backward, int ranks, int window_or_0, bool warm) const;
  std::vector<AttentionPoint> points_;
};

// ---- element-wise, normalisation, optimizer kernels ----------------------------

struct KernelPoint {
  int ranks = 1;
  std::string kernel;     // "layer_norm", "gelu", "adamw", ... (model/profile.h lists them)
  bool backward = false;
  double elements = 0;
  double seconds = 0;
  double spread = 0;
};

class KernelTable {
 public:
  KernelTable() = default;
  explicit KernelTable(std::vector<KernelPoint> points);

  bool empty() const { return points_.empty(); }
  const std::vector<KernelPoint>& points() const { return points_; }
  bool has(const std::string& kernel) const;
  // Seconds of `kernel` over `elements`; nullopt when the kernel was not measured.
  std::optional<double> time_s(const std::string& kernel, bool backward, double elements,
                               int ranks) const;

 private:
  std::vector<KernelPoint> points_;
};

// ---- collectives ----------------------------------------------------------------

// One measured collective: `bytes` is nccl-tests' "size" (the whole tensor of an
// all-gather / reduce-scatter / all-reduce; the message of a send/recv).
struct CollectivePoint {
  std::string op;          // "all_reduce" | "all_gather" | "reduce_scatter" | "sendrecv"
  std::string scope;       // "intra" (one machine / NVLink) | "inter" (across machines)
  int ranks = 2;
  double bytes = 0;
  double seconds = 0;
  double spread = 0;
  // Measured on buffers out of cache (engine/microbench.h: a step's gradient
  // and parameter buffers are); false: reused, warm (or not known: imports).
  bool cold = false;
};

// NCCL's cost form per protocol (src/graph/tuning.cc): time = latency +
// bytes x busbw_factor(op, ranks) / busbw; NCCL runs the fastest protocol.
// A curve may own a size range (min_bytes..max_bytes, 0 = unbounded): an
// imported fit splits a measured curve where NCCL's pick changes
// (calibrate/protocol_fit.h). With ranges, the curve owning a size answers
// (log-log between ranges); without, the fastest curve does, as NCCL picks.
struct ProtocolCurve {
  std::string op, scope;
  int ranks = 0;           // the communicator size it was fitted on
  std::string protocol;    // "LL" | "LL128" | "Simple" | "MPI" (one curve, the CPU engine)
  double latency_us = 0;
  double busbw_gbs = 0;    // GB/s = 1e9 B/s
  double min_bytes = 0, max_bytes = 0;
};

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): all_reduce 2(n-1)/n,
// all_gather and reduce_scatter (n-1)/n, sendrecv 1.
double busbw_factor(const std::string& op, int ranks);

class CollectiveTable {
 public:
  CollectiveTable() = default;
  CollectiveTable(std::vector<CollectivePoint> points, std::vector<ProtocolCurve> curves);

  bool empty() const { return points_.empty() && curves_.empty(); }
  const std::vector<CollectivePoint>& points() const { return points_; }
  const std::vector<ProtocolCurve>& curves() const { return curves_; }
  // Seconds of `op` on `ranks` ranks over `bytes`, or nullopt when nothing
  // was measured for (op, scope). Measured points of the same rank count are
  // interpolated (log-log); otherwise the protocol curves fitted on the closest
  // rank count are used with the op's busbw factor at `ranks` (NCCL's ring: the
  // bandwidth term scales with the factor, the latency with the ring's steps).
  // `cold`: read the cold points where there are any (else the others).
  std::optional<double> time_s(const std::string& op, const std::string& scope, int ranks,
                               double bytes, bool cold = false) const;

 private:
  std::vector<CollectivePoint> points_;
  std::vector<ProtocolCurve> curves_;
};

// ---- in situ ----------------------------------------------------------------------

// The kernel tables time each kernel alone, repeated on warm caches. Inside a
// training step the same kernels run slower: their weights and stashed
// activations come from memory, kernels interleave, the host adds a gap
// between ops. `megascale calibrate micro` runs whole engine models
// (ModelChunk forward and backward, several sizes) and fits, per number of
// busy ranks, one scale per call class ("gemm", "attention", "kernel") and a
// host gap per op ("gap_us", microseconds), by non-negative least squares on
// the op times it measured there (model/least_squares.h), with the
// leave-one-out error over those models in the table's provenance.
struct InsituPoint {
  int ranks = 1;
  std::string cls;   // "gemm" | "attention" | "kernel" | "gap_us"
  double value = 0;
};

class InsituTable {
 public:
  InsituTable() = default;
  explicit InsituTable(std::vector<InsituPoint> points);
  bool empty() const { return points_.empty(); }
  const std::vector<InsituPoint>& points() const { return points_; }
  // The value fitted for the rank count at or below `ranks` (else the
  // smallest), or nullopt when the class was not fitted.
  std::optional<double> value(const std::string& cls, int ranks) const;

 private:
  std::vector<InsituPoint> points_;
};

// Everything measured that a profile carries (any table may be empty).
struct ProfileTables {
  GemmTable gemm;
  AttentionTable attention;
  KernelTable kernels;
  CollectiveTable collectives;
  InsituTable insitu;
};

// Log-log interpolation over (size, seconds) points sorted by size, with the
// extrapolation rules of the header comment. REQUIRES: !points.empty().
double interpolate_size_time_s(const std::vector<std::pair<double, double>>& points, double size);

}  // namespace megascale::model
