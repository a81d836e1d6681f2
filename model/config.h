// model/config.h: the job description every layer shares.
//
// A Scenario is one training job: the transformer (ModelConfig), how it is split
// over GPUs (ParallelConfig), the GPUs and NICs (HardwareConfig), the cluster
// (ClusterConfig), its fabric (NetworkConfig) and which of MegaScale's techniques
// are on (Optimizations).
// It is read from TOML by model/scenario.h and validated there (the parser and
// check_layout()); these structs are plain values with no invariants of their own.
//
// Thread-safety: plain values; copy freely.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

namespace megascale::model {

enum class MlpKind { kGelu, kSwiGlu };
enum class BlockKind { kSequential, kParallel };
enum class NormKind { kLayerNorm, kRmsNorm };
// Learned absolute positions (GPT: a table beside the word embedding, no work in
// the layers) or rotary embeddings (Llama: each layer rotates q and k; RoFormer,
// Su et al. 2021).
enum class PositionKind { kLearned, kRope };
// kSelective: Megatron-LM's (the attention core re-run; Korthikanti et al. 2022);
// kSelectiveOp: torchtitan's op-level selective AC (model/op_recompute.h).
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };
enum class OptimizerKind { kAdam, kLamb };
// The loss over the vocabulary-parallel logits (model/op_cost.h output_operators):
// kUnfused: Megatron's vocab_parallel_cross_entropy as written (fp32 upcast, then
// separate max / subtract / exp / sum / divide passes); kJitFused: Megatron-Core's
// --cross-entropy-loss-fusion (the same steps, fused by its jit in fewer passes);
// kSingleKernel: one kernel that reads the bf16 logits once per pass (flash-attn's
// xentropy, Transformer Engine's fused cross-entropy); kPytorch: PyTorch's
// F.cross_entropy over an fp32 copy of the logits (torchtitan's loss), whose
// log_softmax output is kept for backward beside the copy.
enum class CrossEntropyImpl { kUnfused, kJitFused, kSingleKernel, kPytorch };
// How tp_overlap moves a TP collective beside its GEMM (model/fused_overlap.h):
// kNccl: NCCL collectives on a side stream beside GEMM pieces, each NCCL kernel
// holding one SM per channel (MegaScale section 3.2; Megatron-LM's chunked
// overlap); kUserBuffers: Transformer Engine's userbuffers (Megatron-Core
// --tp-comm-overlap): all-gathers as ring exchanges by the copy engines,
// reduce-scatters and the backward's bulk overlaps on a few SMs.
enum class TpOverlapComm { kNccl, kUserBuffers };
// Which FlashAttention kernel efficient_operators runs where fused_attention is
// off: kFlash2, FlashAttention-2 (CUDA) at the profile's flash_*_efficiency;
// kFlashTriton, FlashAttention's Triton port (flash-attn's flash_attn_triton.py,
// which llm-foundry's attn_impl "triton" copies), slower than FlashAttention-2 by
// the ratios model/hardware.h states.
enum class AttentionKernel { kFlash2, kFlashTriton };
// The dtype data-parallel gradients are reduced in (model/payload.h): kFp32,
// Megatron-LM's main-grad buffer for bf16 training (arguments.py turns
// accumulate_allreduce_grads_in_fp32 on with --bf16), PyTorch FSDP's and
// torchtitan's default reduce_dtype, Llama 3's FSDP (section 3.3.4); kBf16,
// Megatron-Core's DistributedDataParallelConfig.grad_reduce_in_fp32 = False
// (NeMo's optim.grad_sync_dtype = bf16) or FSDP's reduce_dtype = bf16
// (Composer's PURE mixed precision).
enum class GradReduceDtype { kFp32, kBf16 };
// The dtype of the optimizer's state: the master parameter shard and both
// moments (Optimizations::optimizer_state_dtype).
enum class OptimizerStateDtype { kFp32, kBf16 };
// Megatron-Core's precision-aware optimizer (--use-precision-aware-optimizer,
// Transformer Engine's FusedAdam): the dtype each Adam moment is stored in
// (Optimizations::exp_avg_dtype, exp_avg_sq_dtype) and that of the master
// parameters (Optimizations::main_params_dtype).
enum class MomentDtype { kFp32, kBf16, kFp16, kFp8 };
enum class MainParamsDtype { kFp32, kFp16, kFp32Remainders };
// How each micro-batch's weight gradients reach their accumulator
// (Optimizations::grad_accumulation).
enum class GradAccumulation { kFused, kAdd, kAdd16Bit, kCastAdd };
// Transformer Engine's per-tensor FP8 scaling (Optimizations::fp8_recipe):
// kDelayed, DelayedScaling (each tensor's scale from an amax history, one
// all-reduce of the histories per step; NeMo's bf16_with_fp8_mixed);
// kCurrent, Float8CurrentScaling (each tensor's amax computed right before its
// cast; Megatron-Bridge's default "cs", NeMo's fp8_recipe "cs"); kMxfp8,
// MXFP8BlockScaling (one E8M0 scale per 32 consecutive values, OCP MX; the
// Megatron-Bridge tables' "FP8-MX", Megatron-Core --fp8-recipe mxfp8;
// Blackwell data-centre GPUs only, as TE's check_mxfp8_support: compute
// capability 10.x-11.x).
enum class Fp8Recipe { kDelayed, kCurrent, kMxfp8 };
// How the parallel dimensions are laid over the GPUs, fastest first (a GPU's
// number is its server x gpus_per_node + its index there). kTpCpDpPp: Megatron-LM's and
// Megatron-Core's default (rank = tp + cp*TP + dp*TP*CP + pp*TP*CP*DP:
// REFERENCE.md "Megatron-LM behaviour"); kTpCpPpDp: Megatron-Core's
// --use-tp-pp-dp-mapping (parallel_state.py order "tp-cp-ep-pp-dp"), the
// [TP, CP, PP, DP] order of Meta's Llama 3 training (Llama 3 section 3.3.2):
// pipeline neighbours sit next to each other, data-parallel peers far apart.
enum class RankOrder { kTpCpDpPp, kTpCpPpDp };
// How context parallelism moves keys and values (Megatron-Core --cp-comm-type,
// Transformer Engine's attention with CP): kP2p, the ring: cp - 1 exchanges of
// this rank's K/V block, each beside the attention of the block in hand;
// kAllGather, all-gather the whole sequence's K/V before the attention (and
// again in backward, whose K/V gradients are reduce-scattered), not overlapped:
// Llama 3's CP (arXiv 2407.21783 section 3.3.2), Transformer Engine's
// AttnFuncWithCPAndKVAllGather (it saves the local K/V only, so the gathered
// copy is a transient of the layer's attention, not a stash).
enum class CpComm { kP2p, kAllGather };

