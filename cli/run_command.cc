// cli/run_command.cc: `megascale run FILE [--inject NAME:rank=R:step=S]...
// [--set KEY=VALUE]... [--out FILE] [--work-dir DIR]`: robust training
// (robust/driver.h): the engine under a driver with executors, heartbeats in
// Redis, fault injection, detection, diagnosis, eviction and resume; writes
// the measured recovery profile (default results/recovery/<scenario>.json).
// `megascale run --executor --redis H:P --job J --node N --period S` is one
// executor (robust/executor.h), started by the driver.
#include <filesystem>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/scenario.h"
#include "robust/driver.h"
#include "robust/executor.h"
#include "robust/fault_injection.h"
#include "robust/redis_server.h"

namespace megascale::cli {

namespace {

int run(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  robust::DriverOptions o;
  robust::ExecutorOptions ex;
  const bool executor = p.on("--executor");
  ex.redis = p.text("--redis", ex.redis);
  ex.job = p.text("--job", ex.job);
  ex.node = static_cast<int>(p.integer("--node", ex.node));
  ex.period_s = p.number("--period", ex.period_s);
  ex.address = p.text("--address", ex.address);
  const std::vector<std::string> injects = p.all("--inject");
  const std::vector<std::string>& files = p.positional;
  o.overrides = p.all("--set");
  o.profile_path = p.text("--out", o.profile_path);
  o.work_dir = p.text("--work-dir", o.work_dir);
  if (executor) {
    if (ex.redis.empty() || ex.job.empty() || !(ex.period_s > 0)) {
      err << "megascale run --executor: needs --redis HOST:PORT --job J --node N --period S\n";
      return 2;
    }
    return robust::run_executor(ex);
  }
  if (files.size() != 1) throw UsageError("expects exactly one scenario FILE");
  o.scenario_path = files[0];
  o.scenario = model::load_scenario(files[0], o.overrides);
  if (o.scenario.train.device != "cpu") {
    throw model::ScenarioError(o.scenario.source, 0, 0, "train.device",
                               "`megascale run` drives the CPU engine (train.device = \"cpu\")");
  }
  o.faults = o.scenario.inject;
  for (const std::string& text : injects) o.faults.push_back(robust::parse_inject(text));
  for (const model::InjectSpec& f : o.faults) robust::check_inject(f, o.scenario.cluster.gpus, o.scenario.train.steps);
  for (const model::InjectSpec& f : o.faults) {
    if ((f.fault == "corrupt_checkpoint" || f.fault == "kill" || f.fault == "hang" || f.fault == "traffic_stop" ||
         (f.fault == "slow" && o.scenario.recovery.evict_slow)) &&
        (o.scenario.train.checkpoint_dir.empty() || o.scenario.train.checkpoint_every <= 0)) {
      throw model::ScenarioError(o.scenario.source, 0, 0, "train.checkpoint_every",
                                 "fault " + robust::format_inject(f) +
                                     " restarts the job: it needs train.checkpoint_dir and checkpoint_every > 0");
    }
  }
  if (!robust::redis_server_available() && o.scenario.recovery.redis.empty()) {
    err << "megascale run: redis-server is not on PATH (install redis-server: scripts/setup.sh) and [recovery] redis "
           "names no server\n";
    return 2;
  }
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  o.self_binary = self.string();
  o.engine_binary = (self.parent_path() / "megascale-train").string();
  if (!std::filesystem::exists(o.engine_binary)) {
    err << "megascale run: " << o.engine_binary << " is missing (build the megascale-train target)\n";
    return 1;
  }
  if (o.profile_path.empty()) o.profile_path = "results/recovery/" + o.scenario.name + ".json";
  if (o.work_dir.empty()) o.work_dir = o.scenario.train.work_dir + "/run-" + o.scenario.name;
  return robust::run_driver(o, out, err);
}

}  // namespace

CommandEntry run_command() {
  return {{"run", "FILE [options]",
           "robust training: driver, executors, Redis heartbeats, fault injection, detection,\n"
           "diagnosis, eviction, resume; writes results/recovery/<scenario>.json",
           {{"--inject", Kind::kRepeated, "NAME:rank=R:step=S[:percent=P]", "a fault to inject (repeatable)"},
            set_option(),
            {"--out", Kind::kText, "FILE", "the measured recovery profile"},
            {"--work-dir", Kind::kText, "DIR", "checkpoints and logs (default: train.work_dir/run-NAME)"},
            {"--executor", Kind::kFlag, "", "one executor, started by the driver, with:"},
            {"--redis", Kind::kText, "HOST:PORT", "the control plane"},
            {"--job", Kind::kText, "J", "the job's name"},
            {"--node", Kind::kInt, "N", "this executor's node", 0, kMaxInt},
            {"--period", Kind::kNumber, "S", "heartbeat period in seconds", kAboveZero, kNoLimit},
            {"--address", Kind::kText, "IP", "this node's address (in a network namespace): self-checks listen there"}}},
          run};
}

}  // namespace megascale::cli
