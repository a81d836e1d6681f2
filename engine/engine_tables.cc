// engine/engine_tables.cc: see engine_tables.h.
#include "engine/engine_tables.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/op_timer.h"
#include "model/engine_ops.h"
#include "model/profile.h"

namespace megascale::engine {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of `repeats` calls of fn after two warm-ups, each call
// between two queue markers (CUDA events) or, without a timer, host stamps.
double time_calls(Device& dev, int repeats, const std::function<void()>& fn) {
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> s;
  if (std::unique_ptr<OpTimer> timer = dev.make_op_timer()) {
    (void)timer->resolve();  // forget markers of earlier work
    for (int i = 0; i < repeats; ++i) {
      timer->stamp();
      fn();
      timer->stamp();
    }
    const std::vector<double> us = timer->resolve();
    for (int i = 0; i + 1 < static_cast<int>(us.size()); i += 2) s.push_back(1e-6 * (us[i + 1] - us[i]));
  } else {
    dev.synchronize();
    for (int i = 0; i < repeats; ++i) {
      const double t0 = now_s();
      fn();
      dev.synchronize();
      s.push_back(now_s() - t0);
    }
  }
  if (s.empty()) throw std::logic_error("engine tables: no timed call");
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

// Device buffers by slot, grown on demand, filled with a fixed pseudo-random
// pattern in [-0.25, 0.25) (no denormals, no overflow in exp).
class Operands {
 public:
  explicit Operands(Device& d) : dev_(d) {
    pattern_.resize(size_t{1} << 20);
    uint32_t x = 2654435761u;
    for (float& v : pattern_) {
      x = x * 1664525u + 1013904223u;
      v = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.5f;
    }
  }
  float* get(int slot, size_t floats) {
    if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(slot + 1);
    DeviceBuffer& b = slots_[slot];
    floats = std::max<size_t>(floats, 1);
    if (b.bytes() < floats * sizeof(float)) {
      b = DeviceBuffer();  // free first: the largest operands are gigabytes
      b = DeviceBuffer(dev_, floats * sizeof(float));
      for (size_t at = 0; at < floats; at += pattern_.size()) {
        const size_t n = std::min(pattern_.size(), floats - at);
        dev_.copy_to_device(b.floats() + at, pattern_.data(), n * sizeof(float));
      }
    }
    return b.floats();
  }
  // `n` token ids below `v`, on the device.
  int32_t* ids(int slot, size_t n, int v) {
    float* p = get(slot, n);
    std::vector<int32_t> host(n);
    uint32_t x = 12345;
    for (int32_t& id : host) {
      x = x * 1664525u + 1013904223u;
      id = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(std::max(1, v)));
    }
    dev_.copy_to_device(p, host.data(), n * sizeof(int32_t));
    return reinterpret_cast<int32_t*>(p);
  }

 private:
  Device& dev_;
  std::vector<float> pattern_;
  std::vector<DeviceBuffer> slots_;
};

struct KernelNeed {
  std::string kernel;
  bool backward = false;
  double elements = 0;
  int row = 1;  // row length the layers call it with
  bool operator<(const KernelNeed& o) const {
    return std::tie(kernel, backward, elements, row) < std::tie(o.kernel, o.backward, o.elements, o.row);
  }
};

struct AttentionNeed {
  int seq = 0, batch = 0, heads = 0, kv_heads = 0, head_dim = 0, window = 0;
  bool operator<(const AttentionNeed& o) const {
    return std::tie(seq, batch, heads, kv_heads, head_dim, window) <
           std::tie(o.seq, o.batch, o.heads, o.kv_heads, o.head_dim, o.window);
  }
};

// One call of kernel `n.kernel` as the engine's layers make it.
std::function<void()> kernel_call(Device& d, Operands& o, const KernelNeed& n) {
  const size_t e = static_cast<size_t>(n.elements);
  const int row = std::max(1, std::min<int>(n.row, static_cast<int>(std::min<size_t>(e, 1u << 30))));
  const int rows = static_cast<int>(std::max<size_t>(1, e / row));
  const size_t used = static_cast<size_t>(rows) * row;
  float* a = o.get(0, e);
  float* b = o.get(1, e);
  float* c = o.get(2, e);
  float* w = o.get(3, row);
  float* bias = o.get(4, row);
  float* stats = o.get(5, 4 * static_cast<size_t>(rows) + 4);
  const std::string& k = n.kernel;
  if (k == "layer_norm") {
    if (!n.backward) return [=, &d] { d.layer_norm_forward(c, stats, stats + rows, a, w, bias, rows, row); };
    return [=, &d] { d.layer_norm_backward(c, w, bias, b, a, w, stats, stats + rows, rows, row); };
  }
  if (k == "add") return [=, &d] { d.add(c, a, b, e); };
  if (k == "bias_add") return [=, &d] { d.bias_add(c, bias, rows, row); };
  if (k == "bias_grad") return [=, &d] { d.bias_backward(bias, a, rows, row); };
  if (k == "gelu") {
    if (!n.backward) return [=, &d] { d.gelu_forward(c, a, e); };
    return [=, &d] { d.gelu_backward(c, a, b, e); };
  }
  if (k == "swiglu") {
    float* in = o.get(6, 2 * used);
    float* din = o.get(18, 2 * used);
    if (!n.backward) return [=, &d] { d.swiglu_forward(c, in, rows, row); };
    return [=, &d] { d.swiglu_backward(din, in, b, rows, row); };
  }
  if (k == "cross_entropy") {
    int32_t* targets = o.ids(7, rows, row);
    float* mx = stats;
    float* sum = stats + rows;
    float* tgt = stats + 2 * static_cast<size_t>(rows);
    float* loss = o.get(8, rows);
    float* dl = o.get(9, rows);
    if (!n.backward) {
      return [=, &d] {
        d.cross_entropy_row_max(mx, a, rows, row);
        d.cross_entropy_partials(sum, tgt, a, mx, targets, 0, rows, row);
        d.cross_entropy_loss(loss, sum, tgt, rows);
      };
    }
    d.cross_entropy_row_max(mx, a, rows, row);
    d.cross_entropy_partials(sum, tgt, a, mx, targets, 0, rows, row);
    return [=, &d] { d.cross_entropy_backward(c, a, mx, sum, targets, dl, 0, rows, row); };
  }
  if (k == "embedding") {
    constexpr int kVocab = 1024;  // rows of the table read (the lookup's cost is the rows written)
    int32_t* tokens = o.ids(10, rows, kVocab);
    float* table = o.get(11, static_cast<size_t>(kVocab) * row);
    if (!n.backward) return [=, &d] { d.embedding_forward(c, tokens, table, 0, rows, kVocab, row); };
    return [=, &d] { d.embedding_backward(table, a, tokens, 0, rows, kVocab, row); };
  }
  if (k == "position_embedding") {
    float* table = o.get(12, used);
    if (!n.backward) return [=, &d] { d.position_embedding_forward(c, table, 0, rows, 1, row); };
    return [=, &d] { d.position_embedding_backward(table, a, 0, rows, 1, row); };
  }
  if (k == "copy") return [=, &d] { d.copy(c, a, e * sizeof(float)); };
  if (k == "fill_zero") return [=, &d] { d.fill_zero(c, e * sizeof(float)); };
  if (k == "clip_grad") {
    // PipelineExecutor::clip_and_step: the squared norm of the shard, then one
    // scaling pass (alternately by c and 1 / c, which keeps values in range).
    auto flip = std::make_shared<bool>(false);
    return [=, &d] {
      const Device::ShardPiece piece{0, e, 1.0f};
      double sums = 0;
      d.sum_squares(&sums, a, &piece, 1);
      d.scale(a, *flip ? 1.25f : 0.8f, e);
      *flip = !*flip;
    };
  }
  if (k == "adamw" || k == "lamb") {
    // ShardedOptimizer::step over the shard: parameters, moments and gradient.
    float* p = o.get(13, e);
    float* m = o.get(14, e);
    float* v = o.get(15, e);
    float* g = o.get(16, e);
    Device::AdamConstants ks;
    ks.step_size = 1e-6f;
    if (k == "adamw") {
      return [=, &d] {
        const Device::ShardPiece piece{0, e, 0.01f};
        d.adamw_step(p, m, v, g, &piece, 1, ks);
      };
    }
    float* u = o.get(17, e);
    return [=, &d] {
      const Device::ShardPiece piece{0, e, 0.01f};
      double sums[2] = {0, 0};
      d.lamb_direction(u, m, v, p, g, &piece, 1, ks, sums);
      d.lamb_apply(p, u, &piece, 1);
    };
  }
  throw std::logic_error("engine tables: no call for kernel '" + k + "'");
}

}  // namespace

