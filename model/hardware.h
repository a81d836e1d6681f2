// model/hardware.h: device profiles and the kernel-time models built on them.
//
// A GpuProfile holds spec-sheet figures (peak, memory capacity and bandwidth,
// NVLink, SM count), microbenchmark figures (achievable GEMM and memory
// fractions, NCCL bus bandwidths, kernel launch cost) and, when measured,
// tables (model/profile_tables.h). Profiles are data files, each value with its
// provenance (calibrate/profiles/*.toml, read by model/profile.h). Nothing in
// the shipped GPU profiles is fitted to the MegaScale MFU figures.
//
// On top of a profile:
//   gemm_time_s    - shape-dependent GEMM time: the measured GEMM table when the
//                    profile has one, else a roofline (compute vs memory) with
//                    tile quantisation, wave quantisation over the SMs, a short-K
//                    pipeline penalty, the profile's per-call gemm_overhead_us
//                    and a launch floor;
//   memory_time_s  - a bandwidth-bound kernel (elementwise, LayerNorm, softmax);
//   flash_attention_time_s - FlashAttention-2's achieved fraction of peak
//                    (or Hopper's fused kernel's, or FlashAttention's Triton
//                    port's: FlashKernel).
//
// Thread-safety: profiles are immutable after static initialisation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/profile_tables.h"

namespace megascale::model {

// Where one value of a profile comes from (model/profile.h: every value of a
// profile file carries one).
struct Provenance {
  std::string source;             // "spec" | "measured" | "fitted" | "assumption"
  std::string ref;                // datasheet, microbenchmark, fitting method, or why assumed
  std::string host, date;         // measured: where and when
  std::vector<std::string> runs;  // fitted: the named runs it was fitted on
  double loo_error = -1;          // fitted: leave-one-out mean relative error
};

// Provenance by [values] key, shared between copies of a profile until one of
// them writes (the search copies profiles per estimate: a map of strings per
// copy doubled its cost). Reads as a const std::map; operator[] detaches.
class ProvenanceMap {
 public:
  using Map = std::map<std::string, Provenance>;
  Provenance& operator[](const std::string& key) {
    detach();
    return (*map_)[key];
  }
  const Provenance& at(const std::string& key) const { return map_->at(key); }
  size_t count(const std::string& key) const { return map_->count(key); }
  Map::const_iterator find(const std::string& key) const { return map_->find(key); }
  Map::const_iterator begin() const { return map_->begin(); }
  Map::const_iterator end() const { return map_->end(); }
  bool empty() const { return map_->empty(); }

 private:
  static const std::shared_ptr<Map>& none() {
    static const std::shared_ptr<Map> empty = std::make_shared<Map>();
    return empty;
  }
  void detach() {
    if (map_ == none() || map_.use_count() > 1) map_ = std::make_shared<Map>(*map_);
  }
  std::shared_ptr<Map> map_ = none();
};

// One device: a GPU SKU, or the CPU the engine runs on (kind "cpu", one core
// per rank). Loaded from a profile file (model/profile.h); the kernel-time
// models below use its measured tables when it has them.
struct GpuProfile {
  std::string name;
  std::string kind = "gpu";            // "gpu" | "cpu"
  std::string dtype = "bf16";          // the dtype peak and tables refer to
  std::string description;
  std::string source_file;             // the profile file it was read from
  double peak_tflops = 0;              // dense tensor-core bf16 (GPU), SGEMM per core (CPU)
  double memory_bytes = 0;             // capacity per device (CPU: per rank)
  double memory_gbs = 0;               // memory bandwidth, GB/s (1e9 B/s)
  double memory_efficiency = 0;        // achievable fraction of memory_gbs (STREAM-like)
  double nvlink_gbs = 0;               // NVLink per GPU, bidirectional GB/s, spec sheet
  double nvlink_busbw_gbs = 0;         // NCCL ring busbw inside one node (CPU: MPI shared memory)
  int sm_count = 0;                    // streaming multiprocessors (CPU: 1 per rank)
  double max_gemm_efficiency = 0;      // large GEMM fraction of peak
  double flash_fwd_efficiency = 0;     // FlashAttention-2 forward fraction of peak
  double flash_bwd_efficiency = 0;     // FlashAttention-2 backward fraction of peak
  double fused_attention_fwd_efficiency = 0;  // cuDNN fused / FA3-class forward (0: none, use FA2)
  double fused_attention_bwd_efficiency = 0;  // cuDNN fused / FA3-class backward (0: none)
  double fp8_peak_tflops = 0;          // dense FP8 tensor-core peak (0: no FP8)
  double fp8_gemm_efficiency = 0;      // large FP8 GEMM fraction of fp8_peak_tflops