const char* to_string(MlpKind v);
const char* to_string(BlockKind v);
const char* to_string(NormKind v);
const char* to_string(PositionKind v);
const char* to_string(Recompute v);

// Megatron's default DP bucket: max(40M, 1M x DP) parameters (Megatron-Core
// distributed_data_parallel.py; Megatron-LM's distributed optimizer before it;
// REFERENCE.md). The size Optimizations::dp_bucket_params = -1 stands for.
int64_t megatron_default_dp_bucket_params(int dp);
const char* to_string(OptimizerKind v);
const char* to_string(CrossEntropyImpl v);
const char* to_string(TpOverlapComm v);
const char* to_string(AttentionKernel v);
const char* to_string(GradReduceDtype v);
const char* to_string(OptimizerStateDtype v);
const char* to_string(MomentDtype v);
const char* to_string(MainParamsDtype v);
const char* to_string(GradAccumulation v);
const char* to_string(Fp8Recipe v);
const char* to_string(RankOrder v);
const char* to_string(CpComm v);

// The transformer. Units: counts of elements (not bytes).
struct ModelConfig {
  std::string name = "model";
  int layers = 0;
  int hidden = 0;            // h
  int heads = 0;             // attention (query) heads
  int kv_heads = 0;          // key/value heads (GQA); == heads for MHA
  int seq_len = 0;           // s, tokens per sample
  int vocab = 0;             // V
  int ffn_hidden = 0;        // MLP inner width; 4*h by default
  MlpKind mlp = MlpKind::kGelu;
  BlockKind block = BlockKind::kSequential;
  int attention_window = 0;  // sliding window W (keys i-W..i); 0 = full causal
  // LayerNorm or RMSNorm: timed alike as one fused kernel; under
  // Optimizations::eager_elementwise RMSNorm runs as PyTorch composite ops.
  NormKind norm = NormKind::kLayerNorm;
  PositionKind position = PositionKind::kLearned;
  // Input embedding and output layer share one matrix (GPT, Megatron-LM's
  // default); false: separate matrices (Llama, --untie-embeddings-and-output-weights):
  // no embedding-gradient all-reduce between the first and last stage, and one
  // more vocab x hidden matrix when both sit on one stage.
  bool tie_embeddings = true;
  // Dropout probabilities (Megatron-LM --hidden-dropout after the projection
  // and FC2, --attention-dropout on the softmax output); unset: Megatron-LM's
  // default, kMegatronDefaultDropout. At 0 no mask is kept and no dropout
  // kernel runs (PyTorch's dropout returns its input when p = 0), as in the
  // Llama and MPT recipes.
  std::optional<double> hidden_dropout;
  std::optional<double> attention_dropout;
  bool hidden_dropout_on() const;
  bool attention_dropout_on() const;
  // Keys one query's sequence spans: the full sequence when context parallelism
  // shards it (seq_len is then a CP rank's share, ParallelConfig::cp); 0 =
  // seq_len. Attention FLOPs, the sliding window and the MFU formula use it.
  int attention_span = 0;
  int span() const { return attention_span > 0 ? attention_span : seq_len; }

