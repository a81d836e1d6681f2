// robust/driver.h: the driver of `megascale run FILE`: robust training on the
// CPU engine (MegaScale NSDI'24 section 4: detect, diagnose, evict, resume).
//
// defines: DriverOptions, driver_options (driver_options.cc), run_driver
//
// 1. Control plane: a private redis-server on a free port in the run's work
//    folder (or [recovery] redis = "host:port"); one executor process per node
//    (cluster.gpus / hardware.gpus_per_node nodes) plus min(spare_nodes, 4)
//    spares, registered in Redis (robust/executor.h).
// 2. Each attempt: the layout (rank -> node) is published, and the ranks run
//    as `mpirun -np N megascale-train FILE --json` in its own process group,
//    with the MEGASCALE_* environment (robust/keys.h): heartbeats, the
//    monitored world, the faults not yet fired. Open MPI is the data path
//    only: nothing of the control plane depends on mpirun surviving (Open MPI
//    4.1 ends every rank when one dies).
// 3. Every heartbeat_period_s / 4 the driver reads the heartbeats and the
//    executors' reports, rank 0's JSON lines (the loss per step) and scans the
//    logs; the detectors (robust/detector.h) fire on a rank gone, a heartbeat
//    missed, an error keyword, the job exiting, a stall, a slow rank (reported;
//    evicted with evict_slow), or Redis gone.
// 4. Then: diagnosis (robust/diagnosis.h: log line, executor report, wait-for
//    chain), eviction (the attempt's processes SIGKILLed and reaped, the node
//    marked bad, a spare executor takes its slot; without a spare the node
//    returns to service and a note says so), relaunch: the engine resumes from
//    the latest complete checkpoint. A checkpoint whose shard fails its CRC is
//    refused by the engine; the driver then moves that step folder aside
//    (step_<k>.corrupt) and relaunches from the previous complete one. Redis
//    gone: restarted on the same port, training goes on.
// 5. At the end: results/recovery/<scenario>.json (robust/recovery_profile.h)
//    and one line per fault on `out`.
//
// Thread-safety: one driver per process (it forks and waits for children).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "model/scenario.h"

namespace megascale::robust {

struct DriverOptions {
  std::string scenario_path;
  std::vector<std::string> overrides;     // --set KEY=VALUE, passed to the ranks too
  model::Scenario scenario;               // loaded with the overrides
  std::vector<model::InjectSpec> faults;  // [[inject]] + --inject, checked
  std::string engine_binary;              // megascale-train
  std::string self_binary;                // megascale (for the executors)
  std::string profile_path;               // results/recovery/<scenario>.json
  std::string work_dir;                   // logs, Redis folder
};

// The options of `megascale run SCENARIO_PATH`: the scenario loaded with the
// overrides (it must train on the CPU engine), its [[inject]] faults and the
// `injects` (parse_inject's text form) checked against the job, where a fault
// that restarts the job needs a checkpoint to resume from; the binaries beside
// `self_binary`; the default profile path (results/recovery/<scenario>.json)
// and work directory (train.work_dir/run-<scenario>). Throws
// model::ScenarioError or std::invalid_argument naming what is wrong.
DriverOptions driver_options(const std::string& scenario_path, const std::vector<std::string>& overrides,
                             const std::vector<std::string>& injects, const std::string& self_binary);

// Returns 0 when the training completed (whatever it recovered from), 1 when
// it could not (the reason on `err` and in the profile).
int run_driver(const DriverOptions& o, std::ostream& out, std::ostream& err);

}  // namespace megascale::robust
