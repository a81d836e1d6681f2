// engine/launch_check.h: what must hold before `megascale train` or
// `megascale run` launch anything.
//
// defines: check_before_launch
//
// A problem every rank would meet is said once, here, as a ScenarioError
// naming the scenario and the key (exit 2), instead of failing on every rank
// (and, under `megascale run`, being taken for a faulty node that is evicted):
//   train.data            the MSDS file (engine/dataset.h) opens, is valid, and
//                         fits the model (check_dataset_fits: seq_len + 1
//                         tokens, vocabulary <= model.vocab). Without it the
//                         engine makes its synthetic corpus, which always fits.
//   train.work_dir        (the synthetic corpus's folder, train.data empty) and
//   train.checkpoint_dir  are made here, as the engine would make them: a
//                         path that cannot be a folder (a file in the way, no
//                         permission, /proc) is refused with the reason. Rank
//                         0 alone made them, and the other ranks only saw
//                         that it failed, a node fault to `megascale run`.
//   train.trace           its files (PREFIX.csv, .json, .rankN.csv), written
//                         when the training ends, can be written: the folder
//                         exists and takes files (base::check_output_path).
//   train.checkpoint_dir  the newest complete checkpoint, which the engine
//                         resumes from, was written by this layout (world
//                         size, tp, pp, dp, vpp, the model, rank order): the
//                         engine loads a checkpoint only into the layout that
//                         wrote it. Rank 0's shard is read as the engine reads
//                         it. A checkpoint that is unreadable for another
//                         reason (corrupt, truncated, a shard missing) is left
//                         to the engine: `megascale run` recovers from it by
//                         moving it aside (robust/README.md).
//
// Thread-safety: reads the files and makes the two folders; call it once
// per launch.
#pragma once

#include "model/scenario.h"

namespace megascale::engine {

void check_before_launch(const model::Scenario& s);

}  // namespace megascale::engine
