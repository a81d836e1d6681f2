// engine/pipeline_executor.cc: Schedule IR -> kernels + communication.
#include "engine/pipeline_executor.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "model/job_schedule.h"
#include "model/scenario.h"

namespace megascale::engine {
namespace {

using model::Op;
using model::OpKind;
using model::Stream;

// Forwards the chunks' kernel and TP-collective events to the trace. Chunks
// report their global virtual stage (c*P + r); the trace, like the Schedule IR,
// uses the rank-local chunk c. With a device OpTimer (GPU), begin and end are
// markers in the device queue, resolved into times by flush() at the end of
// the step; otherwise the host clock.
class TraceObserver final : public OpObserver {
 public:
  TraceObserver(TraceRecorder* trace, int pp, OpTimer* timer) : trace_(trace), pp_(pp), timer_(timer) {}
  void op_begin(const OpEvent&) override {
    if (timer_ != nullptr) begin_stamp_ = timer_->stamp(); else start_us_ = TraceRecorder::now_us();
  }
  void op_end(const OpEvent& e) override {
    const Stream stream = e.kind == model::LayerStepKind::kCompute ? Stream::kCompute : Stream::kTpComm;
    std::string kind = e.name;
    if (e.backward) kind += ".bwd";
    const int chunk = e.chunk < 0 ? e.chunk : e.chunk / pp_;
    if (timer_ != nullptr) {
      add_pending(stream, std::move(kind), e.microbatch, chunk, e.layer, begin_stamp_, timer_->stamp(), e.bytes,
                  e.flops);
      return;
    }
    trace_->record(stream, kind, e.microbatch, chunk, e.layer, start_us_, TraceRecorder::now_us(),
                   e.bytes, e.flops);
  }
  // A timed op whose begin and end are OpTimer stamps.
  void add_pending(Stream stream, std::string kind, int microbatch, int chunk, int layer, int begin, int end,
                   int64_t bytes, double flops) {
    pending_.push_back(Pending{stream, std::move(kind), microbatch, chunk, layer, begin, end, bytes, flops});
  }
  // Resolves the stamps of this step into trace records.
  void flush() {
    if (timer_ == nullptr) return;
    const std::vector<double> at = timer_->resolve();
    for (const Pending& p : pending_) {
      trace_->record(p.stream, p.kind, p.microbatch, p.chunk, p.layer, at.at(p.begin), at.at(p.end), p.bytes,
                     p.flops);
    }
    pending_.clear();
  }

 private:
  struct Pending {
    Stream stream;
    std::string kind;
    int microbatch, chunk, layer, begin, end;
    int64_t bytes;
    double flops;
  };
  TraceRecorder* trace_;
  int pp_;
  OpTimer* timer_;
  double start_us_ = 0;
  int begin_stamp_ = 0;
  std::vector<Pending> pending_;
};

// A Schedule IR op timed by OpTimer stamps (the GPU counterpart of
// TraceRecorder::Scope).
class StampScope {
 public:
  StampScope(TraceObserver& observer, OpTimer& timer, Stream stream, std::string kind, int microbatch, int chunk,
             int64_t bytes)
      : observer_(observer), timer_(timer), stream_(stream), kind_(std::move(kind)), microbatch_(microbatch),
        chunk_(chunk), bytes_(bytes), begin_(timer.stamp()) {}
  ~StampScope() {
    observer_.add_pending(stream_, std::move(kind_), microbatch_, chunk_, -1, begin_, timer_.stamp(), bytes_, 0);
  }
  StampScope(const StampScope&) = delete;
  StampScope& operator=(const StampScope&) = delete;

