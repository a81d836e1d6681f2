// engine/tools/train_rank_main.cc: `megascale-train FILE [--json] [--set KEY=VALUE]...` (options:
// base/options.h), one
// rank of the engine.
//
// Started by `megascale train` under mpirun (or by hand: `mpirun -np N
// megascale-train FILE`). Every rank builds a Trainer (engine/trainer.h); world
// rank 0 prints one line, or one JSON object {step, loss, step_time_s,
// tokens_per_s, mfu, grad_norm}, per step. A failure on one rank aborts the job
// (MPI_Abort) so that no rank is left blocked in a collective; exit status 2
// for bad input (scenario, dataset, checkpoint), 1 otherwise.
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fmt/ostream.h>

#include "base/json.h"
#include "engine/checkpoint.h"
#include "engine/comm_mpi.h"
#include "engine/comm_threads.h"
#include "engine/dataset.h"
#include "base/options.h"
#include "engine/device_factory.h"
#include "engine/trainer.h"
#include "engine/watchdog.h"
#include "model/hardware.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "robust/heartbeat.h"
#include "robust/keys.h"

namespace megascale::tools {
namespace {

// " (stage layers 1+3)" for uneven first / last stages, "" for even ones.
std::string stage_layers_text(const megascale::model::Scenario& s) {
  const megascale::model::PipelineLayout layout(s.model, s.parallel);
  if (layout.even()) return "";
  std::vector<int> stages;
  for (int r = 0; r < s.parallel.pp; ++r) stages.push_back(layout.stage_layers(r));
  return fmt::format(" (stage layers {})", fmt::join(stages, "+"));
}

engine::TrainOptions train_options(const model::Scenario& s) {
  engine::TrainOptions o;
  const model::TrainConfig& t = s.train;
  o.steps = t.steps;
  o.learning_rate = t.learning_rate;
  o.seed = static_cast<uint64_t>(t.seed);
  o.data = t.data;
  o.work_dir = t.work_dir;
  o.checkpoint_dir = t.checkpoint_dir;
  o.checkpoint_every = t.checkpoint_every;
  o.trace = t.trace;
  o.optimizer.weight_decay = t.weight_decay;
  o.optimizer.max_grad_norm = t.max_grad_norm;
  o.watchdog_s = t.watchdog_s;
  o.device.name = t.device;
  o.device.precision = t.precision;
  o.device.attention = t.attention;
  o.job_name = "megascale-" + std::to_string(getppid());
  return o;
}

int train_on_rank(const model::Scenario& s, bool json, engine::Comm& world, engine::Comm& node,
                  std::ostream& out, robust::RankAgent* agent, engine::Watchdog& watchdog);

// This process's world rank from mpirun's environment (MPI_Init has not run
// yet), 0 when started without mpirun.
int rank_from_env() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank != nullptr ? std::atoi(rank) : 0;
}

// True when a launcher started this process as one rank of an MPI job
// (Open MPI's mpirun / prterun, or a PMI-based one such as srun).
bool started_by_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

// Aborts the whole job when there is one (MPI_Abort); a process without MPI
// just returns its status.
int abort_job(bool with_mpi, int status) {
  if (with_mpi) MPI_Abort(MPI_COMM_WORLD, status);
  return status;
}

int run_rank(int* argc, char*** argv, const model::Scenario& s, bool json, std::ostream& out,
             std::ostream& err) {
  // Armed before MPI_Init and ended after MPI_Finalize (declared first): a
  // peer that stops during start-up or at the end is caught too.
  engine::Watchdog watchdog(s.train.watchdog_s, s.train.startup_watchdog_s, rank_from_env());
  // A one-process scenario started by hand (no launcher) needs no MPI runtime:
  // its world and node are a one-rank in-process group (engine/comm_threads.h),
  // so a single-GPU machine with only the binary and its libraries trains
  // (scripts/gpu-check.sh with a prebuilt bundle). Started by mpirun, or with
  // more than one process, the ranks are MPI's.
  const bool with_mpi = s.cluster.gpus != 1 || started_by_launcher();
  std::optional<engine::MpiEnvironment> env;
  std::unique_ptr<engine::Comm> world, node;
  if (with_mpi) {
    env.emplace(argc, argv);
    std::unique_ptr<engine::MpiComm> mpi_world = engine::MpiComm::world();
    node = mpi_world->split_shared();
    world = std::move(mpi_world);
  } else {
    std::vector<std::unique_ptr<engine::Comm>> one = engine::make_thread_comms(1);
    world = std::move(one[0]);
    node = world->split(0, 0);
  }
  if (world->size() != s.cluster.gpus) {
    if (world->rank() == 0) {
      err << "megascale train: " << s.source << ": cluster.gpus: the scenario needs "
          << s.cluster.gpus << " processes, the MPI job has " << world->size() << "\n";
    }
    return 2;
  }
  // Started by `megascale run` (robust/driver.h): heartbeats to Redis, the
  // world monitored, the injected faults armed.
  std::unique_ptr<robust::RankAgent> agent;
  try {
    if (std::optional<robust::RankAgentConfig> c = robust::rank_agent_config_from_env(world->rank())) {
      c->checkpoint_dir = s.train.checkpoint_dir;
      c->layout = engine::make_checkpoint_layout(s.model, s.parallel);
      agent = std::make_unique<robust::RankAgent>(*c);
    }
  } catch (const std::invalid_argument& e) {
    err << "megascale train: rank " << world->rank() << ": " << e.what() << "\n";
    return 2;
  }
  try {
    return train_on_rank(s, json, agent ? agent->wrap(*world) : *world, *node, out, agent.get(), watchdog);
  } catch (const engine::TrainingDiverged& e) {
    // Every rank stops at the same step with the same message: rank 0 says it.
    if (world->rank() == 0) err << "megascale train: " << e.what() << "\n" << std::flush;
    world->barrier();
    return 1;
  } catch (const std::exception& e) {
    // One rank's failure must not leave the others blocked in a collective.
    err << "megascale train: rank " << world->rank() << ": " << e.what() << "\n" << std::flush;
    const bool bad_input = dynamic_cast<const engine::DatasetError*>(&e) != nullptr ||
                           dynamic_cast<const engine::CheckpointError*>(&e) != nullptr ||
                           dynamic_cast<const std::invalid_argument*>(&e) != nullptr;
    return abort_job(with_mpi, bad_input ? 2 : 1);
  }
}

int train_on_rank(const model::Scenario& s, bool json, engine::Comm& world_comm,
                  engine::Comm& node, std::ostream& out, robust::RankAgent* agent, engine::Watchdog& watchdog) {
  // train.device = "cuda": one GPU per rank (the node-local rank's), and an
  // NcclComm over the MPI world for everything the engine moves; the node
  // communicator stays MPI (the data loader shares host memory through it).
  engine::TrainOptions options = train_options(s);
  options.watchdog = &watchdog;
  if (agent != nullptr) {
    options.on_checkpoint = [agent](int64_t step, double snapshot_s, double persist_s, uint64_t bytes) {
      agent->on_checkpoint(step, snapshot_s, persist_s, bytes);
    };
    options.on_save_end = [agent](int64_t step) { agent->end_save(step); };
    options.on_step_begin = [agent](int64_t step) { agent->begin_step(step); };
    options.on_storage_wait = [agent](bool waiting) { agent->storage_wait(waiting); };
  }
  const std::unique_ptr<engine::Device> device = engine::make_device(options.device);
  const std::unique_ptr<engine::Comm> device_world = engine::make_device_comm(*device, world_comm);
  engine::Comm* world = device_world ? device_world.get() : &world_comm;
  engine::Trainer trainer(s, options, *world, node, device.get());
  if (agent != nullptr) agent->begin_training(trainer.start_step(), trainer.checkpoint_load_s());
  if (world->rank() == 0 && !json) {
    out << s.name << ": " << s.cluster.gpus << " processes, TP " << s.parallel.tp << " PP "
        << s.parallel.pp << stage_layers_text(s) << " VPP " << s.parallel.vpp << " DP " << s.parallel.dp
        << ", steps " << trainer.start_step() + 1 << ".." << s.train.steps << "\n";
    if (trainer.start_step() > 0) {
      fmt::print(out, "resumed from the checkpoint of step {}: loaded in {:.4f} s on rank 0 ({})\n",
                 trainer.start_step(), trainer.checkpoint_load_s(),
                 s.recovery.checkpoint_load == "every_rank" ? "every rank reads its shard"
                                                            : "one reader per DP group");
    }
  }
  // MFU above 100% means the peak it divides by is below what the step did:
  // the profile's peak_tflops is wrong (measured on a busier machine, or for
  // another device), not the run. It is reported as such, never as a figure.
  const model::GpuProfile& profile = model::hardware_profile(s);
  bool warned = false;
  trainer.run([&](const engine::StepReport& r) {
    if (agent != nullptr) agent->on_step(r.step, r.rank_step_s);
    if (world->rank() != 0) return;
    const bool mfu_valid = r.mfu > 0 && r.mfu <= 1;
    std::string mfu_problem;
    if (!mfu_valid) {
      mfu_problem = fmt::format(
          "MFU {:.0f}% is outside (0, 100%]: the peak it is measured against, profile '{}' ({}) peak_tflops = "
          "{:.4g} TFLOP/s per {}, is below what this step achieved; re-measure it with `megascale calibrate micro`",
          100 * r.mfu, profile.name, profile.source_file.empty() ? "built in" : profile.source_file,
          profile.peak_tflops, options.device.name == "cuda" ? "GPU" : "core");
      if (!warned) std::cerr << "megascale-train: " << mfu_problem << "\n";
      warned = true;
    }
    if (json) {
      base::Json j;
      j["step"] = static_cast<int64_t>(r.step);
      j["loss"] = r.loss;
      j["step_time_s"] = r.step_time_s;
      j["tokens_per_s"] = r.tokens_per_s;
      j["mfu"] = mfu_valid ? base::Json(r.mfu) : base::Json(nullptr);
      if (!mfu_valid) j["mfu_invalid"] = mfu_problem;
      j["grad_norm"] = r.grad_norm;
      out << base::with_header(j).dump() << "\n" << std::flush;
    } else {
      fmt::print(out, "step {:4}  loss {:.5f}  grad norm {:.3f}  {:.3f} s  {:.0f} tokens/s  ", r.step, r.loss,
                 r.grad_norm, r.step_time_s, r.tokens_per_s);
      if (mfu_valid) {
        fmt::print(out, "MFU {:.1f}%\n", 100 * r.mfu);
      } else {
        out << "MFU n/a (the profile's peak is too low; see stderr)\n";
      }
      out << std::flush;
    }
  });
  if (agent != nullptr) agent->set_phase("done");
  return 0;
}

}  // namespace
}  // namespace megascale::tools

