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

#include "base/text_file.h"
#include "cli/commands.h"
#include "robust/driver.h"
#include "robust/executor.h"
#include "robust/redis_server.h"

namespace megascale::cli {

namespace {

int run(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  if (p.on("--executor")) {
    robust::ExecutorOptions ex;
    ex.redis = p.text("--redis", ex.redis);
    ex.job = p.text("--job", ex.job);
    ex.node = static_cast<int>(p.integer("--node", ex.node));
    ex.period_s = p.number("--period", ex.period_s);
    ex.address = p.text("--address", ex.address);
    if (ex.redis.empty() || ex.job.empty() || !(ex.period_s > 0))
      throw UsageError("--executor needs --redis HOST:PORT --job J --node N --period S");
    return robust::run_executor(ex);
  }
  if (p.positional.size() != 1) throw UsageError("expects exactly one scenario FILE");
  robust::DriverOptions o = robust::driver_options(p.positional[0], p.all("--set"), p.all("--inject"),
                                                   std::filesystem::read_symlink("/proc/self/exe").string());
  o.profile_path = p.text("--out", o.profile_path);
  o.work_dir = p.text("--work-dir", o.work_dir);
  // The profile is written when the run ends (robust/recovery_profile.h
  // write_profile makes its folders): a path it cannot write is refused now,
  // not after the training.
  base::check_output_path(o.profile_path, /*create_folders=*/true);
  // The work folder (the driver's too): one that cannot be made is named now.
  read_option("--work-dir", [&] { base::make_folder_or_throw(o.work_dir); return 0; });
  if (!robust::redis_server_available() && o.scenario.recovery.redis.empty()) {
    err << "megascale run: redis-server is not on PATH (install redis-server: scripts/setup.sh) and [recovery] redis "
           "names no server\n";
    return 2;
  }
  if (!std::filesystem::exists(o.engine_binary)) {
    err << "megascale run: " << o.engine_binary << " is missing (build the megascale-train target)\n";
    return 1;
  }
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