 private:
  TraceObserver& observer_;
  OpTimer& timer_;
  Stream stream_;
  std::string kind_;
  int microbatch_, chunk_;
  int64_t bytes_;
  int begin_;
};

struct Key {
  int microbatch;
  int chunk;
  bool operator<(const Key& o) const {
    return microbatch != o.microbatch ? microbatch < o.microbatch : chunk < o.chunk;
  }
};

}  // namespace

struct PipelineExecutor::Pending {
  // Device buffers (zero-filled), so that a GPU Comm can move them directly.
  // Declared before the requests, which are therefore destroyed first.
  std::map<Key, DeviceBuffer> activation_in, gradient_in;    // received
  std::map<Key, DeviceBuffer> activation_out, gradient_out;  // produced, to send
  std::map<int, std::unique_ptr<Request>> recvs;  // by op index
  std::vector<std::unique_ptr<Request>> sends;
  // dp_overlap: DP collectives posted non-blocking, by op index; waited by
  // the ops that depend on them (a chunk's first forward, the optimizer step)
  // and at the end of the step.
  std::map<int, std::unique_ptr<Request>> dp;
  std::vector<bool> sp_synced;
  double loss_sum = 0;
};

PipelineExecutor::PipelineExecutor(const ExecutorOptions& options, ProcessGroups& groups,
                                   Device& device, TraceRecorder* trace)
    : options_(options), groups_(groups), device_(device), trace_(trace) {
  const model::ParallelConfig& p = options_.parallel;
  const GridShape& g = groups_.shape();
  if (g.tp != p.tp || g.pp != p.pp || g.dp != p.dp) {
    throw std::invalid_argument("process groups (tp " + std::to_string(g.tp) + ", pp " +
                                std::to_string(g.pp) + ", dp " + std::to_string(g.dp) +
                                ") do not match the parallel layout");
  }
  if (const std::optional<model::EngineLimit> limit = model::engine_limit(p)) {
    throw std::invalid_argument(limit->key + ": " + limit->reason);
  }
  microbatches_ = p.microbatches();
  // The same op order the simulator replays (model/job_schedule.h).
  schedule_ = model::build_schedule(model::schedule_options(options_.model, p, options_.optimizations));

  if (trace_ != nullptr) {
    timer_ = device_.make_op_timer();
    observer_ = std::make_unique<TraceObserver>(trace_, p.pp, timer_.get());
  }
  options_.optimizer.kind = options_.optimizations.optimizer;
  OptimizerOptions per_chunk = options_.optimizer;
  per_chunk.max_grad_norm = 0;  // clipping is global over all chunks (clip_and_step)
  Comm* tp_comm = p.tp > 1 ? &groups_.tp() : nullptr;
  for (int c = 0; c < p.vpp; ++c) {
    ChunkConfig cfg = ChunkConfig::for_stage(options_.model, p, groups_.pp_rank(), c, options_.seed);
    cfg.pad_to_multiple = p.dp;
    cfg.tp_overlap = options_.optimizations.tp_overlap;  // SP + tp > 1 only (ModelChunk)
    chunks_.push_back(std::make_unique<ModelChunk>(cfg, device_, tp_comm, observer_.get()));
    ModelChunk& chunk = *chunks_.back();
    OptimizerComms comms;
    ShardRange shard{0, chunk.buffer_floats()};
    if (p.zero_stage >= 1 && p.dp > 1) {
      comms.shard = &groups_.dp();
      shard = shard_range(chunk.num_params(), p.dp, groups_.dp_rank());
    }
    comms.tensor = tp_comm;
    if (p.pp > 1) comms.model.push_back(&groups_.pp());
    optimizers_.push_back(std::make_unique<ShardedOptimizer>(
        per_chunk, segments_from(chunk.tensors()), shard, comms, &device_));
    grad_shards_.emplace_back(device_, shard.size() * sizeof(float));
  }
  params_stale_.assign(p.vpp, false);
}

PipelineExecutor::~PipelineExecutor() = default;

ShardRange PipelineExecutor::shard(int c) const { return optimizers_[c]->shard(); }

int PipelineExecutor::p2p_tag(OpKind kind, int microbatch, int sender_chunk) const {
  const bool gradient = kind == OpKind::kSendGradient || kind == OpKind::kRecvGradient;
  const int tag = ((gradient ? 1 : 0) * options_.parallel.vpp + sender_chunk) * microbatches_ + microbatch;
  // MPI guarantees tags up to 32767.
  if (tag > 32767) throw std::invalid_argument("too many micro-batches x chunks for p2p tags");
  return tag;
}

// With dp_overlap the collective is posted non-blocking (Comm::ireduce_scatter_sum
// and friends: on NCCL it runs on the collective stream beside the next
// backward); the returned request is waited where its result is used. Without,
// it completes here.
std::unique_ptr<Request> PipelineExecutor::reduce_gradients(int c, bool all_reduce) {
  ModelChunk& chunk = *chunks_[c];
  Comm& dp = groups_.dp();
  const bool async = options_.optimizations.dp_overlap;
  if (all_reduce) {
    if (async) return dp.iall_reduce_sum(chunk.grads(), chunk.buffer_floats());
    dp.all_reduce_sum(chunk.grads(), chunk.buffer_floats());
  } else {
    const size_t per_rank = chunk.buffer_floats() / dp.size();
    if (async) return dp.ireduce_scatter_sum(chunk.grads(), per_rank, grad_shards_[c].floats());
    dp.reduce_scatter_sum(chunk.grads(), per_rank, grad_shards_[c].floats());
  }
  return std::make_unique<CompletedRequest>();
}

std::unique_ptr<Request> PipelineExecutor::gather_parameters(int c) {
  ModelChunk& chunk = *chunks_[c];
  Comm& dp = groups_.dp();
  const size_t per_rank = chunk.buffer_floats() / dp.size();
  params_stale_[c] = false;
  if (options_.optimizations.overlaps_param_gather())
    return dp.iall_gather(chunk.params() + per_rank * dp.rank(), per_rank, chunk.params());
  dp.all_gather(chunk.params() + per_rank * dp.rank(), per_rank, chunk.params());
  return std::make_unique<CompletedRequest>();
}

void PipelineExecutor::sync_parameters() {
  for (int c = 0; c < num_chunks(); ++c) {
    if (params_stale_[c]) gather_parameters(c)->wait();
  }
}

void PipelineExecutor::clip_and_step(double lr, StepResult& result) {
  const model::ParallelConfig& p = options_.parallel;
  const bool sharded = p.zero_stage >= 1 && p.dp > 1;
  std::vector<float*> grads(chunks_.size());
  double sum_sq = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const ShardRange s = optimizers_[c]->shard();
    grads[c] = sharded ? grad_shards_[c].floats() : chunks_[c]->grads() + s.begin;
    const double n = optimizers_[c]->global_grad_norm(grads[c]);
    sum_sq += n * n;
  }
  result.grad_norm = std::sqrt(sum_sq);
  if (!std::isfinite(result.grad_norm)) {
    result.skipped = true;
    return;
  }
  const double max_norm = options_.optimizer.max_grad_norm;
  if (max_norm > 0 && result.grad_norm > max_norm) {
    const float coef = static_cast<float>(max_norm / (result.grad_norm + 1e-6));
    for (size_t c = 0; c < chunks_.size(); ++c) device_.scale(grads[c], coef, optimizers_[c]->shard().size());
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const ShardRange s = optimizers_[c]->shard();
    optimizers_[c]->step(chunks_[c]->params() + s.begin, grads[c], lr);
    if (sharded) params_stale_[c] = true;
  }
}

