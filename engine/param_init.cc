// engine/param_init.cc: the parameter layout and counter-based initialisation.
#include "engine/param_init.h"

#include "base/splitmix64.h"

#include "engine/layers.h"

#include <cmath>
#include <numbers>

namespace megascale::engine {
namespace {


// Uniform in (0, 1) from 53 random bits.
double uniform01(uint64_t stream, uint64_t counter) {
  const uint64_t bits = base::splitmix64(stream ^ base::splitmix64(counter)) >> 11;
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-53;
}

uint64_t stream_key(const TensorSpec& spec, uint64_t seed) {
  return base::splitmix64(base::splitmix64(seed) ^ base::splitmix64(static_cast<uint64_t>(static_cast<int64_t>(spec.layer) + 7)) ^
               name_hash(spec.kind));
}

TensorSpec make(const std::string& prefix, const std::string& kind, int layer, Shape shape,
                InitKind init, float std = 0.0f) {
  TensorSpec s;
  s.name = prefix + kind;
  s.kind = kind;
  s.layer = layer;
  s.full_shape = std::move(shape);
  s.init = init;
  s.init_std = std;
  return s;
}

TensorSpec split(TensorSpec s, int dim, std::vector<int64_t> parts) {
  s.shard_dim = dim;
  s.shard_parts = std::move(parts);
  return s;
}

TensorSpec sp_grad(TensorSpec s) {
  s.sequence_parallel_grad = true;
  return s;
}

constexpr float kInitStd = 0.02f;

}  // namespace

uint64_t name_hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

Shape TensorSpec::local_shape(int tp_size) const {
  Shape local = full_shape;
  if (shard_dim < 0) return local;
  ENGINE_CHECK(shard_dim < static_cast<int>(full_shape.size()), name + ": shard dim");
  int64_t total = 0;
  for (int64_t p : shard_parts) {
    ENGINE_CHECK(p % tp_size == 0, name + ": part of " + std::to_string(p) +
                                       " not divisible by tp " + std::to_string(tp_size));
    total += p;
  }
  ENGINE_CHECK(total == full_shape[shard_dim], name + ": parts do not cover the dimension");
  local[shard_dim] = total / tp_size;
  return local;
}

std::vector<TensorSpec> layer_tensor_specs(const model::ModelConfig& config, int layer) {
  const model::ModelConfig m = with_defaults(config);
  const int64_t C = m.hidden, HD = m.head_dim(), NH = m.heads, NKV = m.kv_heads;
  const int64_t F = m.ffn_hidden;
  const bool gelu = m.mlp == model::MlpKind::kGelu;
  const float residual_std = kInitStd / std::sqrt(2.0f * static_cast<float>(m.layers));
  const std::string p = "layers." + std::to_string(layer) + ".";
  const std::vector<int64_t> qkv_parts = {NH * HD, NKV * HD, NKV * HD};
  const std::vector<int64_t> fc1_parts = gelu ? std::vector<int64_t>{F} : std::vector<int64_t>{F, F};
  const int64_t fc1_rows = gelu ? F : 2 * F;

  std::vector<TensorSpec> specs;
  const bool parallel = m.block == model::BlockKind::kParallel;
  const std::string ln1 = parallel ? "ln" : "ln1";
  specs.push_back(sp_grad(make(p, ln1 + "_w", layer, {C}, InitKind::kOnes)));
  specs.push_back(sp_grad(make(p, ln1 + "_b", layer, {C}, InitKind::kZeros)));
  specs.push_back(split(make(p, "qkv_w", layer, {(NH + 2 * NKV) * HD, C}, InitKind::kNormal,
                             kInitStd), 0, qkv_parts));
  specs.push_back(split(make(p, "qkv_b", layer, {(NH + 2 * NKV) * HD}, InitKind::kZeros), 0,
                        qkv_parts));
  specs.push_back(split(make(p, "proj_w", layer, {C, NH * HD}, InitKind::kNormal, residual_std),
                        1, {NH * HD}));
  specs.push_back(sp_grad(make(p, "proj_b", layer, {C}, InitKind::kZeros)));
  if (!parallel) {
    specs.push_back(sp_grad(make(p, "ln2_w", layer, {C}, InitKind::kOnes)));
    specs.push_back(sp_grad(make(p, "ln2_b", layer, {C}, InitKind::kZeros)));
  }
  specs.push_back(split(make(p, "fc1_w", layer, {fc1_rows, C}, InitKind::kNormal, kInitStd), 0,
                        fc1_parts));
  if (gelu) specs.push_back(split(make(p, "fc1_b", layer, {F}, InitKind::kZeros), 0, {F}));
  specs.push_back(split(make(p, "fc2_w", layer, {C, F}, InitKind::kNormal, residual_std), 1, {F}));
  if (gelu) specs.push_back(sp_grad(make(p, "fc2_b", layer, {C}, InitKind::kZeros)));
  return specs;
}

std::vector<TensorSpec> embedding_tensor_specs(const model::ModelConfig& m) {
  const int64_t C = m.hidden, V = m.vocab, T = m.seq_len;
  return {split(make("embedding.", "wte", -1, {V, C}, InitKind::kNormal, kInitStd), 0, {V}),
          sp_grad(make("embedding.", "wpe", -1, {T, C}, InitKind::kNormal, kInitStd))};
}

std::vector<TensorSpec> head_tensor_specs(const model::ModelConfig& m) {
  const int64_t C = m.hidden, V = m.vocab;
  const int L = m.layers;
  return {sp_grad(make("head.", "ln_f_w", L, {C}, InitKind::kOnes)),
          sp_grad(make("head.", "ln_f_b", L, {C}, InitKind::kZeros)),
          split(make("head.", "out_w", L, {V, C}, InitKind::kNormal, kInitStd), 0, {V})};
}

std::vector<TensorSpec> model_tensor_specs(const model::ModelConfig& m) {
  std::vector<TensorSpec> all = embedding_tensor_specs(m);
  for (int l = 0; l < m.layers; ++l) {
    for (TensorSpec& s : layer_tensor_specs(m, l)) all.push_back(std::move(s));
  }
  for (TensorSpec& s : head_tensor_specs(m)) all.push_back(std::move(s));
  return all;
}

float init_value(const TensorSpec& spec, uint64_t seed, int64_t full_index) {
  switch (spec.init) {
    case InitKind::kOnes: return 1.0f;
    case InitKind::kZeros: return 0.0f;
    case InitKind::kNormal: break;
  }
  // Box-Muller on two uniforms of this element's own counters.
  const uint64_t key = stream_key(spec, seed);
  const uint64_t c = static_cast<uint64_t>(full_index) * 2;
  const double u1 = uniform01(key, c);
  const double u2 = uniform01(key, c + 1);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return static_cast<float>(z * spec.init_std);
}

int64_t full_index(const TensorSpec& spec, int tp_rank, int tp_size, int64_t local_index) {
  if (spec.shard_dim < 0 || tp_size == 1) return local_index;
  const Shape local = spec.local_shape(tp_size);
  const int64_t cols_full = spec.full_shape.size() == 2 ? spec.full_shape[1] : 1;
  const int64_t cols_local = local.size() == 2 ? local[1] : 1;
  int64_t row = local_index / cols_local;
  int64_t col = local_index % cols_local;
  // Map the split coordinate through the parts.
  int64_t& x = spec.shard_dim == 0 ? row : col;
  int64_t part_full_start = 0;
  for (int64_t part : spec.shard_parts) {
    const int64_t per_rank = part / tp_size;
    if (x < per_rank) {
      x = part_full_start + static_cast<int64_t>(tp_rank) * per_rank + x;
      break;
    }
    x -= per_rank;
    part_full_start += part;
  }
  return row * cols_full + col;
}

std::vector<float> init_shard(const TensorSpec& spec, uint64_t seed, int tp_rank, int tp_size) {
  const int64_t n = shape_numel(spec.local_shape(tp_size));
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = init_value(spec, seed, full_index(spec, tp_rank, tp_size, i));
  }
  return out;
}

std::vector<float> assemble_full(const TensorSpec& spec,
                                 const std::vector<std::vector<float>>& shards) {
  ENGINE_CHECK(!shards.empty(), spec.name + ": no shards");
  if (!spec.tp_sharded()) return shards[0];
  const int tp = static_cast<int>(shards.size());
  std::vector<float> full(static_cast<size_t>(shape_numel(spec.full_shape)));
  const int64_t n_local = shape_numel(spec.local_shape(tp));
  for (int r = 0; r < tp; ++r) {
    ENGINE_CHECK(static_cast<int64_t>(shards[r].size()) == n_local, spec.name + ": shard size");
    for (int64_t i = 0; i < n_local; ++i) {
      full[static_cast<size_t>(full_index(spec, r, tp, i))] = shards[r][static_cast<size_t>(i)];
    }
  }
  return full;
}

}  // namespace megascale::engine