  // FP8 over BF16 GEMM rate: (fp8 peak x efficiency) / (bf16 peak x efficiency);
  // 0 without FP8.
  double fp8_gemm_speedup() const {
    return fp8_peak_tflops > 0 && fp8_gemm_efficiency > 0 && peak_tflops > 0 && max_gemm_efficiency > 0
               ? fp8_peak_tflops * fp8_gemm_efficiency / (peak_tflops * max_gemm_efficiency)
               : 0.0;
  }
  // Whether the GPU's FP8 GEMMs take either operand layout, so Transformer
  // Engine makes no FP8 transposes for the backward (its Float8Quantizer
  // creates the column-wise copy only where !nvte_is_non_tn_fp8_gemm_supported():
  // compute capability 10.x-11.x and 13.0+, i.e. Blackwell data-centre parts;
  // Hopper's FP8 GEMMs are TN only).
  bool fp8_gemm_any_layout() const {
    return (compute_capability >= 100 && compute_capability < 120) || compute_capability >= 130;
  }
  double kernel_launch_us = 0;         // minimum time of one kernel (launch + drain)
  // GPU-side time every GEMM call adds to its roofline time (grid launch, the
  // first wave's fill and the last one's drain, the epilogue): fitted on a
  // measured GEMM table (calibrate/gemm_overhead_fit.h); 0: the launch floor
  // only.
  double gemm_overhead_us = 0;
  int default_nics_per_node = 0;
  double default_nic_gbps = 0;         // Gb/s line rate
  double pcie_gbps = 0;                // GPU <-> NIC PCIe x16, Gb/s per direction, spec sheet
  int nccl_nvlink_ctas = 0;            // SMs an NCCL collective inside the node holds (channels)
  int compute_capability = 0;          // e.g. 80 (A100), 90 (H100): NCCL's tuning rows (0: unknown)
  int host_cpu_amd = 0;                // 1: the server's host CPU is AMD (NCCL's LL cap, net overhead)
  double nvls_busbw_gbs = 0;           // NCCL NVLS all-reduce busbw in a node (0: no NVLink SHARP)
  int cores = 0;                       // CPU: ranks that run at once without sharing a core
  double activation_bytes = 2;         // bytes per activation element (bf16; fp32 on the CPU engine)
  double param_gather_bytes = 2;       // bytes per parameter in the ZeRO all-gather
  double data_load_s_per_sample = 1e-3;  // synchronous loading per sample (data pipeline off)
  double step_overhead_s = 0;          // host work per iteration outside the ops
  // Time per activation element (token x hidden / TP) of one layer's forward
  // and backward pass together that the kernel model leaves out, ns: a third
  // charged in the forward (again in a full recomputation), two thirds in the
  // backward (model/engine_ops.h job_layer_operators). Nothing measures it;
  // `calibrate fit --params element_overhead` fits it on named runs. 0: none.
  double element_overhead_ns = 0;
  // The fraction by which a TP all-gather or reduce-scatter inside a node (the
  // sequence-parallel collectives) runs longer than the ring formula at
  // nvlink_busbw_gbs says, on its bandwidth term; all-reduces keep the
  // formula. Korthikanti et al. 2022 (arXiv 2205.05198) section 6.2: "the
  // execution of reduce-scatter and all-gather combined is slower than an
  // all-reduce alone". Nothing measures it on its own; `calibrate fit --layers
  // FILE --params tp_gather_scatter` fits it on published per-layer times
  // (calibrate/layer_fit.h). 0: none.
  double tp_gather_scatter_extra = 0;
  double op_gap_us = 0;                // host time between two compute ops
  // 1: the tables were measured on the megascale engine's own device (a GPU
  // profile from `calibrate micro --device cuda SCENARIO`), so a job on it is
  // timed by the engine's calls (model/engine_ops.h), as on a cpu profile,
  // not by Megatron-LM's kernels. 0: a GPU running Megatron-LM's kernels.
  double engine_calls = 0;
  // 1: the engine's device runs a linear layer's bias inside the GEMM
  // (matmul_bias) and the residual add with its biases as one kernel
  // (bias_residual_add), so the engine's calls have no separate forward
  // bias_add (model/engine_ops.h). 0: separate kernels, as the CPU device.
  double fused_bias = 0;
  double cache_bytes = 0;              // CPU: last-level cache of one machine (0: unknown)
  // Not from the file: ranks of one machine a job keeps busy at once, which
  // selects the measured tables' `ranks` (model/engine_ops.h job_profile),
  // and the factor by which its ranks share cores (ranks per machine / cores
  // when there are more ranks than cores, else 1) that stretches compute.
  int busy_ranks = 1;
  double time_share = 1;
  // ... and the fraction of a kernel's memory-resident operands that miss the
  // cache (1: all; model/engine_ops.h cold_fraction), which blends the cold and
  // warm measurements of the GEMM and attention tables.
  double cold_fraction = 1;
  ProvenanceMap provenance;            // by [values] key and "tables.X"
  std::shared_ptr<const ProfileTables> tables;   // measured tables; null: none