void PipelineExecutor::run_op(int index, const Op& op, const Batch& batch, double lr,
                              Pending& pending, StepResult& result) {
  const model::ParallelConfig& p = options_.parallel;
  const int P = p.pp;
  const int V = p.vpp;
  const int r = groups_.pp_rank();
  const int mb = op.microbatch;
  const int c = op.chunk;
  const float loss_scale = 1.0f / static_cast<float>(microbatches_ * p.dp);
  const size_t tokens_per_mb = static_cast<size_t>(p.micro_batch) * options_.model.seq_len;
  // Async receives this op consumes must have arrived.
  for (int dep : op.deps) {
    auto it = pending.recvs.find(dep);
    if (it != pending.recvs.end()) it->second->wait();
    auto dp = pending.dp.find(dep);
    if (dp != pending.dp.end()) dp->second->wait();
  }
  std::unique_ptr<TraceRecorder::Scope> scope;
  std::unique_ptr<StampScope> stamps;
  if (trace_ != nullptr && timer_ != nullptr) {
    stamps = std::make_unique<StampScope>(static_cast<TraceObserver&>(*observer_), *timer_, op.stream,
                                          model::to_string(op.kind), mb, c, op.bytes);
  } else if (trace_ != nullptr) {
    scope = std::make_unique<TraceRecorder::Scope>(trace_, op.stream, model::to_string(op.kind), mb, c,
                                                   -1, op.bytes);
  }
  Comm& pp = groups_.pp();
  switch (op.kind) {
    case OpKind::kDataLoad:
      break;  // the node loader prefetched this replica's batch
    case OpKind::kRecvActivation:
    case OpKind::kRecvGradient: {
      ModelChunk& chunk = *chunks_[c];
      auto& buffers = op.kind == OpKind::kRecvActivation ? pending.activation_in : pending.gradient_in;
      DeviceBuffer& buf = buffers[Key{mb, c}];
      buf = DeviceBuffer(device_, chunk.activation_numel() * sizeof(float));
      const int sender_chunk = schedule_.ranks[op.peer].ops[op.match].chunk;
      auto req = pp.irecv(buf.floats(), chunk.activation_numel(), op.peer,
                          p2p_tag(op.kind, mb, sender_chunk));
      if (op.stream == Stream::kCompute) req->wait();  // Megatron's blocking p2p
      pending.recvs[index] = std::move(req);
      break;
    }
    case OpKind::kSendActivation:
    case OpKind::kSendGradient: {
      auto& buffers = op.kind == OpKind::kSendActivation ? pending.activation_out : pending.gradient_out;
      DeviceBuffer& buf = buffers.at(Key{mb, c});
      // Never waited here: a blocking send would deadlock two stages that both
      // send before they receive (Megatron batches the pair into one
      // batch_isend_irecv for the same reason). The IR's semantics are eager
      // sends (model/replay.h); all sends complete by the end of the iteration.
      pending.sends.push_back(pp.isend(buf.floats(), buf.bytes() / sizeof(float), op.peer,
                                       p2p_tag(op.kind, mb, c)));
      break;
    }
    case OpKind::kForward: {
      ModelChunk& chunk = *chunks_[c];
      const bool first = r == 0 && c == 0;
      const bool last = r == P - 1 && c == V - 1;
      const float* input = first ? nullptr : pending.activation_in.at(Key{mb, c}).floats();
      MicroBatchData data;
      data.tokens = batch.tokens.data() + mb * tokens_per_mb;
      data.labels = batch.labels.data() + mb * tokens_per_mb;
      float* output = nullptr;
      if (!last) {
        DeviceBuffer& out = pending.activation_out[Key{mb, c}];
        out = DeviceBuffer(device_, chunk.activation_numel() * sizeof(float));
        output = out.floats();
      }
      const float loss = chunk.forward(mb, input, data, output);
      if (last) pending.loss_sum += loss;
      if (!first) pending.activation_in.erase(Key{mb, c});
      break;
    }
    case OpKind::kBackward: {
      ModelChunk& chunk = *chunks_[c];
      const bool first = r == 0 && c == 0;
      const bool last = r == P - 1 && c == V - 1;
      const float* grad_output = last ? nullptr : pending.gradient_in.at(Key{mb, c}).floats();
      float* grad_input = nullptr;
      if (!first) {
        DeviceBuffer& out = pending.gradient_out[Key{mb, c}];
        out = DeviceBuffer(device_, chunk.activation_numel() * sizeof(float));
        grad_input = out.floats();
      }
      chunk.backward(mb, grad_output, grad_input, loss_scale);
      if (!last) pending.gradient_in.erase(Key{mb, c});
      break;
    }
    case OpKind::kDpReduceScatter:
    case OpKind::kDpAllReduce:
      if (!pending.sp_synced[c]) {
        chunks_[c]->sync_sequence_parallel_grads();
        pending.sp_synced[c] = true;
      }
      pending.dp[index] = reduce_gradients(c, op.kind == OpKind::kDpAllReduce);
      break;
    case OpKind::kDpAllGather:
      if (params_stale_[c]) pending.dp[index] = gather_parameters(c);
      break;
    case OpKind::kOptimizerStep:
      for (int k = 0; k < V; ++k) {
        if (!pending.sp_synced[k]) {
          chunks_[k]->sync_sequence_parallel_grads();
          pending.sp_synced[k] = true;
        }
      }
      clip_and_step(lr, result);
      break;
  }
}

