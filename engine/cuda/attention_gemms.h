// engine/cuda/attention_gemms.h: the GEMMs of CudaDevice's cuBLAS attention
// path (AttentionPath::kCublas, device_cuda.h) as data — each product of one
// batch element as a list of column-major strided-batched GEMMs (cuBLAS's
// cublasGemmStridedBatchedEx arguments) over symbolic buffers. CudaDevice
// binds the buffers to device pointers and calls cuBLAS; the CPU unit test
// (tests/engine/attention_gemms_test.cc) binds them to host arrays, runs the
// same list through a plain column-major GEMM and compares with CpuDevice, so
// every index, stride, leading dimension, transpose and beta here is checked
// on machines without a GPU. Pure C++: no CUDA header.
//
// defines: AttnBuf, AttnOperand, AttnGemm, AttnProduct, attention_gemms.
//
// Math (per batch element b and query head h, kv head g = h / group;
// Q, K, V, O, dO the (T, HD) row-major slices of qkv / out / dout, row
// stride B * width or B * NH * HD; P, S, dP, dS (T, T) row-major):
//   kScores  S  = scale Q K^T          -> kScores (the probs block of b)
//   kValues  O  = P V                  -> kOut
//   kDV      dV = sum_h P^T dO         -> kDqkv (the V columns)
//   kDP      dP = dO V^T               -> kDP
//   kDQ      dQ = scale dS K           -> kDqkv (the Q columns)
//   kDK      dK = scale sum_h dS^T Q   -> kDqkv (the K columns)
// cuBLAS is column-major: a row-major (R, C) array with leading dimension ld
// is, read column-major, its transpose (C, R). So row-major X = Y Z^T is the
// column-major X^T = op(Z) op(Y): the operands swap and each transpose flips.
//
// Batching: the query heads of kv head g are h = g * group + r. For a fixed
// (b, r) the NKV kv heads are one strided batch: Q / O / dO / dQ at stride
// group * HD, K / V / dK / dV at stride HD, the (T, T) blocks at stride
// group * T^2. A product is `group` GEMMs (r = 0, 1, ...), NKV batches each
// (MHA: one GEMM of NH batches). dV and dK sum over r: r = 0 writes (beta 0),
// r >= 1 adds (beta 1), always in that order (deterministic, no atomics).
//
// Offsets are in elements. For kQkv, kOut, kDout, kDqkv they are from the
// start of the whole tensor; for the (NH, T, T) buffers (kScores, kProbsIn,
// kDP, kDSIn) from the start of batch element b's block (the caller adds
// b * NH * T^2 where its buffer holds every batch element).
//
// Thread-safety: pure functions.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