  bool is_cpu() const { return kind == "cpu"; }
  // The job is the megascale engine (its calls, fp32 stash, whole-tensor
  // p2p, separate output layer): a cpu profile, or a GPU one measured on it.
  bool models_engine() const { return is_cpu() || engine_calls > 0; }
  // The measured tables, or nullptr.
  const ProfileTables* measured() const { return tables.get(); }
};

// The profile with this name; throws std::invalid_argument naming the known ones.
const GpuProfile& gpu_profile(const std::string& name);
// Names of all built-in profiles (A100-SXM4-40GB, A100-SXM4-80GB, H100-SXM5-80GB,
// H200-SXM-141GB).
std::vector<std::string> gpu_profile_names();

// Achievable NCCL bus bandwidth of one NIC of `nic_gbps` line rate, GB/s:
// line rate / 8 times the protocol efficiency measured by nccl-tests (REFERENCE.md:
// ~24 GB/s per 200G HDR NIC, 46-49 GB/s per 400G NDR NIC).
double nic_busbw_gbs(double nic_gbps);

// Time of C(m x n) = A(m x k) B(k x n) in bf16 on one GPU, seconds.
// `efficiency` (optional) receives achieved FLOP/s over peak.
double gemm_time_s(const GpuProfile& gpu, int64_t m, int64_t n, int64_t k,
                   double* efficiency = nullptr);

// The same GEMM with FP8 operands (Transformer Engine's recipe): the compute
// term runs `speedup` times faster (GpuProfile::fp8_gemm_speedup), the operands
// move 1 byte per element and the BF16 output 2, and the launch floor does not
// shrink. speedup 1 is gemm_time_s. A measured (BF16) GEMM table is scaled by
// 1 / speedup.
double fp8_gemm_time_s(const GpuProfile& gpu, int64_t m, int64_t n, int64_t k, double speedup);

// `batch` independent GEMMs of the same shape (cuBLAS strided-batched), seconds.
double batched_gemm_time_s(const GpuProfile& gpu, int64_t batch, int64_t m, int64_t n,
                           int64_t k);

// A kernel that moves `bytes` through HBM (reads + writes), seconds.
double memory_time_s(const GpuProfile& gpu, double bytes);

// The kernel a flash attention op runs on:
//   kFlash2 - FlashAttention-2 (CUDA) at the profile's flash_*_efficiency;
//   kFused  - Hopper's fused attention kernel (cuDNN fused attention /
//             FlashAttention-3 class) at the profile's fused_attention_*
//             efficiencies when it has them, else FlashAttention-2's;
//   kTriton - FlashAttention's Triton port (flash-attn's flash_attn_triton.py,
//             copied by llm-foundry as attn_impl "triton"): FlashAttention-2's
//             time times kTritonFlash{Fwd,Bwd}Slowdown.
enum class FlashKernel { kFlash2, kFused, kTriton };

// The slowest line rate a training machine's links run: 1 Gigabit Ethernet.
// Below it a rate is a slip of units and a step's transfers run for years
// (1e-300 Gb/s overflowed the event level's op durations to infinity): the
// scenario's nic_gbps / switch_port_gbps, a profile's nic_gbps / pcie_gbps and
// `calibrate net-check --nic-gbps` are refused under it.
inline constexpr double kMinLineRateGbps = 1.0;

// Dao 2023 (FlashAttention-2, arXiv 2307.08691) section 4.1, measured on A100:
// FlashAttention-2 is "around 1.3-1.5x faster than FlashAttention in Triton in
// the forward pass and around 2x faster in the backward pass" (the midpoint of
// the forward range). The Triton port was written and tested on A100 only (its
// docstring); on Hopper the same ratios to FlashAttention-2, which is not
// Hopper-specialised either, are an assumption.
inline constexpr double kTritonFlashFwdSlowdown = 1.4;
inline constexpr double kTritonFlashBwdSlowdown = 2.0;

// Flash attention time for `flops` of attention work on `kernel`, seconds.
double flash_attention_time_s(const GpuProfile& gpu, double flops, bool backward,
                              FlashKernel kernel = FlashKernel::kFlash2);

}  // namespace megascale::model
