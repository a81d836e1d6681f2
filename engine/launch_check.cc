// engine/launch_check.cc: train.data and the checkpoint to resume from, checked
// before launch.
#include "engine/launch_check.h"

#include <fmt/format.h>

#include "engine/checkpoint.h"
#include "engine/dataset.h"

namespace megascale::engine {

void check_before_launch(const model::Scenario& s) {
  if (!s.train.data.empty()) {
    try {
      check_dataset_fits(Dataset::open(s.train.data), s.model.seq_len, s.model.vocab);
    } catch (const DatasetError& e) {
      throw model::ScenarioError(s.source, 0, 0, "train.data", e.what());
    }
  }
  const std::string& root = s.train.checkpoint_dir;
  if (root.empty()) return;
  const std::optional<int64_t> latest = latest_checkpoint(root);
  if (!latest) return;
  try {
    read_checkpoint_shard(root, *latest, 0, make_checkpoint_layout(s.model, s.parallel));
  } catch (const CheckpointError& e) {
    if (e.check() != "layout mismatch") return;  // the engine's to refuse or recover from
    throw model::ScenarioError(
        s.source, 0, 0, "train.checkpoint_dir",
        fmt::format("{}; the engine would resume from this checkpoint of step {}: train with the layout and model "
                    "that wrote it, or point train.checkpoint_dir elsewhere",
                    e.what(), *latest));
  }
}

}  // namespace megascale::engine
