// model/fused_overlap.h: time of a TP collective fused with its GEMM (MegaScale
// section 3.2, "TP overlap"), with the SMs the collective takes from the GEMM.
//
// The GEMM is split into `chunks` pieces along the sequence; piece i's
// communication runs on its own stream beside piece i-1's (all-gather before the
// GEMM) or i+1's (reduce-scatter after it) compute: a two-stage flow shop. While
// a communication piece is in flight its NCCL kernel holds `comm_ctas` SMs
// exclusively (one CTA per channel, never shared with compute kernels: NCCL
// maintainers, NVIDIA/nccl#689), so the concurrent GEMM piece runs on
// sm_count - comm_ctas SMs: fewer per wave and, for a GEMM sized to one wave, a
// second wave (the "tail effect" of overlap). With comm_ctas = 0 the result is
// the classic max(gemm, comm) + min(gemm, comm) / chunks.
//
// Not modelled: HBM bandwidth the collective also uses (it matters to
// memory-bound kernels; these GEMMs are compute-bound) and the collective's own
// slowdown.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "model/config.h"
#include "model/hardware.h"

namespace megascale::model {

enum class CommSide { kBefore, kAfter };  // all-gather feeds the GEMM / RS follows it

// Seconds of the fused pair, first event to last. `piece_s`: one GEMM piece alone
// (all SMs); `piece_shared_s`: the same piece on the SMs the collective leaves;
// `comm_s`: the whole collective (split evenly over the pieces).
double fused_pair_time_s(int chunks, double piece_s, double piece_shared_s, double comm_s,
                          CommSide side);

// Transformer Engine's userbuffers TP overlap (Megatron-Core --tp-comm-overlap,
// Optimizations::tp_overlap_comm = kUserBuffers), the default configuration of
// initialize_ub (NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py
// @ d0067d0d, get_default_config), per GEMM:
//  - "ring_exchange" (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad: the all-gather
//    before a GEMM): num_splits = tp, the pieces moved peer to peer by the copy
//    engines (use_ce = True) with num_sm = 1 and no SM margin for the GEMM;
//  - "pipeline" (proj_fprop, fc2_fprop: the reduce-scatter after a GEMM):
//    num_splits = 4, num_sm = 16; a ub_cfg may run these two as "ring_exchange"
//    instead (NeMo's and Megatron-Bridge's tuned B200 files do: num_sm 1,
//    set_sm_margin True): tp pieces, each piece's partial output sent to its
//    owner peer to peer while the next piece computes, then one reduce_bf16
//    kernel on the GEMM's stream sums the tp partial chunks (TE
//    comm_gemm_overlap.cpp CommOverlapP2PBase::split_overlap_rs);
//  - "bulk" (qkv/fc1 dgrad and wgrad: the backward's input re-gather beside the
//    input-gradient GEMM, and the input gradient's reduce-scatter beside the
//    weight-gradient GEMM): one collective beside one whole GEMM, num_sm = 16.
// set_sm_margin (Optimizations::tp_overlap_sm_margin) launches the pipeline and
// bulk GEMMs on the SMs the communication leaves for their whole run: TE's
// default from v2.0 (Feb 2025; "set_sm_margin": not ring_exchange); v1.8-1.13
// (2024) default to 0, the GEMM then shares the SMs only while the
// communication runs. Under FP8 every all-gather overlap moves FP8 copies
// (fp8_buf, v1.8+), 1 byte per element; the reduce-scatters stay BF16.
constexpr int kUbRingExchangeSms = 1;
constexpr int kUbCommSms = 16;
constexpr int kUbPipelineSplits = 4;

// TE's userbuffers GEMM names and the method each runs by default; a scenario
// may retune the SMs, pieces and margin of each ([optimizations.userbuffers],
// Optimizations::userbuffers), as NeMo's tuned ub_cfg files do, and run a
// forward reduce-scatter (proj_fprop, fc2_fprop) as a ring exchange
// (ub_method_allowed).
const char* to_string(UbMethod m);
struct UbGemm {
  std::string_view name;
  UbMethod method;
};
constexpr std::array<UbGemm, 10> kUbGemms = {{{"qkv_fprop", UbMethod::kRingExchange},
                                              {"fc1_fprop", UbMethod::kRingExchange},
                                              {"proj_dgrad", UbMethod::kRingExchange},
                                              {"fc2_dgrad", UbMethod::kRingExchange},
                                              {"proj_fprop", UbMethod::kPipeline},
                                              {"fc2_fprop", UbMethod::kPipeline},
                                              {"qkv_dgrad", UbMethod::kBulk},
                                              {"qkv_wgrad", UbMethod::kBulk},
                                              {"fc1_dgrad", UbMethod::kBulk},
                                              {"fc1_wgrad", UbMethod::kBulk}}};
std::optional<UbMethod> ub_default_method(std::string_view te_gemm);
// Whether TE runs `te_gemm` by `m`: its default, or a ring exchange for the
// forward reduce-scatters. REQUIRES: te_gemm is in kUbGemms.
bool ub_method_allowed(std::string_view te_gemm, UbMethod m);

// One GEMM's overlap as it runs: TE's defaults with the scenario's settings
// over them. num_sm: SMs the communication holds (ring exchange: 1 unless set,
// the copy engines move the data); num_splits: GEMM pieces (ring exchange: tp,
// tp / 2 when aggregate; bulk: 1); sm_margin: the GEMM runs on the SMs left
// for its whole run (ring exchange: only where set, TE's default being
// "not ring_exchange").
struct UbOverlap {
  UbMethod method = UbMethod::kBulk;
  int num_sm = kUbCommSms;
  int num_splits = 1;
  bool sm_margin = false;
};
// REQUIRES: tp >= 1. A name outside kUbGemms throws std::logic_error.
UbOverlap ub_overlap(const Optimizations& o, std::string_view te_gemm, int tp);

// A copy of `gpu` with the SMs an NCCL collective holds removed (at least one
// left) and the peak scaled to the SMs that remain; HBM bandwidth unchanged.
GpuProfile without_comm_sms(const GpuProfile& gpu, int comm_ctas);

}  // namespace megascale::model
