// model/schedule.cc: builds the Schedule IR (see schedule.h).
//
// Each rank's list is built in two passes: first every rank's compute, send,
// receive and DP ops are laid out with the receives' `match` unknown; then each
// receive looks up the index of its matching send in the peer's finished list.

#include "model/schedule.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/pipeline_layout.h"

namespace megascale::model {

const char* to_string(OpKind k) {
  switch (k) {
    case OpKind::kDataLoad: return "data_load";
    case OpKind::kForward: return "forward";
    case OpKind::kBackward: return "backward";
    case OpKind::kSendActivation: return "send_activation";
    case OpKind::kRecvActivation: return "recv_activation";
    case OpKind::kSendGradient: return "send_gradient";
    case OpKind::kRecvGradient: return "recv_gradient";
    case OpKind::kDpAllGather: return "dp_allgather";
    case OpKind::kDpReduceScatter: return "dp_reducescatter";
    case OpKind::kDpAllReduce: return "dp_allreduce";
    case OpKind::kOptimizerStep: return "optimizer_step";
  }
  return "unknown";
}

const char* to_string(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "tp_comm";
    case Stream::kPpSend: return "pp_send";
    case Stream::kPpRecv: return "pp_recv";
    case Stream::kDpComm: return "dp_comm";
  }
  return "unknown";
}

const char* to_string(LayerStepKind k) {
  switch (k) {
    case LayerStepKind::kCompute: return "compute";
    case LayerStepKind::kTpAllGather: return "tp_allgather";
    case LayerStepKind::kTpReduceScatter: return "tp_reducescatter";
    case LayerStepKind::kTpAllReduce: return "tp_allreduce";
  }
  return "unknown";
}

// Megatron-LM's table: micro-batches in groups of P; inside a group every chunk
// in turn over the group's micro-batches. With V == 1 this is simply (k, 0).
MicroChunk forward_item(int k, const ScheduleOptions& o) {
  const int group_size = o.pp;
  const int items_per_group = group_size * o.vpp;
  const int group = k / items_per_group;
  const int in_group = k % items_per_group;
  return MicroChunk{group * group_size + in_group % group_size, in_group / group_size};
}

MicroChunk backward_item(int k, const ScheduleOptions& o) {
  const MicroChunk f = forward_item(k, o);
  return MicroChunk{f.microbatch, o.vpp - 1 - f.chunk};
}

int warmup_forwards(int pp_rank, const ScheduleOptions& o) {
  const int total = o.microbatches * o.vpp;
  if (o.vpp == 1) return std::min(total, o.pp - pp_rank - 1);
  return std::min(total, 2 * (o.pp - pp_rank - 1) + (o.vpp - 1) * o.pp);
}

namespace {

PipelineLayout layout_of(const ScheduleOptions& o) {
  if (o.custom_chunk_layers != nullptr) return PipelineLayout(o.layers, o.pp, o.vpp, o.custom_chunk_layers);
  return PipelineLayout(o.layers, o.pp, o.vpp, o.first_stage_layers, o.last_stage_layers);
}

}  // namespace

int Schedule::chunk_layers(int pp_rank, int chunk) const { return layout_of(options).chunk_layers(pp_rank, chunk); }

int Schedule::first_layer(int pp_rank, int chunk) const { return layout_of(options).first_layer(pp_rank, chunk); }

