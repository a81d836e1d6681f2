// engine/model_chunk.h: one virtual pipeline stage of the GPT model on one
// tensor-parallel rank — the unit the schedule executor runs forward and
// backward per micro-batch.
//
// defines: ChunkConfig, ParamTensor, MicroBatchData, ModelChunk.
//
// A chunk holds a contiguous range of layers [first_layer, first_layer + n),
// plus the embedding if it is the model's first virtual stage and the final
// LayerNorm, output layer and loss if it is the last (Megatron-LM's interleaved
// layout: ChunkConfig::for_stage).
//
// Memory (llm.c): ONE flat fp32 buffer of all the chunk's parameters and ONE
// flat buffer of their gradients, same layout; tensors() names every tensor with
// its offset, local (sharded) shape and full TensorSpec (engine/param_init.h), in
// the order embedding, layers ascending, head. Every element belongs to exactly
// one tensor, except an optional zero tail (ChunkConfig::pad_to_multiple). The
// optimizer, the DP reduce-scatter and the checkpoint work on the flat buffers
// directly (TensorSpec::tp_sharded() / weight_decay() /
// sequence_parallel_grad say how each tensor is treated).
//
// Initialisation is deterministic and independent of the parallel layout: each
// tensor shard is drawn from the counter-based generator of param_init.h, so a
// TP=2 / PP=2 chunk holds exact slices of the TP=1 / PP=1 model.
//
// Driving it (one pipeline rank, Schedule IR order, any number of micro-batches
// in flight):
//   float* x_in  = ...;  // (Tl, B, C) received from the previous stage
//   float* x_out = ...;  // (Tl, B, C) to send to the next stage
//   chunk.zero_grad();                                      // once per step
//   for each op of the rank's Schedule IR list:
//     forward(mb):  loss = chunk.forward(mb, x_in, {tokens, labels}, x_out);
//     backward(mb): chunk.backward(mb, dy_in, dx_out, loss_scale);
//   chunk.sync_sequence_parallel_grads();                   // once, after the last backward
//   (then DP reduction of grads(), optimizer on params())
// Tl = T / tp with sequence parallelism (the rank's shard of the sequence, as
// Megatron-LM passes it between stages), T otherwise; activation_numel() =
// Tl * B * C. The first stage ignores x_in and reads tokens; the last stage
// reads labels, returns the micro-batch's mean loss and leaves x_out alone;
// its backward ignores dy_in and starts from d loss = loss_scale (pass 1/M for
// the mean over M micro-batches). The first stage's backward leaves dx_out alone
// (it may be null). forward() copies x_in into the micro-batch's stash, so the
// caller may reuse x_in at once, and writes x_out last (nothing of x_out is kept);
// backward() likewise reads dy_in at once and writes dx_out last. The stash
// (stash_bytes_per_microbatch()) returns to a pool at backward().
//
// Every operator and TP collective is reported to the OpObserver (engine/
// layers.h) with the micro-batch id and chunk_id, layer = global layer index
// (-1 embedding, ModelConfig::layers head).
//
// Thread-safety: one thread at a time (the rank's thread); the TP Comm is used
// inside forward/backward/sync and must be a communicator of the TP group only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm.h"
#include "engine/device.h"
#include "engine/embedding.h"
#include "engine/layers.h"
#include "engine/output_head.h"
#include "engine/param_init.h"
#include "engine/tensor.h"
#include "engine/transformer_layer.h"
#include "model/config.h"

namespace megascale::engine {

struct ChunkConfig {
  model::ModelConfig model;
  int micro_batch = 1;             // B
  int tp = 1;                      // tensor-parallel size (== the TP Comm's size)
  bool sequence_parallel = false;  // ignored when tp == 1
  // [optimizations] tp_overlap: the layers' SP all-gathers / reduce-scatters
  // fused with their GEMMs (engine/layers.h, tp_gather_gemm). Only with
  // sequence parallelism and tp > 1; bit-identical results either way.
  bool tp_overlap = false;
  int first_layer = 0;
  int num_layers = 0;
  bool has_embedding = false;
  bool has_head = false;
  int chunk_id = 0;                // virtual stage index in the model (events)
  uint64_t seed = 1234;            // parameter initialisation
  // The flat buffers are allocated as a multiple of this many floats (e.g. the
  // DP size, for a ZeRO-sharded optimizer); the padding is zero and belongs to
  // no tensor.
  int pad_to_multiple = 1;