int main(int argc, char** argv) {
  using namespace megascale;
  const base::Command command = {"", "FILE [--json] [--set KEY=VALUE]...",
                                 "one rank of the trainer (normally started by `megascale train` or `megascale run`)",
                                 {{"--json", base::Kind::kFlag, "", "the report as JSON"},
                                  {"--set", base::Kind::kRepeated, "KEY=VALUE", "override one scenario key"},
                                  {"--help", base::Kind::kFlag, "", "this text"}}};
  base::ParsedArgs args;
  try {
    args = base::parse_args(command, std::vector<std::string>(argv + 1, argv + argc));
    if (!args.on("--help") && args.positional.size() != 1) throw base::UsageError("expects exactly one scenario FILE");
  } catch (const base::UsageError& e) {
    std::cerr << "megascale-train: " << e.what() << "\n\n" << base::usage_text(command, "megascale-train");
    return 2;
  }
  if (args.on("--help")) {
    std::cout << base::usage_text(command, "megascale-train");
    return 0;
  }
  const bool json = args.on("--json");
  const std::vector<std::string> files = args.positional, overrides = args.all("--set");
  // Under `megascale run`, each rank's stderr goes to its own log, which the
  // driver scans for error keywords (robust/diagnosis.h).
  const char* log_dir = std::getenv(robust::kEnvLogDir);
  const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (log_dir != nullptr && world_rank != nullptr) {
    const std::string log = std::string(log_dir) + "/rank_" + world_rank + ".log";
    if (std::FILE* f = std::freopen(log.c_str(), "a", stderr)) (void)f;
  }
  try {
    const model::Scenario s = model::load_scenario(files[0], overrides);
    model::check_trainable(s);
    return tools::run_rank(&argc, &argv, s, json, std::cout, std::cerr);
  } catch (const model::ScenarioError& e) {
    // Every rank reads the same file: let one of them say so.
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (rank == nullptr || std::string(rank) == "0") std::cerr << "megascale-train: " << e.what() << "\n";
    return 2;
  }
}
