// cli/train_command.cc: `megascale train FILE [--json] [--set KEY=VALUE]...` —
// the real trainer.
//
// Validates the scenario and its train.data, then launches the engine as an MPI job:
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
#include "engine/launch_check.h"
#include "model/scenario.h"

namespace megascale::cli {

namespace {

int train(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.positional.size() != 1) throw UsageError("expects exactly one scenario FILE");
  const std::vector<std::string> overrides = p.all("--set");
  const model::Scenario s = model::load_scenario(p.positional[0], overrides);
  model::check_trainable(s);
  engine::check_before_launch(s);  // train.data, the checkpoint to resume from
  const std::string engine = base::sibling_program("megascale-train");  // beside this binary
  if (!std::filesystem::exists(engine)) {
    err << "megascale train: " << engine << " is missing (build the megascale-train target)\n";
    return 1;
  }
  std::vector<std::string> mpi_args = {"--oversubscribe", "-np", std::to_string(s.cluster.gpus), engine,
                                       p.positional[0]};
  if (p.on("--json")) mpi_args.push_back("--json");
  for (const std::string& o : overrides) mpi_args.insert(mpi_args.end(), {"--set", o});
  out.flush();  // the engine processes print straight to the terminal
  // Its own process group; SIGINT / SIGTERM to us stop mpirun and every rank.
  return base::run_mpirun(mpi_args, err, "megascale train");
}

}  // namespace

CommandEntry train_command() {
  return {{"train", "FILE [options]", "run the real trainer (CPU + MPI) on the scenario; launches mpirun itself",
           {json_flag("the engine's report as JSON"), set_option()}},
          train};
}

}  // namespace megascale::cli
