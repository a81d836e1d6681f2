// robust/driver_options.cc: `megascale run FILE` -> DriverOptions (robust/driver.h).
#include <filesystem>

#include "engine/launch_check.h"
#include "robust/driver.h"
#include "robust/fault_injection.h"

namespace megascale::robust {
namespace {

// The faults after which the driver restarts the job from its latest complete
// checkpoint (a slow rank only when it is evicted).
bool restarts_job(const model::InjectSpec& f, const model::Scenario& s) {
  return f.fault == "corrupt_checkpoint" || f.fault == "kill" || f.fault == "hang" || f.fault == "traffic_stop" ||
         f.fault == "link_cut" || f.fault == "node_down" || (f.fault == "slow" && s.recovery.evict_slow);
}

}  // namespace

DriverOptions driver_options(const std::string& scenario_path, const std::vector<std::string>& overrides,
                             const std::vector<std::string>& injects, const std::string& self_binary) {
  DriverOptions o;
  o.scenario_path = scenario_path;
  o.overrides = overrides;
  o.scenario = model::load_scenario(scenario_path, overrides);
  const model::Scenario& s = o.scenario;
  if (s.train.device != "cpu") {
    throw model::ScenarioError(s.source, 0, 0, "train.device",
                               "`megascale run` drives the CPU engine (train.device = \"cpu\")");
  }
  // Refused here, before a node is launched: a scenario the engine cannot run
  // would fail every attempt and be taken for a faulty node each time.
  model::check_trainable(s);
  engine::check_before_launch(s);
  o.faults = s.inject;
  for (const std::string& text : injects) o.faults.push_back(parse_inject(text));
  for (size_t i = 0; i < o.faults.size(); ++i) {
    const model::InjectSpec& f = o.faults[i];
    check_inject(f, s.cluster.gpus, s.train.steps);
    // The same fault twice (on the command line, or there and in the
    // scenario's [[inject]]) fired once: the profile showed one fault where two
    // were asked for.
    for (size_t j = 0; j < i; ++j) {
      if (format_inject(o.faults[j]) == format_inject(f)) {
        throw std::invalid_argument("fault " + format_inject(f) + " is given twice: it fires once");
      }
    }
    if (restarts_job(f, s) && (s.train.checkpoint_dir.empty() || s.train.checkpoint_every <= 0)) {
      throw model::ScenarioError(s.source, 0, 0, "train.checkpoint_every",
                                 "fault " + format_inject(f) +
                                     " restarts the job: it needs train.checkpoint_dir and checkpoint_every > 0");
    }
  }
  o.self_binary = self_binary;
  o.engine_binary = (std::filesystem::path(self_binary).parent_path() / "megascale-train").string();
  o.profile_path = "results/recovery/" + s.name + ".json";
  o.work_dir = s.train.work_dir + "/run-" + s.name;
  return o;
}

}  // namespace megascale::robust