  int head_dim() const { return hidden / heads; }
  // Number of keys a query attends to, averaged over the sequence (causal mask,
  // optional sliding window). Used for attention FLOPs and bytes.
  double mean_keys_per_query() const;
  // Parameter count: embedding (tied with the output layer), per-layer weights
  // and biases, LayerNorms.
  int64_t parameters() const;
  int64_t parameters_per_layer() const;
};

// How the model is split. Names follow Megatron-LM.
// Context parallelism (Megatron-Core, rank order tp-cp-dp-pp) is folded into the
// data-parallel dimensions when a scenario is read (model/scenario.h): a CP rank
// holds seq_len / cp tokens of every sequence, so the job runs as cp x dp
// gradient ranks (dp, the DP-CP group Megatron reduces over) on sequences of
// seq_len / cp tokens (model.seq_len) whose attention spans the whole sequence
// (model.attention_span), with cp x global_batch such shares per iteration;
// `cp` records the factor for reports and the ring-attention exchange.
struct ParallelConfig {
  int tp = 1;                    // tensor-parallel size
  int cp = 1;                    // context-parallel size (folded into dp, see above)
  CpComm cp_comm = CpComm::kP2p;  // how CP moves keys / values (cp > 1)
  int pp = 1;                    // pipeline-parallel size (stages)
  int vpp = 1;                   // model chunks per stage (1 = plain 1F1B)
  // Layers of the first / last pipeline stage, 0 = an even split (Megatron-Core's
  // --decoder-first/last-pipeline-num-layers; model/pipeline_layout.h).
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  // Megatron-Core's free-form layout (--pipeline-model-parallel-layout,
  // model/megatron_layout.h) as the scenario gave it, and its layers per virtual
  // stage (chunk-major); empty / null = none. Sets vpp; excludes first / last.
  std::string pipeline_layout;
  std::shared_ptr<const std::vector<int>> pipeline_chunk_layers;
  int dp = 1;                    // data-parallel size
  int micro_batch = 1;           // samples per micro-batch
  int global_batch = 1;          // samples per iteration, all replicas
  bool sequence_parallel = false;
  int zero_stage = 1;            // 0-3 (1 = Megatron's distributed optimizer)
  Recompute recompute = Recompute::kNone;
  RankOrder rank_order = RankOrder::kTpCpDpPp;

  int gpus() const { return tp * pp * dp; }  // dp includes cp (folded)
  int replicas() const { return dp / cp; }   // data-parallel replicas as the user counts them
  // Micro-batches each data-parallel replica runs per iteration (M).
  int microbatches() const { return global_batch / (dp * micro_batch); }
};

// Where a rank sits (RankOrder): the GPU of TP rank t, gradient rank d and
// pipeline rank r, and back. d counts the folded cp x dp ranks, CP fastest
// (d % cp is the CP rank, d / cp the replica), in either order.
int gpu_of(const ParallelConfig& p, int t, int d, int r);
struct GridCoord {
  int tp = 0, dp = 0, pp = 0;  // dp: the folded gradient rank, as gpu_of's d
};
GridCoord grid_coord_of(const ParallelConfig& p, int gpu);

struct GpuProfile;  // model/hardware.h

