// engine/optimizer.h: AdamW and LAMB over a shard of the flat fp32 parameter
// buffer (ZeRO / Megatron-LM's distributed optimizer), with gradient clipping
// by global norm.
//
// Layout. All parameters of a rank live in one flat fp32 buffer; the model
// describes it as named tensor segments (offset, size, in elements). For data
// parallelism the buffer is padded to a multiple of DP (padded_size) and DP rank
// d owns the contiguous shard [d*S, (d+1)*S), S = padded/DP (shard_range):
// gradients are reduce-scattered into it, the optimizer updates it, parameters
// are all-gathered from it (REFERENCE.md, "Distributed optimizer"). A tensor may
// straddle shard boundaries; elements of the shard covered by no segment
// (padding) are left untouched.
//
// Norms. Every norm is a sum of squares over partial sums: the local shard's
// part of each tensor (accumulated in double, sent as float) is all-reduced over
// the shard (DP) group, so a tensor split across shards gets its exact norm.
// Tensors partitioned by tensor parallelism (TensorSegment::tp_split) also sum
// over the tensor (TP) group; replicated tensors (LayerNorm, biases of
// row-parallel layers) are counted once, by TP rank 0, in the global norm. The
// global gradient norm for clipping further sums over every Comm in
// OptimizerComms::model (e.g. the PP group: other stages hold other layers).
// All reductions are Comm::all_reduce_sum (rank-ordered), so every rank of a
// group computes bit-identical coefficients.
//
// Algorithms, per element, t = step count after increment, g = clip * grad:
//   m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
//   AdamW (Loshchilov & Hutter 2019; PyTorch torch.optim.AdamW's order of
//   operations): p *= 1 - lr*wd;  p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//   LAMB (You et al. 2019, Algorithm 2): u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*p
//   per tensor: trust = phi(||p||) / ||u|| with phi(z) = min(max(z, lamb_min), lamb_max),
//   trust = 1 when ||p|| or ||u|| is 0;  p -= lr * trust * u
// Clipping (Megatron-LM / torch.nn.utils.clip_grad_norm_): norm = sqrt(sum g^2)
// over the whole model; clip = max_norm / (norm + 1e-6) when that is < 1, else
// 1. A non-finite norm skips the step (no state changes) and says so.
// Weight decay applies to segments with weight_decay = true only.
//
// Device. The per-element work runs as the Device's multi-tensor kernels
// (engine/device.h: adamw_step, lamb_direction, lamb_apply, sum_squares), one
// call per shard; params, grads and the moments are device memory (CpuDevice:
// host memory, and the same arithmetic in the same order as before the
// kernels moved there). The norms' partial sums come back to the host for the
// reductions over the Comms.
//
// Thread-safety: one ShardedOptimizer per rank, used by that rank's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/device.h"
#include "model/config.h"

