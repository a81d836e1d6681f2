// engine/launch_check.cc: train.data and the checkpoint to resume from, checked
// before launch.
#include "engine/launch_check.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "base/text_file.h"
#include "engine/checkpoint.h"
#include "engine/dataset.h"

namespace megascale::engine {

namespace {

// Makes the folder `key` names, as the engine would at its start; a path that
// cannot be one (a file in the way, no permission, a read-only or virtual file
// system) is the scenario's error, named once here.
void make_folder(const model::Scenario& s, const std::string& key, const std::string& path) {
  try {
    base::make_folder_or_throw(path);
  } catch (const base::FileError& e) {
    throw model::ScenarioError(s.source, 0, 0, key, e.what());
  }
}

}  // namespace

void check_before_launch(const model::Scenario& s) {
  // The synthetic corpus is written to train.work_dir when train.data is empty;
  // its vocabulary is the model's, which it must be able to hold (every rank
  // stopped on it after launch, under MPI_Abort's noise).
  if (s.train.data.empty() && (s.model.vocab < static_cast<int64_t>(kMinSyntheticVocab) ||
                               s.model.vocab > static_cast<int64_t>(kMaxSyntheticVocab))) {
    throw model::ScenarioError(
        s.source, 0, 0, "model.vocab",
        fmt::format("the synthetic corpus (train.data unset) draws 16-bit tokens with three successors each: vocab "
                    "{}..{}, got {}; give train.data a tokenised dataset for another vocabulary",
                    kMinSyntheticVocab, kMaxSyntheticVocab, s.model.vocab));
  }
  if (s.train.data.empty() && !s.train.work_dir.empty()) make_folder(s, "train.work_dir", s.train.work_dir);
  if (!s.train.checkpoint_dir.empty()) make_folder(s, "train.checkpoint_dir", s.train.checkpoint_dir);
  // The trace is written when the training ends (engine/trace.h merge_traces:
  // PREFIX.rankN.csv, PREFIX.csv, PREFIX.json): a folder it cannot write into
  // lost it after the whole run.
  if (!s.train.trace.empty()) {
    try {
      base::check_output_path(s.train.trace + ".csv");
      base::check_output_path(s.train.trace + ".json");
    } catch (const base::OutputFileError& e) {
      throw model::ScenarioError(s.source, 0, 0, "train.trace", e.what());
    }
  }
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
