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

int cmd_run(const Args& args, std::ostream& out, std::ostream& err) {
  robust::DriverOptions o;
  robust::ExecutorOptions ex;
  bool executor = false;
  std::vector<std::string> files, injects;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--executor") {
      executor = true;
    } else if (a == "--redis" && has_value) {
      ex.redis = args[++i];
    } else if (a == "--job" && has_value) {
      ex.job = args[++i];
    } else if (a == "--node" && has_value) {
      ex.node = std::atoi(args[++i].c_str());
    } else if (a == "--period" && has_value) {
      ex.period_s = std::atof(args[++i].c_str());
    } else if (a == "--inject" && has_value) {
      injects.push_back(args[++i]);
    } else if (a == "--set" && has_value) {
      o.overrides.push_back(args[++i]);
    } else if (a == "--out" && has_value) {
      o.profile_path = args[++i];
    } else if (a == "--work-dir" && has_value) {
      o.work_dir = args[++i];
    } else if (a.rfind("--", 0) == 0) {
      err << "megascale run: unknown option '" << a << "' (or it lacks its value)\n\n" << command_usage("run");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (executor) {
    if (ex.redis.empty() || ex.job.empty() || !(ex.period_s > 0)) {
      err << "megascale run --executor: needs --redis HOST:PORT --job J --node N --period S\n";
      return 2;
    }
    return robust::run_executor(ex);
  }
  if (files.size() != 1) {
    err << "megascale run: expects exactly one scenario FILE\n\n" << command_usage("run");
    return 2;
  }
  try {
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
  } catch (const model::ScenarioError& e) {
    err << "megascale run: " << e.what() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << "megascale run: " << e.what() << "\n";
    return 2;
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

}  // namespace megascale::cli