namespace megascale::engine {

class Comm;

struct TensorSegment {
  std::string name;
  size_t offset = 0;          // first element in the flat buffer
  size_t size = 0;            // elements
  bool weight_decay = true;   // false: biases, LayerNorm gains (Megatron's default)
  bool tp_split = false;      // partitioned over the TP group (vs replicated on every TP rank)
  // A copy of a tensor another rank of OptimizerComms::model also holds (the
  // tied output embedding on the last pipeline stage, Megatron-LM's
  // `shared` parameters): left out of the global grad norm so it counts once.
  bool duplicate = false;
};

// Segments from a list of tensors shaped like engine/model_chunk.h's
// ParamTensor (t.spec.name, t.offset, t.numel, t.spec.weight_decay(),
// t.spec.tp_sharded()); a template so the optimizer does not depend on the model.
template <typename Tensors>
std::vector<TensorSegment> segments_from(const Tensors& tensors) {
  std::vector<TensorSegment> out;
  for (const auto& t : tensors)
    out.push_back(TensorSegment{t.spec.name, t.offset, t.numel, t.spec.weight_decay(),
                                t.spec.tp_sharded(), false});
  return out;
}

// [begin, end) of the flat buffer.
struct ShardRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// Smallest multiple of `shards` >= total. REQUIRES: shards >= 1.
size_t padded_size(size_t total, int shards);
// Shard `index` of a buffer of `total` elements padded for `shards` ranks.
// REQUIRES: 0 <= index < shards.
ShardRange shard_range(size_t total, int shards, int index);

struct OptimizerOptions {
  model::OptimizerKind kind = model::OptimizerKind::kAdam;  // kAdam = AdamW
  // Hyperparameters are doubles (as Python scalars in PyTorch): derived
  // coefficients such as 1 - beta2 are formed in double, then rounded to fp32
  // once, so 1 - 0.999 is 0.001f and not 1.0f - 0.999f = 0.00100005f.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 0.0;  // <= 0: no clipping (the norm is still reported)
  double lamb_min = 0.0;       // phi's clamp of ||p|| (LAMB paper, section 3)
  double lamb_max = 10.0;
};

// Groups the norms are reduced over; nullptr / empty for a single process.
struct OptimizerComms {
  Comm* shard = nullptr;       // the DP group the buffer is sharded over
  Comm* tensor = nullptr;      // the TP group (tp_split tensors sum norms over it)
  std::vector<Comm*> model;    // further groups for the global grad norm (PP, ...)
};

struct StepStats {
  double grad_norm = 0;   // global L2 norm of the gradient before clipping
  double clip_coef = 1;   // factor applied to the gradient
  bool skipped = false;   // non-finite norm: no update
};

class ShardedOptimizer {
 public:
  // `segments` describe the whole flat buffer (every rank of the shard group
  // passes the same list); `shard` is this rank's part. Throws
  // std::invalid_argument for overlapping segments or an empty shard range
  // beyond the buffer. `device` holds the moments and runs the kernels
  // (nullptr: the process-wide CpuDevice).
  ShardedOptimizer(const OptimizerOptions& options, std::vector<TensorSegment> segments,
                   ShardRange shard, OptimizerComms comms = {}, Device* device = nullptr);

  // One step over the shard: params[j], grads[j] (device memory) are flat
  // elements shard.begin + j.
  // Collective over every Comm in `comms` (all ranks must call it together).
  // Only `params` and the optimizer state change.
  StepStats step(float* params, const float* grads, double lr);

  // Global gradient norm alone (collective, like step); grads is device memory.
  double global_grad_norm(const float* grads);

  const OptimizerOptions& options() const { return options_; }
  const std::vector<TensorSegment>& segments() const { return segments_; }
  ShardRange shard() const { return shard_; }

  // State, for checkpoints: shard-sized moments (host copies) and the step count.
  int64_t step_count() const { return step_count_; }
  void set_step_count(int64_t t) { step_count_ = t; }
  std::vector<float> exp_avg() const;
  std::vector<float> exp_avg_sq() const;
  // REQUIRES: values.size() == shard().size().
  void set_exp_avg(const std::vector<float>& values);
  void set_exp_avg_sq(const std::vector<float>& values);

  // The trust ratios of the last LAMB step, one per segment (1 for AdamW).
  const std::vector<double>& last_trust_ratios() const { return trust_; }

 private:
  struct Piece {        // the part of a segment inside the shard
    int segment;
    size_t begin;       // index into the shard
    size_t size;
  };
  // The pieces as the Device's kernels take them, with coefficient `coef(piece)`.
  template <typename Coef>
  std::vector<Device::ShardPiece> device_pieces(Coef coef) const;
  // Per-segment sums over the shard and, for tp_split tensors, the TP group.
  std::vector<double> reduce_per_tensor(std::vector<double> partial);
  double reduce_global(const std::vector<double>& per_tensor_sq_local);

  OptimizerOptions options_;
  std::vector<TensorSegment> segments_;
  ShardRange shard_;
  OptimizerComms comms_;
  std::vector<Piece> pieces_;
  Device* device_;
  DeviceBuffer m_, v_, update_;  // (shard.size()) each; update_ for LAMB only
  std::vector<double> trust_;
  int64_t step_count_ = 0;
};

}  // namespace megascale::engine
