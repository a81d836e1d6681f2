// model/hardware.h: GPU hardware profiles and the kernel-time models built on them.
//
// A GpuProfile holds spec-sheet figures (peak dense bf16, HBM capacity and
// bandwidth, NVLink, SM count) and microbenchmark figures (achievable GEMM and
// HBM fractions, NCCL bus bandwidths, kernel launch cost). Each figure carries
// its source in hardware.cc. Nothing here is fitted to the MegaScale MFU figures.
//
// On top of a profile:
//   gemm_time_s    - shape-dependent GEMM time: roofline (compute vs HBM) with
//                    tile quantisation, wave quantisation over the SMs, a short-K
//                    pipeline penalty and a launch floor;
//   memory_time_s  - a bandwidth-bound kernel (elementwise, LayerNorm, softmax);
//   flash_attention_time_s - FlashAttention-2's achieved fraction of peak.
//
// Thread-safety: profiles are immutable after static initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace megascale::model {

struct GpuProfile {
  std::string name;
  double peak_bf16_tflops = 0;         // dense tensor-core bf16, spec sheet
  double hbm_bytes = 0;                // capacity
  double hbm_gbs = 0;                  // HBM bandwidth, GB/s (1e9 B/s), spec sheet
  double hbm_efficiency = 0;           // achievable fraction of hbm_gbs (STREAM-like)
  double nvlink_gbs = 0;               // NVLink per GPU, bidirectional GB/s, spec sheet
  double nvlink_busbw_gbs = 0;         // NCCL ring busbw inside one 8-GPU node, measured
  int sm_count = 0;                    // streaming multiprocessors
  double max_gemm_efficiency = 0;      // large bf16 GEMM fraction of peak, measured
  double flash_fwd_efficiency = 0;     // FlashAttention-2 forward fraction of peak
  double flash_bwd_efficiency = 0;     // FlashAttention-2 backward fraction of peak
  double kernel_launch_us = 0;         // minimum time of one kernel (launch + drain)
  int default_nics_per_node = 0;
  double default_nic_gbps = 0;         // Gb/s line rate
  double pcie_gbps = 0;                // GPU <-> NIC PCIe x16, Gb/s per direction, spec sheet
  int nccl_nvlink_ctas = 0;            // SMs an NCCL collective inside the node holds (channels)
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

// `batch` independent GEMMs of the same shape (cuBLAS strided-batched), seconds.
double batched_gemm_time_s(const GpuProfile& gpu, int64_t batch, int64_t m, int64_t n,
                           int64_t k);

// A kernel that moves `bytes` through HBM (reads + writes), seconds.
double memory_time_s(const GpuProfile& gpu, double bytes);

// FlashAttention-2 time for `flops` of attention work, seconds.
double flash_attention_time_s(const GpuProfile& gpu, double flops, bool backward);

}  // namespace megascale::model