struct HardwareConfig {
  std::string gpu = "A100-SXM4-80GB";  // a shipped profile's name (model/profile.h), or "cpu"
  // A profile file given by `profile = "PATH"` (resolved against the scenario's
  // directory; a --set override against the current one), or "" for the
  // shipped profile `gpu` names. model::hardware_profile() returns the one in use.
  std::string profile;
  std::shared_ptr<const GpuProfile> loaded_profile;
  int gpus_per_node = 8;
  int nics_per_node = 8;
  double nic_gbps = 200.0;             // line rate of one NIC, Gb/s
  // Persistent GPU-to-GPU speed spread of one SKU: each GPU's compute time is
  // its nominal time x exp(sigma x z), z ~ N(0, 1) drawn once per GPU (power
  // management and manufacturing variation). Source: Sinha et al., "Not All
  // GPUs Are Created Equal" (SC'22, arXiv 2208.11035): 8% average performance
  // variation between identical GPUs of a cluster (box-plot whisker to
  // whisker, outliers apart), about 5.4 sigma of a normal -> sigma ~1.5%.
  // Measured on V100 / MI60 clusters; assumed to carry over to A100/H100.
  // Used by the event fidelity (sim/variability.h); 0 = identical GPUs.
  double gpu_speed_sigma = 0.015;
};

struct ClusterConfig {
  int gpus = 0;                         // must equal tp*pp*dp
  std::string topology = "megascale-clos";
};

// The fabric, ECMP and congestion control ([network]). model/ only stores these
// values; network/topology.h builds the fabric from them (its FabricSpec takes
// the same names; the translation lives above both layers). Defaults: the
// MegaScale fabric (REFERENCE.md "MegaScale fabric"). `preset` equals
// cluster.topology; it sets tiers, split_ports and rail_optimized (for_preset),
// and explicit keys override them.
struct NetworkConfig {
  std::string preset = "megascale-clos";  // "megascale-clos" | "rail-2tier" | "fat-tree"
  int switch_radix = 64;                  // ports per switch; Tomahawk-4: 64 x 400G
  double switch_port_gbps = 400.0;
  bool split_ports = true;                // a 400G ToR port carries 2 x 200G NICs
  int tiers = 3;                          // 2 or 3
  // Downlink:uplink port ratio: one value for every tier with uplinks, or one
  // per tier below the top (ToR first). 1.0 = non-blocking.
  std::vector<double> oversubscription = {1.0};
  bool rail_optimized = true;             // NIC r of each server of a group -> ToR r
  // Tomahawk-4 port-to-port latency is unpublished; REFERENCE.md: ~0.6-0.9 us.
  double switch_latency_us = 0.7;
  double link_latency_us = 0.05;          // cable propagation per link (~10 m of fibre)
  // NCCL_IB_QPS_PER_CONNECTION; NCCL's default is 1 (NCCL src/transport/net_ib.cc,
  // NCCL_PARAM(IbQpsPerConn, "IB_QPS_PER_CONNECTION", 1)); at most 128 (NCCL_IB_MAX_QPS).
  int qps_per_connection = 1;
  std::string ecmp_hash = "crc32";        // "crc32" | "murmur3" (network/routing.h)
  // "ecmp": switches hash each flow's 5-tuple (RoCE; NCCL turns adaptive routing
  // off there); "adaptive": InfiniBand adaptive routing, on by default in opensm
  // and in NCCL on InfiniBand ports (network/routing.h).
  std::string routing = "ecmp";
  bool polarization = false;              // the same ECMP hash seed at every tier
  std::string congestion_control = "hybrid";  // "dcqcn" | "swift" | "hybrid"
  // NVLink per GPU per direction, Gb/s; 0 = from the GPU profile
  // (GpuProfile::nvlink_gbs is bidirectional GB/s: nvlink_gbs / 2 * 8).
  double nvlink_gbps = 0.0;

  // The defaults of a preset: "rail-2tier" has 2 tiers; "fat-tree" splits no
  // ports and is not rail-optimised; any other name gives the MegaScale values.
  static NetworkConfig for_preset(const std::string& name) {
    NetworkConfig n;
    n.preset = name;
    if (name == "rail-2tier") n.tiers = 2;
    if (name == "fat-tree") {
      n.split_ports = false;
      n.rail_optimized = false;
    }
    return n;
  }
};

// How Transformer Engine's userbuffers overlap one GEMM's TP collective
// (model/fused_overlap.h: each GEMM's default and the methods TE allows it).
enum class UbMethod { kRingExchange, kPipeline, kBulk };

