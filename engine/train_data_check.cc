// engine/train_data_check.cc: train.data read and checked before launch.
#include "engine/train_data_check.h"

#include "engine/dataset.h"

namespace megascale::engine {

void check_train_data(const model::Scenario& s) {
  if (s.train.data.empty()) return;
  try {
    check_dataset_fits(Dataset::open(s.train.data), s.model.seq_len, s.model.vocab);
  } catch (const DatasetError& e) {
    throw model::ScenarioError(s.source, 0, 0, "train.data", e.what());
  }
}

}  // namespace megascale::engine