namespace megascale::engine::cuda {

enum class AttnBuf {
  kQkv,      // (T, B, (NH + 2 NKV) HD), GEMM input
  kOut,      // (T, B, NH HD), output
  kDout,     // (T, B, NH HD), GEMM input
  kDqkv,     // like kQkv, output
  kScores,   // (NH, T, T) of b, fp32 output: the scores, then (in place) P
  kProbsIn,  // (NH, T, T) of b: P as a GEMM input
  kDP,       // (NH, T, T) of b, fp32 output: dP
  kDSIn,     // (NH, T, T) of b: dS as a GEMM input
};

struct AttnOperand {
  AttnBuf buf;
  size_t offset;     // elements
  int ld;            // leading dimension (column-major)
  long long stride;  // elements between batches
};

// Column-major C (m, n) = alpha op(A) (m, k) op(B) (k, n) + beta C, `batch` times.
struct AttnGemm {
  bool trans_a, trans_b;
  int m, n, k;
  float alpha;
  AttnOperand a, b;
  float beta;
  AttnOperand c;
  int batch;
};

enum class AttnProduct { kScores, kValues, kDV, kDP, kDQ, kDK };

// The GEMMs of one product for batch element b, in the order they must run.
// REQUIRES: NH % NKV == 0, all sizes >= 1, B * (NH + 2 NKV) * HD < 2^31.
inline std::vector<AttnGemm> attention_gemms(AttnProduct product, int b, int T, int B, int NH, int NKV, int HD) {
  const int group = NH / NKV;
  const int width = (NH + 2 * NKV) * HD;
  const int ld_qkv = B * width, ld_out = B * NH * HD;
  const size_t TT = static_cast<size_t>(T) * T;
  const long long sTT = static_cast<long long>(TT) * group;  // batch stride of the (T, T) blocks
  const long long sQ = static_cast<long long>(group) * HD;   // of Q / O / dO / dQ
  const long long sKV = HD;                                    // of K / V / dK / dV
  const float scale = 1.0f / std::sqrt(static_cast<float>(HD));
  const size_t row0 = static_cast<size_t>(b) * width;                        // qkv: (t = 0, b)
  const size_t k0 = row0 + static_cast<size_t>(NH) * HD;                     // K of kv head 0
  const size_t v0 = row0 + static_cast<size_t>(NH + NKV) * HD;               // V of kv head 0
  const size_t orow0 = static_cast<size_t>(b) * NH * HD;                     // out / dout: (t = 0, b)
  std::vector<AttnGemm> gemms;
  gemms.reserve(static_cast<size_t>(group));
  for (int r = 0; r < group; ++r) {
    const size_t q = row0 + static_cast<size_t>(r) * HD;    // Q (and dQ) of head r
    const size_t o = orow0 + static_cast<size_t>(r) * HD;   // O / dO of head r
    const size_t blk = static_cast<size_t>(r) * TT;         // (T, T) block of head r
    const float acc = r == 0 ? 0.0f : 1.0f;                 // dV / dK: sum over r in order
    switch (product) {
      case AttnProduct::kScores:  // S^T (T, T) = K_cm^T (T, HD) Q_cm (HD, T)
        gemms.push_back({true, false, T, T, HD, scale, {AttnBuf::kQkv, k0, ld_qkv, sKV},
                         {AttnBuf::kQkv, q, ld_qkv, sQ}, 0.0f, {AttnBuf::kScores, blk, T, sTT}, NKV});
        break;
      case AttnProduct::kValues:  // O^T (HD, T) = V_cm (HD, T) P_cm (T, T)
        gemms.push_back({false, false, HD, T, T, 1.0f, {AttnBuf::kQkv, v0, ld_qkv, sKV},
                         {AttnBuf::kProbsIn, blk, T, sTT}, 0.0f, {AttnBuf::kOut, o, ld_out, sQ}, NKV});
        break;
      case AttnProduct::kDV:  // dV^T (HD, T) += dO_cm (HD, T) P_cm^T (T, T)
        gemms.push_back({false, true, HD, T, T, 1.0f, {AttnBuf::kDout, o, ld_out, sQ},
                         {AttnBuf::kProbsIn, blk, T, sTT}, acc, {AttnBuf::kDqkv, v0, ld_qkv, sKV}, NKV});
        break;
      case AttnProduct::kDP:  // dP^T (T, T) = V_cm^T (T, HD) dO_cm (HD, T)
        gemms.push_back({true, false, T, T, HD, 1.0f, {AttnBuf::kQkv, v0, ld_qkv, sKV},
                         {AttnBuf::kDout, o, ld_out, sQ}, 0.0f, {AttnBuf::kDP, blk, T, sTT}, NKV});
        break;
      case AttnProduct::kDQ:  // dQ^T (HD, T) = scale K_cm (HD, T) dS_cm (T, T)
        gemms.push_back({false, false, HD, T, T, scale, {AttnBuf::kQkv, k0, ld_qkv, sKV},
                         {AttnBuf::kDSIn, blk, T, sTT}, 0.0f, {AttnBuf::kDqkv, q, ld_qkv, sQ}, NKV});
        break;
      case AttnProduct::kDK:  // dK^T (HD, T) += scale Q_cm (HD, T) dS_cm^T (T, T)
        gemms.push_back({false, true, HD, T, T, scale, {AttnBuf::kQkv, q, ld_qkv, sQ},
                         {AttnBuf::kDSIn, blk, T, sTT}, acc, {AttnBuf::kDqkv, k0, ld_qkv, sKV}, NKV});
        break;
    }
  }
  return gemms;
}

}  // namespace megascale::engine::cuda