// One userbuffers GEMM overlap as Transformer Engine's initialize_ub takes it
// (ub_cfgs[name]); an unset field keeps TE's default (model/fused_overlap.h).
struct UbOverlapConfig {
  std::optional<UbMethod> method;     // else the GEMM's default (kUbGemms)
  std::optional<int> num_sm;          // SMs the communication holds (ring exchange: else 1)
  std::optional<int> num_splits;      // pipeline: GEMM pieces
  std::optional<bool> set_sm_margin;  // pipeline, bulk: else Optimizations::tp_overlap_sm_margin;
                                      // ring exchange: else false
  std::optional<bool> aggregate;      // ring exchange: two pieces per GEMM
  bool operator==(const UbOverlapConfig&) const = default;
};

// MegaScale's techniques (NSDI'24 section 3), each switchable. The presets:
// "megatron" = all off, Adam (the paper's Megatron-LM baseline);
// "megascale" = all on.
struct Optimizations {
  std::string preset = "megatron";
  bool tp_overlap = false;           // AG/RS fused with the FFN/attention GEMMs
  TpOverlapComm tp_overlap_comm = TpOverlapComm::kNccl;  // how tp_overlap communicates
  // Userbuffers: Transformer Engine's set_sm_margin for its pipeline and bulk
  // overlaps (those GEMMs launched on the SMs the communication leaves, for
  // their whole run); false: the GEMM starts on every SM and shares them while
  // the communication runs. TE >= 2.0 defaults to true, TE 1.8-1.13 to false.
  bool tp_overlap_sm_margin = false;
  // Userbuffers: per-GEMM settings that replace Transformer Engine's defaults,
  // by TE's GEMM name (initialize_ub's ub_cfgs, e.g. NeMo's tuned
  // ub_cfg_*.yaml files); model/fused_overlap.h resolves them.
  std::map<std::string, UbOverlapConfig> userbuffers;
  bool pp_overlap = false;           // async decoupled send/recv
  bool dp_overlap = false;           // prefetched AG, per-chunk RS
  // Megatron-Core's --overlap-param-gather apart from --overlap-grad-reduce
  // (dp_overlap switches both): false keeps the gradient reduce-scatters
  // overlapped and gathers the parameters after the optimizer step, all at once
  // (DistributedOptimizer.step_with_ready_grads: "launch synchronous
  // all-gathers"). Unset follows dp_overlap; true needs dp_overlap, as
  // Megatron's arguments.py asserts. Use overlaps_param_gather().
  std::optional<bool> dp_overlap_param_gather;
  bool overlaps_param_gather() const { return dp_overlap && dp_overlap_param_gather.value_or(true); }
  bool efficient_operators = false;  // FlashAttention-2, fused LN / GeLU
  // PyTorch eager kernels where a fused one would run (torchtitan without
  // torch.compile): RMSNorm as its composite ops over an fp32 copy, SwiGLU's
  // SiLU and product apart, RoPE as a complex multiply over fp32 copies
  // (model/op_cost.h apply_eager_elementwise). Off in every preset.
  bool eager_elementwise = false;
  bool data_pipeline = false;        // async preprocessing, one loader per node
  // Hopper's fused attention kernel (cuDNN fused attention / FlashAttention-3
  // class, Transformer Engine) where the profile has its efficiencies; else FA2.
  bool fused_attention = false;
  // The FlashAttention kernel when fused_attention is off (needs efficient_operators).
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;
  // DP buckets (Megatron-Core DDP, with dp_overlap): parameters per bucket;
  // 0 = one collective per chunk (MegaScale's per-chunk overlap); -1 = Megatron-
  // Core's default max(40M, 1M x DP) (distributed_data_parallel.py).
  int64_t dp_bucket_params = 0;
  // Transformer Engine's FP8 recipe (delayed scaling, E4M3 forward / E5M2
  // gradients): the transformer layers' linear GEMMs in FP8 at the profile's
  // FP8 rate, plus the casts to FP8 and the per-step amax reduction; attention,
  // norms and the output layer stay BF16. Needs a profile with fp8_peak_tflops.
  bool fp8 = false;
  // Its scaling (model/op_cost.h apply_fp8): delayed, or current (an amax pass
  // before every cast, and an amax all-reduce over TP where SP gathers the tensor).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  // Megatron-Core --fp8-param-gather (NeMo 2.x's fp8_params, which its
  // bf16_with_fp8_mixed sets; Megatron-Bridge's FP8 recipes): with fp8, the
  // distributed optimizer all-gathers the parameters as FP8, one byte each,
  // instead of the profile's param_gather_bytes (model/payload.h), and keeps
  // the layers' weights in FP8 only (model/memory.cc: no BF16 copy).
  bool fp8_param_gather = false;
  // Megatron-LM and Megatron-Core default to the unfused loss (Megatron-Core's
  // TransformerConfig.cross_entropy_loss_fusion = False); NeMo 2.0's GPTConfig and
  // Megatron-Bridge's GPTModelProvider turn the fusion on.
  CrossEntropyImpl cross_entropy = CrossEntropyImpl::kUnfused;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  // fp32 in every preset: Megatron-LM's pretrain_gpt.py reduces bf16 training's
  // gradients in fp32 whether or not it runs Megatron-Core's DDP.
  GradReduceDtype grad_reduce_dtype = GradReduceDtype::kFp32;
  // fp32 in every preset (Megatron-LM's distributed optimizer: fp32 main
  // parameters and moments). bf16: Apex DistributedFusedAdam's dtype (NeMo 1.x
  // optim.dtype), which holds the master parameter shard (store_params) and
  // both moments (exp_avg_shard, exp_avg_sq_shard) in that dtype: 6 B of state
  // a parameter instead of 12, and the step's state traffic halved
  // (model/payload.h optimizer_state_bytes).
  OptimizerStateDtype optimizer_state_dtype = OptimizerStateDtype::kFp32;
  // fp32 in every preset. Megatron-Core's precision-aware optimizer
  // (optimizer_config.py: exp_avg_dtype / exp_avg_sq_dtype fp32, fp16, bf16 or
  // fp8, TE FusedAdam's uint8 with a per-tensor scale; main_params_dtype fp32 or
  // fp16; store_param_remainders, on by default: Transformer Engine keeps only
  // the fp32 master's low 16 bits beside the bf16 parameter, where TE holds the
  // master weights, i.e. without FP8 or with delayed scaling,
  // megatron/core/optimizer/__init__.py). Adam only, as Megatron-Core asserts;
  // not with optimizer_state_dtype = "bf16" (Apex's optimizer, another one).
  // Bytes: model/payload.h optimizer_state_bytes.
  MomentDtype exp_avg_dtype = MomentDtype::kFp32;
  MomentDtype exp_avg_sq_dtype = MomentDtype::kFp32;
  MainParamsDtype main_params_dtype = MainParamsDtype::kFp32;
  // kFused in every preset: Megatron-LM's --gradient-accumulation-fusion (on by
  // default: the weight-gradient GEMM accumulates into the fp32 main_grad, Apex
  // fused_weight_gradient_mlp_cuda; TE's fuse_wgrad_accumulation), nothing
  // outside the GEMM. kAdd: a separate add of every micro-batch's bf16 gradient
  // into the fp32 accumulator (Megatron without the fusion: its DDP hook's
  // param.main_grad.add_(param.grad)). kAdd16Bit: the same add into a 16-bit
  // accumulator, PyTorch autograd's own accumulation into the fp16 parameter's
  // .grad (Megatron-LM before the fusion, Feb 2022, with --fp16 and no fp32
  // accumulation; DeepSpeed's fp16 engine). kCastAdd: DeepSpeed's BF16_Optimizer
  // under pipeline parallelism (runtime/pipe/engine.py _exec_backward_pass ->
  // update_hp_grads: hp_grad.add_(lp.grad.to(fp32)), a cast to an fp32
  // temporary, then the add). Each a memory-bound pass over the chunk's
  // parameters after every micro-batch's backward
  // (model/payload.h grad_accumulation_bytes_per_param).
  GradAccumulation grad_accumulation = GradAccumulation::kFused;

