// model/op_recompute.cc: see op_recompute.h for the policy and its source.
#include "model/op_recompute.h"

namespace megascale::model {
namespace {

// The log-sum-exp the fused SDPA kernels keep per query and head, fp32: two
// bf16 elements (FlashAttention-2 forward's softmax_lse output).
constexpr double kLseElemsPerHead = 2.0;

// The GEMM operators of a layer in call order (model/op_cost.cc layer_operators).
std::vector<std::string> gemm_ops(const ModelConfig& m) {
  if (m.block == BlockKind::kParallel) return {"qkv_fc1", "proj_fc2"};
  return {"qkv", "proj", "fc1", "fc2"};
}

bool swiglu(const ModelConfig& m) { return m.mlp == MlpKind::kSwiGlu; }

}  // namespace

std::vector<GemmPart> gemm_parts(const ModelConfig& m, const ParallelConfig& p, const std::string& op_name) {
  const double t = p.tp;
  const double h = m.hidden;
  const double kv = static_cast<double>(m.kv_heads) * m.head_dim();
  const double f = m.ffn_hidden;
  // Column-parallel parts: each output is split over TP; shares by output width
  // (one input, so the FLOPs follow the widths).
  auto columns = [&](std::vector<std::pair<std::string, double>> widths) {
    double total = 0;
    for (const auto& w : widths) total += w.second;
    std::vector<GemmPart> parts;
    for (const auto& [name, width] : widths) parts.push_back({name, width / total, width / t, false});
    return parts;
  };
  std::vector<std::pair<std::string, double>> mlp_in = {{swiglu(m) ? "w1" : "fc1", f}};
  if (swiglu(m)) mlp_in.push_back({"w3", f});
  if (op_name == "qkv") return columns({{"wq", h}, {"wk", kv}, {"wv", kv}});
  if (op_name == "fc1") return columns(mlp_in);
  if (op_name == "qkv_fc1") {
    std::vector<std::pair<std::string, double>> widths = {{"wq", h}, {"wk", kv}, {"wv", kv}};
    widths.insert(widths.end(), mlp_in.begin(), mlp_in.end());
    return columns(widths);
  }
  const std::string down = swiglu(m) ? "w2" : "fc2";
  // Row-parallel parts: the whole h of partial sums before the reduction.
  if (op_name == "proj") return {{"wo", 1.0, h, true}};
  if (op_name == "fc2") return {{down, 1.0, h, true}};
  // The parallel block's fused output GEMM: two matmuls with inner sizes h and f.
  if (op_name == "proj_fc2") return {{"wo", h / (h + f), h, true}, {down, f / (h + f), h, true}};
  return {};
}

std::vector<double> op_recompute_shares(const ModelConfig& m, const ParallelConfig& p,
                                        const std::vector<OperatorCost>& ops) {
  std::vector<double> shares(ops.size(), 1.0);
  int mm_calls = 0;
  double gemm_flops = 0, rerun_gemm_flops = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OperatorCost& op = ops[i];
    const std::vector<GemmPart> parts = gemm_parts(m, p, op.name);
    if (!parts.empty()) {
      double share = 0;
      for (const GemmPart& part : parts) {
        if (++mm_calls % 2 == 0) share += part.flop_share;  // every second matmul re-runs
      }
      shares[i] = share;
      gemm_flops += op.fwd_flops;
      rerun_gemm_flops += share * op.fwd_flops;
    } else if (op.attention_core) {
      // The fused SDPA kernels are in the save list; the unfused attention's
      // batched matmuls and softmax (aten.bmm, not aten.mm) are not.
      shares[i] = op.cls == OpClass::kFlashAttention ? 0.0 : 1.0;
    }
  }
  // FP8's casts of the GEMM inputs (apply_fp8's fp8_cast): as much as the
  // GEMMs they feed re-run.
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == "fp8_cast") shares[i] = gemm_flops > 0 ? rerun_gemm_flops / gemm_flops : 0.0;
  }
  return shares;
}

double op_recompute_saved_elems_per_token(const ModelConfig& m, const ParallelConfig& p,
                                          bool flash_attention) {
  const double t = p.tp;
  const bool sp = p.sequence_parallel && p.tp > 1;
  const double h = m.hidden;
  double elems = sp ? h / t : h;  // the block's input (the checkpoint keeps it)
  int mm_calls = 0;
  int row_ops = 0;
  for (const std::string& name : gemm_ops(m)) {
    const std::vector<GemmPart> parts = gemm_parts(m, p, name);
    if (parts.back().row_parallel) ++row_ops;
    for (const GemmPart& part : parts) {
      if (++mm_calls % 2 == 1) elems += part.out_elems_per_token;
    }
  }
  if (flash_attention) elems += h / t + kLseElemsPerHead * m.heads / t;
  if (sp) elems += row_ops * h / t;  // each reduce-scatter's output
  return elems;
}

}  // namespace megascale::model
