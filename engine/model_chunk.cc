// engine/model_chunk.cc: a virtual pipeline stage — flat buffers, per-micro-batch
// stashes, forward and backward through embedding, layers and head.
#include "engine/model_chunk.h"

#include <algorithm>
#include <optional>
#include <string>

#include "model/pipeline_layout.h"

namespace megascale::engine {

ChunkConfig ChunkConfig::whole_model(const model::ModelConfig& m, int micro_batch, int tp,
                                     bool sequence_parallel, uint64_t seed) {
  ChunkConfig c;
  c.model = m;
  c.micro_batch = micro_batch;
  c.tp = tp;
  c.sequence_parallel = sequence_parallel;
  c.first_layer = 0;
  c.num_layers = m.layers;
  c.has_embedding = true;
  c.has_head = true;
  c.chunk_id = 0;
  c.seed = seed;
  return c;
}

ChunkConfig ChunkConfig::for_stage(const model::ModelConfig& m, const model::ParallelConfig& p,
                                   int pp_rank, int virtual_chunk, uint64_t seed) {
  const int P = p.pp, V = p.vpp;
  ENGINE_CHECK(P >= 1 && V >= 1, "pp and vpp must be >= 1");
  ENGINE_CHECK(0 <= pp_rank && pp_rank < P, "pp_rank out of range");
  ENGINE_CHECK(0 <= virtual_chunk && virtual_chunk < V, "virtual_chunk out of range");
  const std::optional<std::string> bad =
      model::pipeline_layout_error(m, p);
  ENGINE_CHECK(!bad, "pipeline layout: " + bad.value_or(""));
  const model::PipelineLayout layout(m, p);
  ChunkConfig c;
  c.model = m;
  c.micro_batch = p.micro_batch;
  c.tp = p.tp;
  c.sequence_parallel = p.sequence_parallel;
  c.num_layers = layout.chunk_layers(pp_rank, virtual_chunk);
  c.first_layer = layout.first_layer(pp_rank, virtual_chunk);
  c.has_embedding = pp_rank == 0 && virtual_chunk == 0;
  c.has_head = pp_rank == P - 1 && virtual_chunk == V - 1;
  c.chunk_id = virtual_chunk * P + pp_rank;
  c.seed = seed;
  return c;
}

ModelChunk::ModelChunk(const ChunkConfig& config, Device& device, Comm* tp_comm,
                       OpObserver* observer)
    : cfg_(config), device_(&device), tp_(tp_comm), observer_(observer) {
  cfg_.model = with_defaults(cfg_.model);
  const model::ModelConfig& m = cfg_.model;
  d_ = ModelDims::make(m, cfg_.micro_batch, cfg_.tp, cfg_.sequence_parallel);
  ENGINE_CHECK(tp_comm == nullptr ? cfg_.tp == 1 : tp_comm->size() == cfg_.tp,
               "TP communicator size differs from config.tp = " + std::to_string(cfg_.tp));
  ENGINE_CHECK(cfg_.num_layers >= 0 && cfg_.first_layer >= 0 &&
                   cfg_.first_layer + cfg_.num_layers <= m.layers,
               "layers [" + std::to_string(cfg_.first_layer) + ", " +
                   std::to_string(cfg_.first_layer + cfg_.num_layers) + ") outside the model's " +
                   std::to_string(m.layers));
  if (cfg_.tp == 1) tp_ = nullptr;

  // The parameter layout: embedding, layers, head.
  std::vector<TensorSpec> specs;
  if (cfg_.has_embedding) specs = embedding_tensor_specs(m);
  for (int l = cfg_.first_layer; l < cfg_.first_layer + cfg_.num_layers; ++l) {
    for (TensorSpec& s : layer_tensor_specs(m, l)) specs.push_back(std::move(s));
  }
  if (cfg_.has_head) {
    for (TensorSpec& s : head_tensor_specs(m)) specs.push_back(std::move(s));
  }
  for (TensorSpec& s : specs) {
    ParamTensor t;
    t.shape = s.local_shape(cfg_.tp);
    t.numel = static_cast<size_t>(shape_numel(t.shape));
    t.offset = num_params_;
    t.spec = std::move(s);
    num_params_ += t.numel;
    if (d_.sp && t.spec.sequence_parallel_grad) sp_tensors_.push_back(tensors_.size());
    tensors_.push_back(std::move(t));
  }
  ENGINE_CHECK(cfg_.pad_to_multiple >= 1, "pad_to_multiple must be >= 1");
  const size_t pad = static_cast<size_t>(cfg_.pad_to_multiple);
  buffer_floats_ = (num_params_ + pad - 1) / pad * pad;
  params_ = DeviceBuffer(device, buffer_floats_ * sizeof(float));
  grads_ = DeviceBuffer(device, buffer_floats_ * sizeof(float));

  // Pointers into the flat buffers by name.
  auto ptr = [&](const DeviceBuffer& buf, const std::string& name) -> float* {
    const ParamTensor* t = find(name);
    return t == nullptr ? nullptr : buf.floats() + t->offset;
  };
  auto layer_ptrs = [&](const DeviceBuffer& buf, int l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const bool parallel = d_.parallel_block;
    LayerWeights w;
    w.ln1_w = ptr(buf, p + (parallel ? "ln_w" : "ln1_w"));
    w.ln1_b = ptr(buf, p + (parallel ? "ln_b" : "ln1_b"));
    w.qkv_w = ptr(buf, p + "qkv_w");
    w.qkv_b = ptr(buf, p + "qkv_b");
    w.proj_w = ptr(buf, p + "proj_w");
    w.proj_b = ptr(buf, p + "proj_b");
    w.ln2_w = ptr(buf, p + "ln2_w");
    w.ln2_b = ptr(buf, p + "ln2_b");
    w.fc1_w = ptr(buf, p + "fc1_w");
    w.fc1_b = ptr(buf, p + "fc1_b");
    w.fc2_w = ptr(buf, p + "fc2_w");
    w.fc2_b = ptr(buf, p + "fc2_b");
    return w;
  };

  // Stash layout and the scratch size.
  BufferLayout stash;
  size_t scratch = 0;
  if (cfg_.has_embedding) {
    embedding_.emplace(d_, -1);
    emb_w_ = {ptr(params_, "embedding.wte"), ptr(params_, "embedding.wpe")};
    emb_g_ = {ptr(grads_, "embedding.wte"), ptr(grads_, "embedding.wpe")};
    tokens_offset_ = stash.take(static_cast<size_t>(d_.N()));  // int32
    scratch = std::max(scratch, embedding_->scratch_floats());
  }
  for (int l = cfg_.first_layer; l < cfg_.first_layer + cfg_.num_layers; ++l) {
    layers_.emplace_back(d_, l);
    layer_w_.push_back(layer_ptrs(params_, l));
    layer_g_.push_back(layer_ptrs(grads_, l));
    layer_offsets_.push_back(stash.take(layers_.back().stash_floats()));
    scratch = std::max(scratch, layers_.back().scratch_floats());
  }
  if (cfg_.has_head) {
    head_.emplace(d_, m.layers);
    head_w_ = {ptr(params_, "head.ln_f_w"), ptr(params_, "head.ln_f_b"),
               ptr(params_, "head.out_w")};
    head_g_ = {ptr(grads_, "head.ln_f_w"), ptr(grads_, "head.ln_f_b"),
               ptr(grads_, "head.out_w")};
    head_offset_ = stash.take(head_->stash_floats());
    scratch = std::max(scratch, head_->scratch_floats());
  }
  stash_floats_ = stash.floats;
  BufferLayout sc;
  sc.take(scratch);
  dact_offset_ = sc.take(activation_numel());
  scratch_ = DeviceBuffer(device, sc.floats * sizeof(float));

  init_parameters(cfg_.seed);
}

ModelChunk::~ModelChunk() = default;

const ParamTensor* ModelChunk::find(const std::string& name) const {
  for (const ParamTensor& t : tensors_) {
    if (t.spec.name == name) return &t;
  }
  return nullptr;
}

void ModelChunk::init_parameters(uint64_t seed) {
  const int tp_rank = tp_ == nullptr ? 0 : tp_->rank();
  for (const ParamTensor& t : tensors_) {
    const std::vector<float> values = init_shard(t.spec, seed, tp_rank, cfg_.tp);
    device_->copy_to_device(params() + t.offset, values.data(), t.numel * sizeof(float));
  }
}

void ModelChunk::zero_grad() { device_->fill_zero(grads(), buffer_floats_ * sizeof(float)); }

void ModelChunk::sync_sequence_parallel_grads() {
  if (!d_.sp || sp_tensors_.empty()) return;
  size_t total = 0;
  for (size_t i : sp_tensors_) total += tensors_[i].numel;
  DeviceBuffer packed(*device_, total * sizeof(float));
  size_t at = 0;
  for (size_t i : sp_tensors_) {
    const ParamTensor& t = tensors_[i];
    device_->copy(packed.floats() + at, grads() + t.offset, t.numel * sizeof(float));
    at += t.numel;
  }
  tp_->all_reduce_sum(packed.floats(), total);
  at = 0;
  for (size_t i : sp_tensors_) {
    const ParamTensor& t = tensors_[i];
    device_->copy(grads() + t.offset, packed.floats() + at, t.numel * sizeof(float));
    at += t.numel;
  }
}

LayerContext ModelChunk::context(int microbatch) const {
  LayerContext ctx;
  ctx.device = device_;
  ctx.tp = tp_;
  ctx.observer = observer_;
  ctx.microbatch = microbatch;
  ctx.chunk = cfg_.chunk_id;
  ctx.tp_overlap = cfg_.tp_overlap && d_.sp;
  return ctx;
}

DeviceBuffer ModelChunk::take_stash() {
  if (!free_.empty()) {
    DeviceBuffer b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  return DeviceBuffer(*device_, std::max<size_t>(stash_floats_, 1) * sizeof(float));
}

void ModelChunk::upload_transposed(const int32_t* bt, int32_t* tb_device, const char* what) const {
  ENGINE_CHECK(bt != nullptr, std::string(what) + " required by this chunk");
  const int B = d_.B, T = d_.T;
  std::vector<int32_t> tb(static_cast<size_t>(B) * T);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const int32_t v = bt[static_cast<size_t>(b) * T + t];
      ENGINE_CHECK(v >= 0 && v < d_.V, std::string(what) + " id " + std::to_string(v) +
                                           " outside the vocabulary of " + std::to_string(d_.V));
      tb[static_cast<size_t>(t) * B + b] = v;
    }
  }
  device_->copy_to_device(tb_device, tb.data(), tb.size() * sizeof(int32_t));
}