  static Optimizations megatron();
  static Optimizations megascale();
  static Optimizations megatron_core();
};

// A real engine run (`megascale train`, engine/trainer.h): the [train] table.
struct TrainConfig {
  int steps = 10;
  double learning_rate = 1e-3;
  int64_t seed = 1234;               // parameter initialisation and data sampling
  std::string data;                  // MSDS dataset path; "" = built-in synthetic corpus
  std::string work_dir = "/tmp/megascale";  // where the synthetic corpus is written
  std::string checkpoint_dir;        // "" = no checkpoints
  int checkpoint_every = 0;          // steps between checkpoints; 0 = never
  std::string trace;                 // path prefix for PREFIX.json / PREFIX.csv; "" = none
  double weight_decay = 0.01;        // AdamW / LAMB decoupled weight decay
  double max_grad_norm = 1.0;        // global-norm clipping; 0 = off
  double watchdog_s = 300;           // a rank with no finished step for this long stops the job; 0 = off
  // The same before the first step (MPI init, building the model, loading a
  // checkpoint), which at scale takes far longer than a step: 600 s is
  // PyTorch's default ProcessGroupNCCL timeout (10 minutes since
  // pytorch/pytorch PR #110947). 0 = off.
  double startup_watchdog_s = 600;
  std::string device = "cpu";        // engine backend: "cpu" (Eigen + MPI) | "cuda" (CUDA + NCCL)
  std::string precision = "fp32";    // CUDA GEMMs: "fp32" | "bf16" (bf16 inputs, fp32 accumulation)
  // CUDA attention kernel (engine/cuda/device_cuda.h AttentionPath): "auto"
  // (cuBLAS tensor-core GEMMs in bf16, the flash-style kernel in fp32) |
  // "flash" | "cublas" | "flash-tc" (flash style on bf16 tensor cores; needs
  // precision "bf16"). Ignored on the CPU.
  std::string attention = "auto";
};