namespace {

void check_options(const ScheduleOptions& o) {
  auto fail = [](const std::string& why) {
    throw std::invalid_argument("build_schedule: " + why);
  };
  if (o.pp < 1 || o.vpp < 1 || o.microbatches < 1 || o.layers < 1 || o.dp < 1)
    fail("pp, vpp, microbatches, layers and dp must be >= 1");
  if (std::optional<std::string> why =
          pipeline_layout_error(o.layers, o.pp, o.vpp, o.first_stage_layers, o.last_stage_layers, nullptr,
                                o.custom_chunk_layers)) {
    fail(*why);
  }
  if (o.vpp > 1 && o.pp < 2) fail("vpp > 1 requires pp > 1");
  if (o.vpp > 1 && o.microbatches % o.pp != 0)
    fail("interleaved schedule requires microbatches (" + std::to_string(o.microbatches) +
         ") divisible by pp (" + std::to_string(o.pp) + ")");
  if (o.zero_stage < 0 || o.zero_stage > 3) fail("zero_stage must be in 0..3");
  if (o.activation_bytes < 0 || o.dp_bytes_per_chunk < 0) fail("byte counts must be >= 0");
}

// A (pipeline rank, chunk) pair; its virtual stage is chunk*P + rank.
struct VirtualStage {
  int pp_rank;
  int chunk;
};

bool is_first_stage(VirtualStage v) { return v.pp_rank == 0 && v.chunk == 0; }

bool is_last_stage(VirtualStage v, const ScheduleOptions& o) {
  return v.pp_rank == o.pp - 1 && v.chunk == o.vpp - 1;
}

// REQUIRES: !is_first_stage(v).
VirtualStage previous_stage(VirtualStage v, const ScheduleOptions& o) {
  if (v.pp_rank > 0) return {v.pp_rank - 1, v.chunk};
  return {o.pp - 1, v.chunk - 1};
}

// REQUIRES: !is_last_stage(v, o).
VirtualStage next_stage(VirtualStage v, const ScheduleOptions& o) {
  if (v.pp_rank < o.pp - 1) return {v.pp_rank + 1, v.chunk};
  return {0, v.chunk + 1};
}

// Lays out one rank's ops in order (receives' `match` left at -1).
class RankBuilder {
 public:
  RankBuilder(int pp_rank, const ScheduleOptions& o)
      : o_(o),
        pp_rank_(pp_rank),
        forward_index_(static_cast<size_t>(o.vpp) * o.microbatches, -1),
        prefetch_allgather_(static_cast<size_t>(o.vpp) * std::max(1, o.dp_buckets), -1),
        forwards_done_(o.vpp, 0),
        backwards_done_(o.vpp, 0) {}

  RankSchedule build() {
    if (!o_.data_pipeline) append(Op{.kind = OpKind::kDataLoad, .deps = {}});
    if (prefetches_parameters()) add_prefetch_allgathers();
    add_compute_steps();
    add_iteration_end();
    return RankSchedule{pp_rank_, std::move(ops_)};
  }

 private:
  bool has_dp() const { return o_.dp > 1; }
  bool gathers_per_use() const { return has_dp() && o_.zero_stage == 3; }
  bool overlaps_gathers() const { return o_.dp_overlap && o_.dp_overlap_param_gather; }
  bool prefetches_parameters() const {
    return has_dp() && overlaps_gathers() && (o_.zero_stage == 1 || o_.zero_stage == 2);
  }
  bool gathers_after_step() const {
    return has_dp() && !overlaps_gathers() && (o_.zero_stage == 1 || o_.zero_stage == 2);
  }
  Stream send_stream() const { return o_.pp_overlap ? Stream::kPpSend : Stream::kCompute; }
  Stream recv_stream() const { return o_.pp_overlap ? Stream::kPpRecv : Stream::kCompute; }

  int append(Op op) {
    if (op.stream == Stream::kCompute) last_compute_stream_op_ = static_cast<int>(ops_.size());
    ops_.push_back(std::move(op));
    return static_cast<int>(ops_.size()) - 1;
  }

  int& forward_index(MicroChunk item) {
    return forward_index_[static_cast<size_t>(item.chunk) * o_.microbatches + item.microbatch];
  }

  Op dp_op(OpKind kind, int chunk, std::vector<int> deps, int pieces = 1) const {
    return Op{.kind = kind,
              .stream = Stream::kDpComm,
              .chunk = chunk,
              .bytes = o_.dp_bytes_per_chunk / pieces,
              .deps = std::move(deps),
              .fraction = 1.0 / pieces};
  }

  // Buckets per chunk when they split the chunk's first forward and last backward.
  int buckets() const {
    return has_dp() && o_.dp_overlap && o_.zero_stage <= 2 ? std::max(1, o_.dp_buckets) : 1;
  }

  // Parameters of chunk 0, 1, ... (bucket by bucket) gathered at the start,
  // overlapping data loading.
  void add_prefetch_allgathers() {
    const int b = buckets();
    for (int c = 0; c < o_.vpp; ++c) {
      for (int k = 0; k < b; ++k) prefetch_allgather_[c * b + k] = append(dp_op(OpKind::kDpAllGather, c, {}, b));
    }
  }

