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

#include <cstdint>

#include "model/hardware.h"

namespace megascale::model {

enum class CommSide { kBefore, kAfter };  // all-gather feeds the GEMM / RS follows it

// Seconds of the fused pair, first event to last. `piece_s`: one GEMM piece alone
// (all SMs); `piece_shared_s`: the same piece on the SMs the collective leaves;
// `comm_s`: the whole collective (split evenly over the pieces).
double fused_pair_time_s(int chunks, double piece_s, double piece_shared_s, double comm_s,
                          CommSide side);

// A copy of `gpu` with the SMs an NCCL collective holds removed (at least one
// left) and the peak scaled to the SMs that remain; HBM bandwidth unchanged.
GpuProfile without_comm_sms(const GpuProfile& gpu, int comm_ctas);

}  // namespace megascale::model