// One explicit fault at a fixed time ([[failures.faults]]), for reproducible studies.
struct FaultSpec {
  double at_s = 0;                  // wall-clock seconds since the run started
  std::string component = "gpu";    // gpu | node | nic | link | switch | software
  std::string kind = "crash";       // crash | hang | slowdown | node_down | link_flap | traffic_drop
};

// A fault injected into a live run (`megascale run`, robust/fault_injection.h):
// [[inject]] in the scenario or `--inject NAME:rank=R:step=S[:percent=P]`.
inline constexpr std::string_view kInjectFaults[] = {"kill",         "hang",
                                                     "slow",         "traffic_stop",
                                                     "corrupt_checkpoint", "redis_kill",
                                                     "slow_all",     "link_cut",
                                                     "node_down"};
struct InjectSpec {
  // kill | hang | slow | traffic_stop | corrupt_checkpoint | redis_kill |
  // slow_all | link_cut | node_down
  std::string fault = "kill";
  int rank = 0;         // world rank it hits (redis_kill, slow_all: -1, every rank / none)
  int step = 1;         // fires during this 1-based step
  double percent = 0;   // slow, slow_all: extra time per step, % of the rank's compute time
};
// Which faults name a rank (rank=R) and which take percent=P.
inline bool inject_takes_rank(std::string_view fault) { return fault != "redis_kill" && fault != "slow_all"; }
inline bool inject_takes_percent(std::string_view fault) { return fault == "slow" || fault == "slow_all"; }

// Failure processes ([failures]); reliability/failure_model.h turns them into
// Poisson rates. A rate < 0 means "from the preset" (0 when the preset is "none").
// Units: failures per component-hour.
struct FailureConfig {
  std::string preset = "none";      // "none" | "llama3" (REFERENCE.md "Failures")
  double rate_scale = 1.0;          // multiplies every rate (preset or explicit)
  double gpu_per_hour = -1;
  double node_per_hour = -1;
  double nic_per_hour = -1;
  double link_per_hour = -1;
  double switch_per_hour = -1;
  double software_per_hour = -1;    // per GPU-hour (one rank per GPU)
  int links = 0;                    // 0 = 3 per NIC (3-tier CLOS, 1:1)
  int switches = 0;                 // 0 = ToRs NICs/64 + as many aggregation + half as many core
  double hang_fraction = 0.1;       // of gpu/nic/switch/software failures: NCCL hangs
  double slowdown_fraction = 0.05;  // ... silent slowdowns (stragglers)
  double slowdown_factor = 1.1;     // iteration time multiplier of a straggler
  double link_flap_mean_s = 20;     // mean flap length (exponential)
  int nccl_ib_timeout = 20;         // NCCL_IB_TIMEOUT
  int nccl_ib_retry_cnt = 7;        // NCCL_IB_RETRY_CNT
  // Of NIC / link / switch failures: RDMA traffic drops (traffic silently stops,
  // no error). Assumption: no published share; 0.2.
  double traffic_drop_fraction = 0.2;
  // Hardware failures keep arriving while the job is down (detection,
  // diagnosis, restart); false: the failure clock runs only while training.
  bool during_recovery = true;
  std::vector<FaultSpec> faults;
};

