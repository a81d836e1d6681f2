// model/head_balance.h: a pipeline split that gives the ranks holding the
// embedding and the output head fewer transformer layers, so that every rank's
// layers plus its head weigh about the same.
//
// defines: head_balanced_chunk_layers
//
// An even split leaves the last rank a layer's worth of work or more above the
// others when the vocabulary is large: its output GEMM, the softmax and the
// cross-entropy (model/op_cost.h) weigh about V / (12 h + 2 s) transformer
// layers (Llama 3 70B, 128,256 words, hidden 8,192: about 1.1). Practitioners move
// layers by hand:
// - Meta, Llama 3 405B (arXiv 2407.21783 section 3.3.2): 126 layers on 16 ranks
//   x 8 chunks as 7 + 14 x 8 + 7, "the first model chunk on the first stage has
//   only the embedding, and the last model chunk on the last stage has only
//   output projection and loss calculation";
// - Megatron-Bridge's Llama 3 70B H100 recipe
//   (pipeline_model_parallel_layout "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", PP 8 x
//   VPP 5): rank 7, with the head, keeps 9 layers, rank 3 takes the tenth.
// This module derives such splits from the heads' cost instead of by hand.
//
// The rule, given each head's cost in transformer-layer passes (the closed
// form's, model/estimator.h Estimate::first_head_s / last_head_s):
// 1. every rank holds at least one layer; each further layer goes to the rank
//    whose load (its layers + its head) after taking it is the smallest, ties to
//    the rank nearest the middle of the pipeline, then the lower one. Giving
//    identical unit items one at a time to the least loaded result minimises the
//    largest load.
// 2. a rank spreads its layers over its vpp chunks as evenly as it can; where
//    they do not divide, the chunk holding a head (the first rank's chunk 0, the
//    last rank's chunk vpp - 1) is among the lighter ones, as in both examples.
// Both published layouts above come out of it exactly (tests/model/
// head_balance_test.cc); with heads below a layer's worth of imbalance it returns
// the even split. Whether the split is faster is the estimator's to say:
// `megascale search` offers it beside each ranked layout and keeps it only
// where the estimate is shorter (model/search.h).
//
// Thread-safety: pure function.
#pragma once

#include <vector>

namespace megascale::model {

// Transformer layers of every virtual stage v = chunk * pp + rank (model order,
// as model/pipeline_layout.h ChunkLayers) for `layers` layers on pp ranks x vpp
// chunks, the first rank carrying `first_head_layers` and the last
// `last_head_layers` extra layer passes (>= 0; finite). Empty when pp < 2 or
// layers < pp (no split with a layer on every rank).
std::vector<int> head_balanced_chunk_layers(int layers, int pp, int vpp, double first_head_layers,
                                            double last_head_layers);

}  // namespace megascale::model
