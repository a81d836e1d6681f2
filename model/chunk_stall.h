// model/chunk_stall.h: the steady-state stall of an interleaved 1F1B pipeline
// whose model chunks differ in size inside a stage (a Megatron-Core layout
// string, model/megatron_layout.h), for the closed form.
//
// defines: ChunkPassCost, chunk_stall_s
//
// In Megatron-LM's interleaved schedule every steady-state step of rank r runs
// one forward and one backward (model/schedule.h: the forward of item
// warmup_r + i, the backward of item i). At the same step i the ranks run the
// same backward chunk but different forward chunks (their warm-ups differ by 2),
// and each forward waits for the rank before it: first order, the pipeline
// advances in lockstep, each step as long as its slowest rank. With equal chunks
// on a stage every step of the busiest rank is the slowest and the stall is 0;
// with a 1-layer chunk next to a 3-layer one it is not. PP 8 x VPP 6, 192
// micro-batches, every rank's chunks holding 1, 3, 2, 2, 2, 2 layers: the
// lockstep steady state is 7.9% longer than the even split's (forward 1, backward
// 2 per layer; tests/model/chunk_stall_test.cc), and the event fidelity (the
// schedule itself on SimGrid) puts table2-megascale-256 with that layout 7.8%
// above its even split (`megascale simulate ... --set parallel.pipeline_layout=
// "E(t|)*8,(t*3|)*8,(t*2|)*31,t*2L"`). The order of the sizes, which the
// lockstep ignores, matters too: 3, 1, 2, 2, 2, 2 is 3.9% above in the event
// fidelity.
//
// Thread-safety: pure function.
#pragma once

#include <functional>

namespace megascale::model {

struct ChunkPassCost {
  double forward_s = 0, backward_s = 0;  // one micro-batch through the chunk
};

// Seconds the lockstep steady state of P ranks x V chunks x M micro-batches
// spends beyond the rank whose own steady steps take longest, with `cost(r, c)`
// each chunk's pass; 0 when V == 1 or every rank's chunks are equal (each rank's
// steps then all cost the same). O(P^2 V): the step costs repeat every P * V
// steps.
double chunk_stall_s(int P, int V, int M, const std::function<ChunkPassCost(int, int)>& cost);

}  // namespace megascale::model