  // Megatron-LM order: warm-up forwards, steady 1F1B, cool-down backwards.
  void add_compute_steps() {
    const int total = o_.microbatches * o_.vpp;
    const int warmup = warmup_forwards(pp_rank_, o_);
    for (int k = 0; k < warmup; ++k) add_forward(forward_item(k, o_));
    for (int k = 0; k < total - warmup; ++k) {
      add_forward(forward_item(k + warmup, o_));
      add_backward(backward_item(k, o_));
    }
    for (int k = total - warmup; k < total; ++k) add_backward(backward_item(k, o_));
  }

  // Receive posted right after the previous compute-stream op when it has its own
  // stream (pp_overlap); otherwise it blocks the compute stream in list order.
  int add_recv(OpKind kind, int microbatch, int chunk, int peer) {
    std::vector<int> deps;
    if (o_.pp_overlap && last_compute_stream_op_ >= 0) deps.push_back(last_compute_stream_op_);
    return append(Op{.kind = kind,
                     .stream = recv_stream(),
                     .microbatch = microbatch,
                     .chunk = chunk,
                     .peer = peer,
                     .bytes = o_.activation_bytes,
                     .deps = std::move(deps)});
  }

  void add_send(OpKind kind, int microbatch, int chunk, int peer, int producer) {
    append(Op{.kind = kind,
              .stream = send_stream(),
              .microbatch = microbatch,
              .chunk = chunk,
              .peer = peer,
              .bytes = o_.activation_bytes,
              .deps = {producer}});
  }

  void add_forward(MicroChunk item) {
    const VirtualStage stage{pp_rank_, item.chunk};
    std::vector<int> deps;
    if (gathers_per_use())
      deps.push_back(append(dp_op(OpKind::kDpAllGather, item.chunk, {})));
    const bool first_use = prefetches_parameters() && forwards_done_[item.chunk] == 0;
    const int b = first_use ? buckets() : 1;
    if (first_use) deps.push_back(prefetch_allgather_[item.chunk * buckets()]);
    if (!is_first_stage(stage))
      deps.push_back(add_recv(OpKind::kRecvActivation, item.microbatch, item.chunk,
                              previous_stage(stage, o_).pp_rank));
    int forward = append(Op{.kind = OpKind::kForward,
                            .microbatch = item.microbatch,
                            .chunk = item.chunk,
                            .deps = std::move(deps),
                            .fraction = 1.0 / b});
    // Bucketed first use: piece k waits for its own bucket's gather.
    for (int k = 1; k < b; ++k) {
      forward = append(Op{.kind = OpKind::kForward,
                          .microbatch = item.microbatch,
                          .chunk = item.chunk,
                          .deps = {forward, prefetch_allgather_[item.chunk * b + k]},
                          .fraction = 1.0 / b});
    }
    forward_index(item) = forward;
    ++forwards_done_[item.chunk];
    if (!is_last_stage(stage, o_))
      add_send(OpKind::kSendActivation, item.microbatch, item.chunk,
               next_stage(stage, o_).pp_rank, forward);
  }

  void add_backward(MicroChunk item) {
    const VirtualStage stage{pp_rank_, item.chunk};
    std::vector<int> deps{forward_index(item)};
    if (gathers_per_use())
      deps.push_back(append(dp_op(OpKind::kDpAllGather, item.chunk, {})));
    if (!is_last_stage(stage, o_))
      deps.push_back(add_recv(OpKind::kRecvGradient, item.microbatch, item.chunk,
                              next_stage(stage, o_).pp_rank));
    const bool chunk_done = ++backwards_done_[item.chunk] == o_.microbatches;
    const bool syncs = has_dp() && o_.dp_overlap && chunk_done;
    // The chunk's last backward: with buckets, B pieces in reverse layer order,
    // each bucket's gradients reduced as soon as its piece ends.
    const int b = syncs ? buckets() : 1;
    int backward = -1;
    for (int k = 0; k < b; ++k) {
      backward = append(Op{.kind = OpKind::kBackward,
                           .microbatch = item.microbatch,
                           .chunk = item.chunk,
                           .deps = k == 0 ? std::move(deps) : std::vector<int>{backward},
                           .fraction = 1.0 / b});
      if (syncs && k + 1 < b) gradient_syncs_.push_back(append(dp_op(gradient_sync_kind(), item.chunk, {backward}, b)));
    }
    last_backward_ = backward;
    if (!is_first_stage(stage))
      add_send(OpKind::kSendGradient, item.microbatch, item.chunk,
               previous_stage(stage, o_).pp_rank, backward);
    if (syncs) gradient_syncs_.push_back(append(dp_op(gradient_sync_kind(), item.chunk, {backward}, b)));
  }