// Detection, diagnosis, restart and checkpointing ([recovery]). Presets:
// "megascale" (NSDI'24 section 5) and "baseline" (its recovery fixes off:
// synchronous checkpoint to storage, TCPStore init, every rank reading).
struct RecoveryConfig {
  std::string preset = "megascale";
  // Detection.
  double heartbeat_period_s = 10;
  int heartbeat_misses = 3;
  double error_report_s = 30;            // explicit error -> driver
  double nccl_timeout_s = 1800;          // PyTorch ProcessGroupNCCL default 30 min
  bool traffic_anomaly_detection = true; // RDMA traffic monitor catches hangs
  double anomaly_detect_s = 120;
  double traffic_drop_detect_s = 60;     // RDMA traffic monitor, mean (assumed)
  double slowdown_detect_s = 1800;       // mean; exponential
  // Diagnosis.
  double self_check_s = 300;             // loopback + RNIC + intra-node a2a + ToR all-reduce
  double false_negative = 0.05;          // faulty machine missed -> manual handling
  double false_positive = 0.01;          // a healthy machine evicted too
  double manual_handling_s = 7200;
  int spare_nodes = 32;
  double replacement_s = 60;
  double repair_s = 3 * 86400.0;         // evicted machine back in the spare pool
  // Restart.
  std::string init = "ordered";          // "tcpstore" | "redis" | "ordered"
  double process_start_s = 60;
  std::string checkpoint_load = "one_per_dp_group";  // | "every_rank"
  double storage_read_gbs = 100;         // aggregate GB/s (assumed HDFS cluster)
  // Checkpointing.
  std::string checkpoint = "two_stage";  // | "sync"
  double checkpoint_interval_s = 1800;
  double pcie_gbs = 20;                  // GPU -> pinned host, per GPU (PCIe4 x16 ~25 GB/s peak)
  double storage_write_gbs = 50;         // aggregate GB/s (assumed)
  // A live run (`megascale run`, robust/): what its driver uses besides
  // heartbeat_period_s, heartbeat_misses and spare_nodes above. `megascale plan`
  // ignores these.
  std::string redis;                     // "host:port" of a Redis to use; "" = start a private one
  // What a node is: "local" (executors and ranks are processes of this
  // machine, MPI and Redis over loopback) or "netns" (one Linux network
  // namespace per node, joined by veth pairs to a bridge: robust/netns.h;
  // falls back to local processes, and says so, where namespaces cannot be
  // made).
  std::string nodes = "local";
  // No rank's step advances for this long: a hang (or a silent traffic stop).
  // Assumption: MegaScale publishes no threshold; 60 s keeps a step of a large
  // model (tens of seconds) clear of it. Tiny CPU runs set a few seconds.
  double step_stall_s = 60;
  // A rank whose compute time per step exceeds slow_factor x the median of the
  // other ranks' for slow_steps consecutive steps is reported slow (MegaScale
  // NSDI'24 section 5: stragglers found from per-rank compute time);
  // evicted only with evict_slow. Both figures are assumptions.
  double slow_factor = 1.5;
  int slow_steps = 3;
  bool evict_slow = false;
  int max_restarts = 8;                  // the driver gives up after this many recoveries

  static RecoveryConfig megascale();
  static RecoveryConfig baseline();
};

// A planned run ([run]): its wall-clock length and the Monte Carlo settings.
struct RunConfig {
  double duration_s = 21 * 86400.0;
  double tokens = 0;                 // tokens to train (days_to_finish); 0 = what duration gives
  int runs = 1000;
  int64_t seed = 1;
  double iteration_time_s = 0;       // 0 = model::estimate
};

// "90", "90s", "15m", "2h", "21d" -> seconds; nullopt if malformed, < 0, or
// not finite in seconds ("1e308h").
std::optional<double> parse_duration_s(std::string_view text);

struct Scenario {
  std::string source;   // file the scenario was read from ("<built-in>" otherwise)
  std::string name;
  ModelConfig model;
  ParallelConfig parallel;
  HardwareConfig hardware;
  ClusterConfig cluster;
  NetworkConfig network;
  Optimizations optimizations;
  TrainConfig train;
  FailureConfig failures;
  RecoveryConfig recovery;
  RunConfig run;
  std::vector<InjectSpec> inject;  // [[inject]]: faults for `megascale run`

  // Tokens processed per iteration: global_batch * seq_len.
  int64_t tokens_per_iteration() const {
    return static_cast<int64_t>(parallel.global_batch) * model.seq_len;
  }
};

}  // namespace megascale::model