float ModelChunk::forward(int microbatch, const float* input, const MicroBatchData& data,
                          float* output) {
  ENGINE_CHECK(active_.count(microbatch) == 0,
               "micro-batch " + std::to_string(microbatch) + " already in flight");
  DeviceBuffer buf = take_stash();
  float* base = buf.floats();
  const LayerContext ctx = context(microbatch);
  const size_t act_bytes = activation_numel() * sizeof(float);

  // Where each stage writes its output: the next layer's input, the head's
  // input, or the caller's buffer.
  std::vector<TransformerLayer::Stash> st;
  for (size_t i = 0; i < layers_.size(); ++i) st.push_back(layers_[i].stash_at(base + layer_offsets_[i]));
  OutputHead::Stash hs;
  if (head_) hs = head_->stash_at(base + head_offset_);
  auto target = [&](size_t next_layer) -> float* {
    if (next_layer < layers_.size()) return st[next_layer].x;
    if (head_) return hs.x;
    return output;
  };
  float* first = target(0);
  ENGINE_CHECK(first != nullptr, "output buffer required by a chunk without the head");
  if (embedding_) {
    int32_t* tokens = reinterpret_cast<int32_t*>(base + tokens_offset_);
    upload_transposed(data.tokens, tokens, "tokens");
    embedding_->forward(ctx, emb_w_, tokens, scratch_.floats(), first);
  } else {
    ENGINE_CHECK(input != nullptr, "input activation required by a chunk without the embedding");
    device_->copy(first, input, act_bytes);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    float* out = target(i + 1);
    ENGINE_CHECK(out != nullptr, "output buffer required by a chunk without the head");
    layers_[i].forward(ctx, layer_w_[i], st[i], scratch_.floats(), out);
  }
  float loss = 0.0f;
  if (head_) {
    upload_transposed(data.labels, hs.targets, "labels");
    loss = head_->forward(ctx, head_w_, hs, scratch_.floats());
  }
  active_.emplace(microbatch, std::move(buf));
  return loss;
}

