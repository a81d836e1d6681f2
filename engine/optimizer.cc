// engine/optimizer.cc: sharded AdamW / LAMB with global-norm clipping.
#include "engine/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/comm.h"
#include "engine/device_cpu.h"

namespace megascale::engine {

size_t padded_size(size_t total, int shards) {
  if (shards < 1) throw std::invalid_argument("padded_size: shards < 1");
  const size_t s = static_cast<size_t>(shards);
  return (total + s - 1) / s * s;
}

ShardRange shard_range(size_t total, int shards, int index) {
  if (index < 0 || index >= shards)
    throw std::invalid_argument("shard_range: index " + std::to_string(index) + " outside 0.." +
                                std::to_string(shards - 1));
  const size_t per = padded_size(total, shards) / static_cast<size_t>(shards);
  return ShardRange{per * static_cast<size_t>(index), per * static_cast<size_t>(index + 1)};
}

ShardedOptimizer::ShardedOptimizer(const OptimizerOptions& options,
                                   std::vector<TensorSegment> segments, ShardRange shard,
                                   OptimizerComms comms, Device* device)
    : options_(options),
      segments_(std::move(segments)),
      shard_(shard),
      comms_(std::move(comms)),
      device_(device != nullptr ? device : &cpu_device()) {
  if (shard_.end < shard_.begin) throw std::invalid_argument("ShardedOptimizer: shard end < begin");
  std::vector<int> order(segments_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return segments_[a].offset < segments_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorSegment& a = segments_[order[k - 1]];
    const TensorSegment& b = segments_[order[k]];
    if (a.offset + a.size > b.offset)
      throw std::invalid_argument("ShardedOptimizer: segments '" + a.name + "' [" +
                                  std::to_string(a.offset) + ", +" + std::to_string(a.size) +
                                  ") and '" + b.name + "' overlap");
  }
  for (size_t i = 0; i < segments_.size(); ++i) {
    const TensorSegment& s = segments_[i];
    const size_t lo = std::max(s.offset, shard_.begin);
    const size_t hi = std::min(s.offset + s.size, shard_.end);
    if (lo < hi) pieces_.push_back(Piece{static_cast<int>(i), lo - shard_.begin, hi - lo});
  }
  const size_t bytes = shard_.size() * sizeof(float);
  m_ = DeviceBuffer(*device_, bytes);  // zero-filled
  v_ = DeviceBuffer(*device_, bytes);
  if (options_.kind == model::OptimizerKind::kLamb) update_ = DeviceBuffer(*device_, bytes);
  trust_.assign(segments_.size(), 1.0);
}

template <typename Coef>
std::vector<Device::ShardPiece> ShardedOptimizer::device_pieces(Coef coef) const {
  std::vector<Device::ShardPiece> out;
  out.reserve(pieces_.size());
  for (const Piece& pc : pieces_) out.push_back(Device::ShardPiece{pc.begin, pc.size, coef(pc)});
  return out;
}

std::vector<float> ShardedOptimizer::exp_avg() const {
  std::vector<float> out(shard_.size());
  if (!out.empty()) device_->copy_to_host(out.data(), m_.get(), out.size() * sizeof(float));
  return out;
}

std::vector<float> ShardedOptimizer::exp_avg_sq() const {
  std::vector<float> out(shard_.size());
  if (!out.empty()) device_->copy_to_host(out.data(), v_.get(), out.size() * sizeof(float));
  return out;
}

void ShardedOptimizer::set_exp_avg(const std::vector<float>& values) {
  if (values.size() != shard_.size()) throw std::invalid_argument("set_exp_avg: size differs from the shard");
  if (!values.empty()) device_->copy_to_device(m_.get(), values.data(), values.size() * sizeof(float));
}

void ShardedOptimizer::set_exp_avg_sq(const std::vector<float>& values) {
  if (values.size() != shard_.size()) throw std::invalid_argument("set_exp_avg_sq: size differs from the shard");
  if (!values.empty()) device_->copy_to_device(v_.get(), values.data(), values.size() * sizeof(float));
}

std::vector<double> ShardedOptimizer::reduce_per_tensor(std::vector<double> partial) {
  // partial: k blocks of segments_.size() values (e.g. ||p||^2 then ||u||^2).
  const size_t n = partial.size();
  const size_t nseg = segments_.size();
  std::vector<float> buf(partial.begin(), partial.end());
  if (comms_.shard && comms_.shard->size() > 1) comms_.shard->all_reduce_sum(buf.data(), n);
  if (comms_.tensor && comms_.tensor->size() > 1) {
    std::vector<float> tp = buf;
    comms_.tensor->all_reduce_sum(tp.data(), n);
    for (size_t i = 0; i < n; ++i)
      if (segments_[i % nseg].tp_split) buf[i] = tp[i];
  }
  return std::vector<double>(buf.begin(), buf.end());
}

double ShardedOptimizer::reduce_global(const std::vector<double>& per_tensor_sq_local) {
  const bool tp_leader = !comms_.tensor || comms_.tensor->rank() == 0;
  double local = 0;
  for (size_t i = 0; i < segments_.size(); ++i)
    if (!segments_[i].duplicate && (segments_[i].tp_split || tp_leader))
      local += per_tensor_sq_local[i];
  float total = static_cast<float>(local);
  if (comms_.shard && comms_.shard->size() > 1) comms_.shard->all_reduce_sum(&total, 1);
  if (comms_.tensor && comms_.tensor->size() > 1) comms_.tensor->all_reduce_sum(&total, 1);
  for (Comm* c : comms_.model)
    if (c && c->size() > 1) c->all_reduce_sum(&total, 1);
  return total;
}

double ShardedOptimizer::global_grad_norm(const float* grads) {
  std::vector<double> sq(segments_.size(), 0.0);
  const std::vector<Device::ShardPiece> pieces = device_pieces([](const Piece&) { return 0.0f; });
  std::vector<double> per_piece(pieces.size(), 0.0);
  device_->sum_squares(per_piece.data(), grads, pieces.data(), static_cast<int>(pieces.size()));
  for (size_t k = 0; k < pieces_.size(); ++k) sq[pieces_[k].segment] += per_piece[k];
  return std::sqrt(reduce_global(sq));
}

StepStats ShardedOptimizer::step(float* params, const float* grads, double lr) {
  StepStats st;
  st.grad_norm = global_grad_norm(grads);
  if (!std::isfinite(st.grad_norm)) {
    st.skipped = true;
    st.clip_coef = 0;
    return st;
  }
  if (options_.max_grad_norm > 0) {
    const double c = options_.max_grad_norm / (st.grad_norm + 1e-6);
    if (c < 1.0) st.clip_coef = c;
  }
  ++step_count_;
  const double t = static_cast<double>(step_count_);
  const double bc1 = 1.0 - std::pow(options_.beta1, t);
  const double bc2 = 1.0 - std::pow(options_.beta2, t);
  // fp32 coefficients, each rounded once from double.
  Device::AdamConstants k;
  k.clip = static_cast<float>(st.clip_coef);
  k.beta1 = static_cast<float>(options_.beta1);
  k.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  k.beta2 = static_cast<float>(options_.beta2);
  k.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  k.eps = static_cast<float>(options_.eps);
  k.step_size = static_cast<float>(lr / bc1);
  k.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  k.bc1 = static_cast<float>(bc1);
  k.bc2 = static_cast<float>(bc2);
  float* m = m_.floats();
  float* v = v_.floats();

  if (options_.kind == model::OptimizerKind::kAdam) {
    const std::vector<Device::ShardPiece> pieces = device_pieces([&](const Piece& pc) {
      const double wd = segments_[pc.segment].weight_decay ? options_.weight_decay : 0.0;
      return static_cast<float>(1.0 - lr * wd);
    });
    device_->adamw_step(params, m, v, grads, pieces.data(), static_cast<int>(pieces.size()), k);
    return st;
  }

  // LAMB: update direction, then per-tensor trust ratios from reduced norms.
  const size_t nseg = segments_.size();
  const std::vector<Device::ShardPiece> dir = device_pieces([&](const Piece& pc) {
    return segments_[pc.segment].weight_decay ? static_cast<float>(options_.weight_decay) : 0.0f;
  });
  std::vector<double> per_piece(2 * dir.size(), 0.0);
  device_->lamb_direction(update_.floats(), m, v, params, grads, dir.data(),
                          static_cast<int>(dir.size()), k, per_piece.data());
  std::vector<double> sums(2 * nseg, 0.0);  // [||p||^2 ..., ||u||^2 ...]
  for (size_t i = 0; i < pieces_.size(); ++i) {
    sums[pieces_[i].segment] += per_piece[2 * i];
    sums[nseg + pieces_[i].segment] += per_piece[2 * i + 1];
  }
  const std::vector<double> red = reduce_per_tensor(std::move(sums));
  for (size_t i = 0; i < nseg; ++i) {
    const double wn = std::sqrt(red[i]);
    const double un = std::sqrt(red[nseg + i]);
    const double phi = std::min(std::max(wn, options_.lamb_min), options_.lamb_max);
    trust_[i] = (wn > 0 && un > 0) ? phi / un : 1.0;
  }
  const std::vector<Device::ShardPiece> apply = device_pieces(
      [&](const Piece& pc) { return static_cast<float>(lr * trust_[pc.segment]); });
  device_->lamb_apply(params, update_.floats(), apply.data(), static_cast<int>(apply.size()));
  return st;
}

}  // namespace megascale::engine