  OpKind gradient_sync_kind() const {
    return o_.zero_stage == 0 ? OpKind::kDpAllReduce : OpKind::kDpReduceScatter;
  }

  // Exposed gradient syncs (no dp_overlap), the optimizer step, and the
  // parameter all-gathers that follow it (ZeRO 1/2 without dp_overlap, or
  // without dp_overlap_param_gather).
  void add_iteration_end() {
    if (has_dp() && !o_.dp_overlap) {
      for (int c = o_.vpp - 1; c >= 0; --c)
        gradient_syncs_.push_back(append(dp_op(gradient_sync_kind(), c, {last_backward_})));
    }
    std::vector<int> step_deps = has_dp() ? gradient_syncs_ : std::vector<int>{last_backward_};
    const int step = append(Op{.kind = OpKind::kOptimizerStep, .deps = std::move(step_deps)});
    if (gathers_after_step()) {
      for (int c = 0; c < o_.vpp; ++c) append(dp_op(OpKind::kDpAllGather, c, {step}));
    }
  }

  const ScheduleOptions& o_;
  int pp_rank_;
  std::vector<Op> ops_;
  std::vector<int> forward_index_;       // [chunk*M + mb] -> op index
  std::vector<int> prefetch_allgather_;  // [chunk * buckets + bucket] -> op index (dp_overlap, ZeRO 1/2)
  std::vector<int> forwards_done_;       // [chunk]
  std::vector<int> backwards_done_;      // [chunk]
  std::vector<int> gradient_syncs_;      // RS / AR op indices, ascending
  int last_compute_stream_op_ = -1;
  int last_backward_ = -1;
};

// Second pass: every receive's `match` is the index of the send of the same
// (kind, micro-batch) from the neighbouring virtual stage.
void match_receives(std::vector<RankSchedule>& ranks, const ScheduleOptions& o) {
  const size_t per_rank = static_cast<size_t>(o.vpp) * o.microbatches;
  auto slot = [&](int chunk, int microbatch) {
    return static_cast<size_t>(chunk) * o.microbatches + microbatch;
  };
  // [rank][chunk*M + mb] -> index of the send, one table per send kind.
  std::vector<std::vector<int>> activation_send(ranks.size(), std::vector<int>(per_rank, -1));
  std::vector<std::vector<int>> gradient_send(ranks.size(), std::vector<int>(per_rank, -1));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<Op>& ops = ranks[r].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!is_send(ops[i].kind)) continue;
      auto& table = ops[i].kind == OpKind::kSendActivation ? activation_send : gradient_send;
      table[r][slot(ops[i].chunk, ops[i].microbatch)] = static_cast<int>(i);
    }
  }
  for (RankSchedule& rank : ranks) {
    for (Op& op : rank.ops) {
      if (!is_recv(op.kind)) continue;
      const VirtualStage here{rank.pp_rank, op.chunk};
      const bool activation = op.kind == OpKind::kRecvActivation;
      const VirtualStage from = activation ? previous_stage(here, o) : next_stage(here, o);
      const auto& table = activation ? activation_send : gradient_send;
      op.match = table[from.pp_rank][slot(from.chunk, op.microbatch)];
    }
  }
}

}  // namespace

Schedule build_schedule(const ScheduleOptions& options) {
  check_options(options);
  Schedule s;
  s.options = options;
  for (int r = 0; r < options.pp; ++r) s.ranks.push_back(RankBuilder(r, options).build());
  match_receives(s.ranks, options);
  return s;
}

std::string compute_order(const RankSchedule& rank) {
  std::string out;
  for (const Op& op : rank.ops) {
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
    if (!out.empty()) out += ' ';
    out += op.kind == OpKind::kForward ? 'F' : 'B';
    out += std::to_string(op.microbatch) + "." + std::to_string(op.chunk);
  }
  return out;
}

}  // namespace megascale::model