void ModelChunk::backward(int microbatch, const float* grad_output, float* grad_input,
                          float loss_scale) {
  auto it = active_.find(microbatch);
  ENGINE_CHECK(it != active_.end(),
               "backward of micro-batch " + std::to_string(microbatch) + " without its forward");
  float* base = it->second.floats();
  const LayerContext ctx = context(microbatch);
  const size_t act_bytes = activation_numel() * sizeof(float);
  float* dact = scratch_.floats() + dact_offset_;  // (Tl, B, C)

  if (head_) {
    head_->backward(ctx, head_w_, head_g_, head_->stash_at(base + head_offset_),
                    scratch_.floats(), loss_scale, dact);
  } else {
    ENGINE_CHECK(grad_output != nullptr, "grad_output required by a chunk without the head");
    device_->copy(dact, grad_output, act_bytes);
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    layers_[i].backward(ctx, layer_w_[i], layer_g_[i],
                        layers_[i].stash_at(base + layer_offsets_[i]), scratch_.floats(), dact,
                        dact);
  }
  if (embedding_) {
    const int32_t* tokens = reinterpret_cast<const int32_t*>(base + tokens_offset_);
    embedding_->backward(ctx, emb_g_, tokens, scratch_.floats(), dact);
  } else {
    ENGINE_CHECK(grad_input != nullptr, "grad_input required by a chunk without the embedding");
    device_->copy(grad_input, dact, act_bytes);
  }
  free_.push_back(std::move(it->second));
  active_.erase(it);
}

}  // namespace megascale::engine
