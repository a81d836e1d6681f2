// robust/heartbeat.h: the rank side of `megascale run`: a heartbeat thread
// that reports the rank's status to Redis, and the rank-side faults.
//
// defines: RankAgentConfig, RankAgent, rank_agent_config_from_env
//
// engine/tools/train_rank_main.cc makes a RankAgent when the driver started it (the
// MEGASCALE_* environment, robust/keys.h), wraps its world communicator in the
// agent's MonitoredComm and calls on_step / on_checkpoint. Every
// heartbeat_period_s the thread writes the whole hash ms:<job>:rank:<r> (pid,
// node, attempt, phase, step, compute_s, comm_s, current collective,
// seq:<group>, traffic counters, checkpoint and load times, time_s). A write
// that fails (Redis down) is retried on the next period with a fresh
// connection: the training never waits for Redis.
//
// compute_s of a step: the CPU time the rank's process spent between two
// step ends, less the CPU time of its communication (each collective's CPU
// time on the thread that ran it: MPI busy-polls while it waits), of a
// checkpoint save in between (its stall: the snapshot copied on the rank's
// thread; and its completion), and of the background checkpoint writer's
// thread in the same interval (engine/background_cpu.h, read live, so a write
// that spans several steps is taken out of each of them by what it used
// there). A slow rank's own compute goes up while its peers' waiting goes
// into their communication. CPU time, not wall time: on a
// shared machine a rank that is descheduled for a while is not slow
// (wall-time ratios of 3-5x between two healthy ranks were seen on a 2-core
// machine at load 6); CPU time of the same work varies far less.
//
// Thread-safety: on_step, on_checkpoint, set_phase and the hooks run on the
// rank's thread; the heartbeat thread reads under a mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/comm.h"
#include "model/config.h"
#include "robust/monitored_comm.h"
#include "robust/redis_client.h"

namespace megascale::robust {

struct RankAgentConfig {
  std::string redis_host;
  int redis_port = 0;
  std::string job;
  int attempt = 1;
  int rank = 0;
  int node = 0;
  double heartbeat_period_s = 1;
  std::vector<model::InjectSpec> faults;  // this rank's (rank == rank)
  std::string checkpoint_dir;             // for corrupt_checkpoint
  engine::CheckpointLayout layout;        // idem (shard path check)
};

// From the MEGASCALE_* environment; nullopt when MEGASCALE_REDIS is not set
// (a plain `megascale train`). Throws std::invalid_argument for a malformed
// variable, naming it.
std::optional<RankAgentConfig> rank_agent_config_from_env(int rank);

class RankAgent {
 public:
  explicit RankAgent(RankAgentConfig config);
  ~RankAgent();  // stops the heartbeat thread after a last heartbeat
  RankAgent(const RankAgent&) = delete;
  RankAgent& operator=(const RankAgent&) = delete;

  // The monitored world; valid while `world` and the agent live.
  engine::Comm& wrap(engine::Comm& world);
  void set_phase(const std::string& phase);
  // Training begins after the trainer resumed at `start_step` (load took load_s).
  void begin_training(int64_t start_step, double load_s);
  // At the start of step `step` (1-based), inside the step
  // (engine::TrainOptions::on_step_begin): the slow fault burns CPU here,
  // percent% of the previous step's own compute, so the step's compute grows
  // as on a slower processor.
  void begin_step(int64_t step);
  // After step `step` (1-based) finished on this rank, which spent
  // rank_step_s in it (engine::StepReport::rank_step_s: forward, backward,
  // optimizer and their communication; not the wait for data).
  void on_step(int64_t step, double rank_step_s);
  void on_checkpoint(int64_t step, double snapshot_s, double persist_s, uint64_t bytes);
  // The stall of the save at step `step` ended (engine::TrainOptions::on_save_end):
  // the snapshot's CPU is not the next step's compute.
  void end_save(int64_t step);
  // The rank blocks until its checkpoint write reached storage (true) or no
  // longer (false): the heartbeat's storage_wait_since_s (0 when not waiting).
  void storage_wait(bool waiting);

 private:
  void beat();
  void loop();
  // Fires the faults due at a collective entry of the current step.
  void before_enter();
  void after_enter();
  void record_fired(const model::InjectSpec& f);
  const model::InjectSpec* due(const std::string& fault);

  RankAgentConfig config_;
  std::shared_ptr<RankMonitor> monitor_;
  std::unique_ptr<MonitoredComm> world_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
  std::map<std::string, std::string> status_;  // fields besides the monitor's
  std::vector<bool> fired_;
  bool training_ = false;
  int64_t step_ = 0;              // steps completed
  double last_comm_cpu_s_ = 0;    // monitor's comm_cpu_s at the previous on_step
  double last_cpu_s_ = 0;         // process CPU time at the previous on_step
  double last_background_cpu_s_ = 0;  // engine::background_cpu_s() at the previous on_step
  double base_compute_s_ = 0;     // the previous step's compute without the injected part
  double injected_s_ = 0;         // slow fault: CPU burnt in the current step
  bool hung_ = false;
  std::mutex fire_mutex_;
  std::unique_ptr<RedisClient> fire_client_;  // the rank thread's own connection
  std::unique_ptr<RedisClient> beat_client_;  // the heartbeat thread's
};

}  // namespace megascale::robust