  // The whole model in one chunk (PP = 1).
  static ChunkConfig whole_model(const model::ModelConfig& m, int micro_batch, int tp = 1,
                                 bool sequence_parallel = false, uint64_t seed = 1234);
  // Chunk `virtual_chunk` (0..vpp-1) of pipeline rank `pp_rank` (0..pp-1) under
  // Megatron-LM's interleaved layout (REFERENCE.md): layers
  // [c*L/V + r*L/(P*V), + L/(P*V)); embedding on (r 0, c 0), head on (P-1, V-1);
  // chunk_id = c*P + r. REQUIRES: L % (P*V) == 0.
  static ChunkConfig for_stage(const model::ModelConfig& m, const model::ParallelConfig& p,
                               int pp_rank, int virtual_chunk, uint64_t seed = 1234);
};

// One parameter tensor of a chunk.
struct ParamTensor {
  TensorSpec spec;  // name, full shape, TP sharding, init (engine/param_init.h)
  Shape shape;      // this rank's shard
  size_t offset = 0;  // floats from params() / grads()
  size_t numel = 0;
};

// Host inputs of one micro-batch, (B, T) row-major int32 (the data loader's order).
struct MicroBatchData {
  const int32_t* tokens = nullptr;  // REQUIRED on the first stage
  const int32_t* labels = nullptr;  // REQUIRED on the last stage
};

class ModelChunk {
 public:
  // `tp_comm`: the TP group (size == config.tp; may be null when tp == 1).
  // Parameters are initialised from config.seed; gradients are zero.
  ModelChunk(const ChunkConfig& config, Device& device, Comm* tp_comm,
             OpObserver* observer = nullptr);
  ~ModelChunk();
  ModelChunk(const ModelChunk&) = delete;
  ModelChunk& operator=(const ModelChunk&) = delete;

  const ChunkConfig& config() const { return cfg_; }
  const ModelDims& dims() const { return d_; }
  bool has_embedding() const { return cfg_.has_embedding; }
  bool has_head() const { return cfg_.has_head; }
  void set_observer(OpObserver* observer) { observer_ = observer; }

  // ---- parameters and gradients ----------------------------------------------
  float* params() const { return params_.floats(); }  // (num_params())
  float* grads() const { return grads_.floats(); }    // (num_params())
  size_t num_params() const { return num_params_; }
  // Floats allocated in params() / grads(): num_params() rounded up to
  // config.pad_to_multiple.
  size_t buffer_floats() const { return buffer_floats_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // nullptr when the chunk has no tensor of that name.
  const ParamTensor* find(const std::string& name) const;
  Tensor param(const ParamTensor& t) const { return Tensor::view(params() + t.offset, t.shape); }
  Tensor grad(const ParamTensor& t) const { return Tensor::view(grads() + t.offset, t.shape); }
  // Re-draws every parameter from `seed` (as the constructor does).
  void init_parameters(uint64_t seed);
  void zero_grad();
  // With sequence parallelism, sums over the TP group the gradients of the
  // tensors replicated across TP but computed from sequence shards
  // (TensorSpec::sequence_parallel_grad): one all-reduce of them packed
  // together. Call once per step after the last backward; no-op without SP.
  void sync_sequence_parallel_grads();

  // ---- forward / backward ------------------------------------------------------
  size_t activation_numel() const { return static_cast<size_t>(d_.Nl()) * d_.C; }
  // See the header comment. REQUIRES: microbatch not already in flight.
  float forward(int microbatch, const float* input, const MicroBatchData& data, float* output);
  // REQUIRES: forward(microbatch) done and not yet backward.
  void backward(int microbatch, const float* grad_output, float* grad_input,
                float loss_scale = 1.0f);
  // Micro-batches forwarded but not yet backwarded (each holds a stash).
  int in_flight() const { return static_cast<int>(active_.size()); }
  size_t stash_bytes_per_microbatch() const { return stash_floats_ * sizeof(float); }

 private:
  LayerContext context(int microbatch) const;
  DeviceBuffer take_stash();
  // Host (B, T) -> device (T, B).
  void upload_transposed(const int32_t* bt, int32_t* tb_device, const char* what) const;

  ChunkConfig cfg_;
  ModelDims d_;
  Device* device_;
  Comm* tp_;
  OpObserver* observer_;

  std::vector<ParamTensor> tensors_;
  size_t num_params_ = 0;
  size_t buffer_floats_ = 0;
  DeviceBuffer params_, grads_;

  std::vector<TransformerLayer> layers_;
  std::vector<LayerWeights> layer_w_, layer_g_;
  std::optional<Embedding> embedding_;
  EmbeddingWeights emb_w_, emb_g_;
  std::optional<OutputHead> head_;
  HeadWeights head_w_, head_g_;

  // Stash of one micro-batch: [tokens (N int32)] [layer 0] ... [layer n-1] [head].
  size_t stash_floats_ = 0;
  size_t tokens_offset_ = 0;
  std::vector<size_t> layer_offsets_;
  size_t head_offset_ = 0;
  std::map<int, DeviceBuffer> active_;
  std::vector<DeviceBuffer> free_;

  // Scratch shared by all calls: layer/head/embedding temporaries + the
  // running activation gradient (Tl, B, C).
  DeviceBuffer scratch_;
  size_t dact_offset_ = 0;
  std::vector<size_t> sp_tensors_;  // indices into tensors_ of sequence_parallel_grad tensors
};

}  // namespace megascale::engine
