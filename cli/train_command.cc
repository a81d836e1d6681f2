// cli/train_command.cc: `megascale train FILE [--json] [--set KEY=VALUE]...` —
// the real trainer.
//
// Validates the scenario, then launches the engine as an MPI job:
// `mpirun --oversubscribe -np GPUS megascale-train FILE [--json]` (Open MPI's
// run-as-root variables set), and returns its exit status. megascale-train
// (engine/tools/train_rank_main.cc) is a separate executable because the simulator side links
// SimGrid, whose SMPI layer exports the MPI symbols too.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "base/mpirun.h"
#include "model/scenario.h"

namespace megascale::cli {

int cmd_train(const Args& args, std::ostream& out, std::ostream& err) {
  (void)out;  // the engine processes print straight to the terminal
  bool json = false;
  std::vector<std::string> files, overrides;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--set" && i + 1 < args.size()) {
      overrides.push_back(args[++i]);
    } else if (a.rfind("--set=", 0) == 0) {
      overrides.push_back(a.substr(6));
    } else if (a.rfind("--", 0) == 0) {
      err << "megascale train: unknown option '" << a << "'\n\n" << command_usage("train");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.size() != 1) {
    err << "megascale train: expects exactly one scenario FILE\n\n" << command_usage("train");
    return 2;
  }
  int gpus = 0;
  try {
    const model::Scenario s = model::load_scenario(files[0], overrides);
    if (s.train.device == "cpu" && s.hardware.gpu != "cpu") {
      throw model::ScenarioError(s.source, 0, 0, "hardware.gpu",
                                 "the CPU engine (train.device = \"cpu\") needs gpu = \"cpu\" (got \"" +
                                     s.hardware.gpu + "\"); set train.device = \"cuda\" to train on GPUs");
    }
    if (s.train.device == "cuda" && s.hardware.gpu == "cpu") {
      throw model::ScenarioError(s.source, 0, 0, "hardware.gpu",
                                 "train.device = \"cuda\" needs a GPU profile for its MFU (e.g. gpu = "
                                 "\"H200-SXM-141GB\"), got \"cpu\"");
    }
    gpus = s.cluster.gpus;
  } catch (const model::ScenarioError& e) {
    err << "megascale train: " << e.what() << "\n";
    return 2;
  }
  const std::string engine = base::sibling_program("megascale-train");  // beside this binary
  if (!std::filesystem::exists(engine)) {
    err << "megascale train: " << engine << " is missing (build the megascale-train target)\n";
    return 1;
  }
  std::vector<std::string> mpi_args = {"--oversubscribe", "-np", std::to_string(gpus), engine, files[0]};
  if (json) mpi_args.push_back("--json");
  for (const std::string& o : overrides) {
    mpi_args.push_back("--set");
    mpi_args.push_back(o);
  }
  out.flush();
  // Its own process group; SIGINT / SIGTERM to us stop mpirun and every rank.
  return base::run_mpirun(mpi_args, err, "megascale train");
}

}  // namespace megascale::cli