EngineTables measure_engine_tables(Device& device, const std::vector<model::Scenario>& scenarios, int repeats) {
  const double t_start = now_s();
  model::GpuProfile shape_only;  // the engine's calls need only the kind
  shape_only.kind = "cpu";
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> gemms;
  std::set<AttentionNeed> attention;
  std::set<KernelNeed> kernels;
  for (const model::Scenario& s : scenarios) {
    const int tp = s.parallel.tp;
    const int C = s.model.hidden, V = s.model.vocab / tp;
    auto visit = [&](const std::vector<model::OperatorCost>& ops, bool head) {
      for (const model::OperatorCost& op : ops) {
        for (const auto* calls : {&op.fwd_calls, &op.bwd_calls}) {
          for (const model::KernelCall& c : *calls) {
            if (c.kind == model::CallKind::kGemm) {
              gemms.insert({c.name, c.m, c.n, c.k});
            } else if (c.kind == model::CallKind::kAttention) {
              attention.insert({c.seq, s.parallel.micro_batch, s.model.heads / tp, s.model.kv_heads / tp, c.head_dim,
                                c.window});
            } else {
              const int row = head && c.name == "cross_entropy" ? V : C;
              kernels.insert({c.name, c.backward, c.count, row});
            }
          }
        }
      }
    };
    visit(model::job_layer_operators(s, shape_only), false);
    visit(model::job_embedding_operators(s, shape_only), false);
    visit(model::job_output_operators(s, shape_only), true);
    for (int r = 0; r < s.parallel.pp; ++r) {
      for (const model::KernelCall& c : model::engine_rank_step_calls(s, r)) {
        kernels.insert({c.name, c.backward, c.count, C});
      }
    }
  }
  // Every kernel the profile format asks for, at least once.
  for (const std::string& k : model::kCpuKernels) {
    for (bool bwd : {false, true}) {
      if (bwd && !model::kernel_has_backward(k)) continue;
      bool found = false;
      for (const KernelNeed& n : kernels) found = found || (n.kernel == k && n.backward == bwd);
      if (!found) kernels.insert({k, bwd, static_cast<double>(1 << 22), 1024});
    }
  }

  EngineTables t;
  t.fused_bias = device.fuses_bias();
  Operands o(device);
  for (const auto& [layout, m, n, k] : gemms) {
    // engine/transformer_layer.cc: forward out = in w^T ("nt"), weight
    // gradient dw += dout^T in ("tn", beta 1), input gradient din = dout w ("nn").
    const bool ta = layout == "tn", tb = layout == "nt";
    const float beta = layout == "tn" ? 1.0f : 0.0f;
    float* A = o.get(0, static_cast<size_t>(m) * k);
    float* B = o.get(1, static_cast<size_t>(k) * n);
    float* Cm = o.get(2, static_cast<size_t>(m) * n);
    const double s = time_calls(device, repeats, [&] {
      device.matmul(Cm, A, B, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), ta, tb, beta);
    });
    model::GemmPoint p;
    p.ranks = 1;
    p.layout = layout;
    p.m = m;
    p.n = n;
    p.k = k;
    p.seconds = s;
    t.gemm.push_back(p);
  }
  for (const AttentionNeed& a : attention) {
    const size_t tokens = static_cast<size_t>(a.seq) * a.batch;
    float* qkv = o.get(0, tokens * (a.heads + 2 * a.kv_heads) * a.head_dim);
    float* out = o.get(1, tokens * a.heads * a.head_dim);
    float* dqkv = o.get(2, tokens * (a.heads + 2 * a.kv_heads) * a.head_dim);
    float* probs = o.get(3, static_cast<size_t>(a.batch) * a.heads * a.seq * a.seq);
    const double per = static_cast<double>(a.batch) * a.heads;  // sequences x query heads per call
    for (bool bwd : {false, true}) {
      const double s = bwd ? time_calls(device, repeats,
                                        [&] {
                                          device.attention_backward(dqkv, out, qkv, probs, a.seq, a.batch, a.heads,
                                                                    a.kv_heads, a.head_dim);
                                        })
                           : time_calls(device, repeats, [&] {
                               device.attention_forward(out, probs, qkv, a.seq, a.batch, a.heads, a.kv_heads,
                                                        a.head_dim, a.window);
                             });
      model::AttentionPoint p;
      p.ranks = 1;
      p.seq = a.seq;
      p.head_dim = a.head_dim;
      p.window = a.window;
      p.backward = bwd;
      p.seconds = s / per;
      t.attention.push_back(p);
    }
  }
  for (const KernelNeed& n : kernels) {
    const std::function<void()> call = kernel_call(device, o, n);
    model::KernelPoint p;
    p.ranks = 1;
    p.kernel = n.kernel;
    p.backward = n.backward;
    p.elements = n.elements;
    p.seconds = time_calls(device, repeats, call);
    t.kernels.push_back(p);
  }
  t.seconds = now_s() - t_start;
  return t;
}

