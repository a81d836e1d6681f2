// model/layer_program.cc: compute segments and TP/SP collectives of one layer.
#include "model/layer_program.h"

#include <algorithm>

#include "model/op_recompute.h"

namespace megascale::model {
namespace {

bool opens_tp_region(const std::string& name) { return is_column_parallel(name); }
// Row-parallel GEMMs close a TP region (their partial outputs are summed: SP
// reduce-scatters them).
bool closes_tp_region(const std::string& name) {
  return name == "proj" || name == "fc2" || name == "proj_fc2";
}

class ProgramBuilder {
 public:
  explicit ProgramBuilder(bool recompute) : recompute_(recompute) {}

  void add_compute(int op, double share = 1.0) {
    pending_.push_back(op);
    shares_.push_back(share);
  }

  void flush() {
    if (pending_.empty()) return;
    LayerStep step;
    step.kind = LayerStepKind::kCompute;
    step.name = "compute";
    step.ops = pending_;
    if (std::any_of(shares_.begin(), shares_.end(), [](double x) { return x != 1.0; })) step.op_share = shares_;
    step.recompute = recompute_;
    program_.push_back(step);
    pending_.clear();
    shares_.clear();
  }

  void add_collective(LayerStepKind kind, const std::string& name, int64_t bytes, int fused,
                      bool beside_dgrad = false) {
    flush();
    LayerStep step;
    step.kind = kind;
    step.name = name;
    step.bytes = bytes;
    step.fused_with = fused;
    step.recompute = recompute_;
    step.beside_dgrad = beside_dgrad;
    program_.push_back(step);
  }

  LayerProgram take() {
    flush();
    return std::move(program_);
  }

 private:
  bool recompute_;
  std::vector<int> pending_;
  std::vector<double> shares_;
  LayerProgram program_;
};

int64_t activation_bytes(const ModelConfig& m, const ParallelConfig& p) {
  // The full (b, s, h) bf16 activation: what an AG produces / an RS consumes.
  return static_cast<int64_t>(p.micro_batch) * m.seq_len * m.hidden * 2;
}

// The forward over `ops`. `shares` (recompute = "selective_op", the re-run
// before a backward; op_recompute.h): each operator's re-run share, an
// operator at 0 skipped with the all-gather feeding it (all-gathers are not in
// torchtitan's save list, so one feeding a re-run GEMM runs again), and SP's
// reduce-scatters skipped (their outputs are saved); without SP the all-reduce
// after a re-run row-parallel GEMM runs again.
LayerProgram forward_program(const ModelConfig& m, const ParallelConfig& p, const std::vector<OperatorCost>& ops,
                             bool recompute, const std::vector<double>* shares = nullptr) {
  ProgramBuilder b(recompute);
  const bool tp = p.tp > 1;
  const bool sp = p.sequence_parallel;
  const int64_t bytes = activation_bytes(m, p);
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    const double share = shares != nullptr ? (*shares)[i] : 1.0;
    if (share <= 0) continue;
    const std::string& name = ops[i].name;
    if (tp && sp && opens_tp_region(name)) {
      b.add_collective(LayerStepKind::kTpAllGather, "ag_" + name, bytes, i);
    }
    b.add_compute(i, share);
    if (tp && closes_tp_region(name)) {
      if (!sp) {
        b.add_collective(LayerStepKind::kTpAllReduce, "ar_" + name, bytes, -1);
      } else if (shares == nullptr) {
        b.add_collective(LayerStepKind::kTpReduceScatter, "rs_" + name, bytes, i);
      }
    }
  }
  return b.take();
}

}  // namespace

bool is_column_parallel(const std::string& op_name) {
  return op_name == "qkv" || op_name == "fc1" || op_name == "qkv_fc1";
}

LayerProgram layer_forward_program(const ModelConfig& m, const ParallelConfig& p,
                                   const std::vector<OperatorCost>& ops) {
  return forward_program(m, p, ops, /*recompute=*/false);
}

LayerProgram layer_backward_program(const ModelConfig& m, const ParallelConfig& p,
                                    const std::vector<OperatorCost>& ops) {
  LayerProgram program;
  if (p.recompute == Recompute::kFull) {
    program = forward_program(m, p, ops, /*recompute=*/true);
  } else if (p.recompute == Recompute::kSelectiveOp) {
    const std::vector<double> shares = op_recompute_shares(m, p, ops);
    program = forward_program(m, p, ops, /*recompute=*/true, &shares);
  } else if (p.recompute == Recompute::kSelective) {
    LayerStep step;
    step.kind = LayerStepKind::kCompute;
    step.name = "recompute_attention";
    step.recompute = true;
    for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
      if (ops[i].attention_core) step.ops.push_back(i);
    }
    if (!step.ops.empty()) program.push_back(step);
  }

  ProgramBuilder b(/*recompute=*/false);
  const bool tp = p.tp > 1;
  const bool sp = p.sequence_parallel;
  const int64_t bytes = activation_bytes(m, p);
  for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i) {
    const std::string& name = ops[i].name;
    if (tp && sp && closes_tp_region(name)) {
      // The gradient of a reduce-scatter is an all-gather.
      b.add_collective(LayerStepKind::kTpAllGather, "ag_d" + name, bytes, i);
    }
    if (tp && sp && opens_tp_region(name)) {
      // Only the input's sequence shard was kept: gather it again for the
      // weight gradient, beside the input-gradient GEMM.
      b.add_collective(LayerStepKind::kTpAllGather, "ag_in_" + name, bytes, i, /*beside_dgrad=*/true);
    }
    b.add_compute(i);
    if (tp && opens_tp_region(name)) {
      if (sp) {
        b.add_collective(LayerStepKind::kTpReduceScatter, "rs_d" + name, bytes, i);
      } else {
        b.add_collective(LayerStepKind::kTpAllReduce, "ar_d" + name, bytes, -1);
      }
    }
  }
  LayerProgram mirrored = b.take();
  program.insert(program.end(), mirrored.begin(), mirrored.end());
  return program;
}

}  // namespace megascale::model