StepResult PipelineExecutor::step(const Batch& batch, double lr) {
  const model::ParallelConfig& p = options_.parallel;
  const size_t expected = static_cast<size_t>(microbatches_) * p.micro_batch * options_.model.seq_len;
  if (batch.tokens.size() != expected || batch.labels.size() != expected) {
    throw std::invalid_argument("batch has " + std::to_string(batch.tokens.size()) +
                                " tokens, the schedule needs " + std::to_string(expected));
  }
  for (auto& chunk : chunks_) chunk->zero_grad();
  Pending pending;
  pending.sp_synced.assign(chunks_.size(), false);
  StepResult result;
  const std::vector<Op>& ops = schedule_.ranks[groups_.pp_rank()].ops;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) run_op(i, ops[i], batch, lr, pending, result);
  for (auto& req : pending.sends) req->wait();
  for (auto& [index, req] : pending.recvs) req->wait();
  for (auto& [index, req] : pending.dp) req->wait();

  // Mean loss over the global batch, known on the last stage; shared with all.
  float loss = groups_.is_last_stage() ? static_cast<float>(pending.loss_sum / microbatches_) : 0.0f;
  if (p.dp > 1) {
    groups_.dp().all_reduce_sum(&loss, 1);
    loss /= static_cast<float>(p.dp);
  }
  if (p.pp > 1) groups_.pp().broadcast(&loss, 1, p.pp - 1);
  result.loss = loss;
  // GPU: the step's markers become trace records (waits for the device once,
  // after the step, off the critical path).
  if (timer_ != nullptr && observer_ != nullptr) static_cast<TraceObserver&>(*observer_).flush();
  return result;
}

}  // namespace megascale::engine