model::GpuProfile engine_device_profile(const EngineTables& t, const model::GpuProfile& base, const std::string& name,
                                        const std::string& device_name, const std::vector<std::string>& scenario_files,
                                        const std::string& host, const std::string& date) {
  using model::Provenance;
  model::GpuProfile p = base;
  p.name = name;
  p.description = base.description + "; the megascale engine's own calls measured on " + device_name;
  std::string files;
  for (const std::string& f : scenario_files) files += (files.empty() ? "" : ", ") + f;
  const std::string bench = "megascale calibrate micro --device cuda --engine-profile (engine/engine_tables.h) on " +
                            device_name + " for " + files;
  auto measured = [&](const std::string& what) { return Provenance{"measured", bench + ": " + what, host, date, {}, -1}; };
  p.engine_calls = 1;
  p.provenance["engine_calls"] =
      Provenance{"spec", "the tables below are the engine's own calls on this device (model/engine_ops.h)", "", "", {}, -1};
  p.fused_bias = t.fused_bias ? 1 : 0;
  p.provenance["fused_bias"] = Provenance{
      "spec",
      t.fused_bias ? "the device runs matmul_bias as one GEMM with its bias epilogue and bias_residual_add as one "
                     "kernel (engine/cuda/device_cuda.cc)"
                   : "the device runs matmul_bias and bias_residual_add as separate kernels (engine/device.h)",
      "", "", {}, -1};
  p.activation_bytes = 4;
  p.provenance["activation_bytes"] =
      Provenance{"spec", "the engine keeps fp32 activations; bf16 only inside its GEMMs (engine/device.h)", "", "", {}, -1};
  p.param_gather_bytes = 4;
  p.provenance["param_gather_bytes"] =
      Provenance{"spec", "the engine all-gathers fp32 parameters (engine/pipeline_executor.cc)", "", "", {}, -1};
  auto tables = std::make_shared<model::ProfileTables>();
  if (const model::ProfileTables* old = base.measured()) *tables = *old;  // keep measured collectives
  tables->gemm = model::GemmTable(t.gemm);
  tables->attention = model::AttentionTable(t.attention);
  tables->kernels = model::KernelTable(t.kernels);
  p.tables = tables;
  p.provenance["tables.gemm"] = measured("Device::matmul of every linear-layer shape, layouts nt (beta 0), tn (beta 1), "
                                         "nn (beta 0), median of event-timed calls");
  p.provenance["tables.attention"] =
      measured("Device::attention_forward / attention_backward at the scenario's micro-batch and local heads, "
               "seconds per (sequence x head), median");
  p.provenance["tables.kernels"] = measured("the engine's kernels at the element counts its step calls, median");
  return p;
}

}  // namespace megascale::engine
