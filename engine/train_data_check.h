// engine/train_data_check.h: the training data a scenario names, checked before
// anything is launched.
//
// defines: check_train_data
//
// `megascale train` and `megascale run` read train.data (an MSDS file,
// engine/dataset.h) here, before mpirun: a file every rank would fail on is a
// ScenarioError naming the scenario and the key, not an error of the node that
// reads it (`megascale run` took that for a faulty node and evicted it).
// Without train.data the engine makes its synthetic corpus, which always fits.
//
// Thread-safety: a pure function of the scenario and the file.
#pragma once

#include "model/scenario.h"

namespace megascale::engine {

// Throws model::ScenarioError (key train.data) when s.train.data is set and
// the file cannot be read, is not a valid MSDS dataset, or does not fit the
// model (check_dataset_fits: seq_len + 1 tokens, vocabulary <= model.vocab).
void check_train_data(const model::Scenario& s);

}  // namespace megascale::engine
