// robust/heartbeat.cc: see heartbeat.h.
#include "robust/heartbeat.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "engine/background_cpu.h"
#include "robust/fault_injection.h"
#include "robust/keys.h"
#include "robust/self_check.h"

namespace megascale::robust {
namespace {

// CPU time of the whole process: with dp_overlap the collectives (and an
// injected spin at their entry) run on the executor's communication thread.
double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

[[noreturn]] void block_forever() {
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// How many recent steps' compute times the heartbeat carries: enough for the
// driver, polling every heartbeat period, to see every step of a fast run.
constexpr size_t kComputeHistory = 16;

}  // namespace

std::optional<RankAgentConfig> rank_agent_config_from_env(int rank) {
  const char* redis = std::getenv(kEnvRedis);
  if (redis == nullptr || *redis == '\0') return std::nullopt;
  RankAgentConfig c;
  try {
    const auto [host, port] = parse_host_port(redis);
    c.redis_host = host;
    c.redis_port = port;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string(kEnvRedis) + ": " + e.what());
  }
  const char* job = std::getenv(kEnvJob);
  c.job = job != nullptr ? job : "job";
  c.rank = rank;
  if (const char* a = std::getenv(kEnvAttempt)) c.attempt = std::atoi(a);
  if (const char* h = std::getenv(kEnvHeartbeat)) {
    c.heartbeat_period_s = std::atof(h);
    if (!(c.heartbeat_period_s > 0)) throw std::invalid_argument(std::string(kEnvHeartbeat) + ": expected seconds > 0");
  }
  c.node = rank;
  if (const char* nodes = std::getenv(kEnvNodes)) {
    std::istringstream in(nodes);
    std::string item;
    for (int r = 0; std::getline(in, item, ','); ++r) {
      if (r == rank) c.node = std::atoi(item.c_str());
    }
  }
  if (const char* inject = std::getenv(kEnvInject)) {
    try {
      for (const model::InjectSpec& f : parse_inject_list(inject)) {
        // slow_all hits every rank; redis_kill, link_cut and node_down are the driver's.
        if (f.fault == "slow_all" || (f.rank == rank && f.fault != "redis_kill" && f.fault != "link_cut" &&
                                      f.fault != "node_down")) {
          c.faults.push_back(f);
        }
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(kEnvInject) + ": " + e.what());
    }
  }
  return c;
}

RankAgent::RankAgent(RankAgentConfig config)
    : config_(std::move(config)), monitor_(std::make_shared<RankMonitor>(config_.rank)),
      fired_(config_.faults.size(), false) {
  status_ = {{"pid", std::to_string(::getpid())},
             {"node", std::to_string(config_.node)},
             {"attempt", std::to_string(config_.attempt)},
             {"phase", std::string("init")},
             {"step", std::string("0")}};
  monitor_->before_enter = [this] { before_enter(); };
  monitor_->after_enter = [this] { after_enter(); };
  fire_client_ = std::make_unique<RedisClient>(config_.redis_host, config_.redis_port, 0.5);
  beat_client_ = std::make_unique<RedisClient>(config_.redis_host, config_.redis_port, 0.5);
  thread_ = std::thread([this] { loop(); });
}

RankAgent::~RankAgent() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

engine::Comm& RankAgent::wrap(engine::Comm& world) {
  std::vector<int> members;
  for (int r = 0; r < world.size(); ++r) members.push_back(r);
  world_ = std::make_unique<MonitoredComm>(world, monitor_, members);
  return *world_;
}

void RankAgent::set_phase(const std::string& phase) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_["phase"] = phase;
  }
  wake_.notify_all();  // a phase change is reported at once
}

void RankAgent::begin_training(int64_t start_step, double load_s) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    step_ = start_step;
    training_ = true;
    status_["phase"] = "training";
    status_["step"] = std::to_string(start_step);
    status_["start_step"] = std::to_string(start_step);
    status_["load_s"] = redis_number(load_s);
    status_["ready_at_s"] = redis_number(wall_now_s());
  }
  last_comm_cpu_s_ = monitor_->snapshot().comm_cpu_s;
  last_cpu_s_ = process_cpu_s();
  last_background_cpu_s_ = engine::background_cpu_s();
  base_compute_s_ = 0;
  injected_s_ = 0;
  wake_.notify_all();
}

void RankAgent::on_step(int64_t step, double rank_step_s) {
  // Communication since the previous step: this step's, plus the small
  // per-step report broadcast and any checkpoint collectives in between.
  // Background helpers (the checkpoint writer's thread) in the same interval,
  // read live: their CPU is not the step's, whenever their work started.
  const double comm_cpu_s = monitor_->snapshot().comm_cpu_s;
  const double background_s = engine::background_cpu_s();
  const double cpu_s = process_cpu_s();
  const double compute = std::max(0.0, (cpu_s - last_cpu_s_) - (comm_cpu_s - last_comm_cpu_s_) -
                                           (background_s - last_background_cpu_s_));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    step_ = step;
    status_["step"] = std::to_string(step);
    status_["step_at_s"] = redis_number(wall_now_s());
    status_["compute_s"] = redis_number(compute);
    status_["step_wall_s"] = redis_number(rank_step_s);
    std::string hist = status_["compute_hist"];
    if (!hist.empty()) hist += ",";
    hist += std::to_string(step);
    hist += ":";
    hist += redis_number(compute);
    size_t entries = 1;
    for (char c : hist) entries += c == ',';
    while (entries > kComputeHistory) {
      hist.erase(0, hist.find(',') + 1);
      --entries;
    }
    status_["compute_hist"] = hist;
  }
  base_compute_s_ = std::max(0.0, compute - injected_s_);
  injected_s_ = 0;
  last_comm_cpu_s_ = comm_cpu_s;
  last_background_cpu_s_ = engine::background_cpu_s();
  last_cpu_s_ = process_cpu_s();
}

void RankAgent::begin_step(int64_t step) {
  // The slow fault: from its step on, every step first burns CPU for
  // percent% of the previous step's own compute (without the injected part):
  // the step does that much more work, as on a slower processor. The first
  // step of an attempt has no previous one to scale and runs unslowed.
  // slow_all does the same on every rank at once.
  (void)step;  // due() compares the fault's step with step_ + 1 == step
  const model::InjectSpec* f = due("slow");
  if (f == nullptr) f = due("slow_all");
  if (f == nullptr || base_compute_s_ <= 0) return;
  record_fired(*f);
  const double burn_s = f->percent / 100.0 * base_compute_s_;
  const double until = thread_cpu_s() + burn_s;
  volatile double sink = 0;
  while (thread_cpu_s() < until) sink = sink + 1;
  injected_s_ += burn_s;
}

void RankAgent::on_checkpoint(int64_t step, double snapshot_s, double persist_s, uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  status_["ckpt_step"] = std::to_string(step);
  status_["ckpt_snapshot_s"] = redis_number(snapshot_s);
  status_["ckpt_persist_s"] = redis_number(persist_s);
  status_["ckpt_bytes"] = std::to_string(bytes);
  status_["ckpt_count"] = std::to_string(std::atoll(status_["ckpt_count"].c_str()) + 1);
  status_["ckpt_snapshot_total_s"] = redis_number(std::atof(status_["ckpt_snapshot_total_s"].c_str()) + snapshot_s);
  status_["ckpt_persist_total_s"] = redis_number(std::atof(status_["ckpt_persist_total_s"].c_str()) + persist_s);
  last_comm_cpu_s_ = monitor_->snapshot().comm_cpu_s;  // the save is not the next step's compute
  last_background_cpu_s_ = engine::background_cpu_s();
  last_cpu_s_ = process_cpu_s();
}

void RankAgent::end_save(int64_t step) {
  (void)step;
  last_comm_cpu_s_ = monitor_->snapshot().comm_cpu_s;  // the snapshot is not the next step's compute
  last_background_cpu_s_ = engine::background_cpu_s();
  last_cpu_s_ = process_cpu_s();
}

void RankAgent::storage_wait(bool waiting) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    status_["storage_wait_since_s"] = waiting ? redis_number(wall_now_s()) : std::string("0");
  }
  wake_.notify_all();  // reported at once
}

const model::InjectSpec* RankAgent::due(const std::string& fault) {
  if (!training_) return nullptr;
  for (size_t i = 0; i < config_.faults.size(); ++i) {
    const model::InjectSpec& f = config_.faults[i];
    if (f.fault == fault && step_ + 1 >= f.step && (fault == "slow" || fault == "slow_all" || !fired_[i])) return &f;
  }
  return nullptr;
}

void RankAgent::record_fired(const model::InjectSpec& f) {
  const size_t i = static_cast<size_t>(&f - config_.faults.data());
  if (fired_[i]) return;
  fired_[i] = true;
  // slow_all fires on every rank; rank 0 reports it once, for the job (rank -1).
  if (f.fault == "slow_all" && config_.rank != 0) return;
  std::lock_guard<std::mutex> lock(fire_mutex_);
  const std::string entry =
      f.fault + "|" + std::to_string(f.fault == "slow_all" ? -1 : config_.rank) + "|" + std::to_string(step_ + 1) + "|" + redis_number(wall_now_s());
  fire_client_->rpush(job_key(config_.job, "fired"), entry);
  // The hardware part of the fault stays with the node (robust/self_check.h
  // NodeFaults): a self-check on it meets the same slow processor or dead link.
  if (f.fault == "slow" || f.fault == "traffic_stop") {
    NodeFaults hw;
    hw.compute_extra_percent = f.fault == "slow" ? f.percent : 0;
    hw.link_down = f.fault == "traffic_stop";
    fire_client_->hset(job_key(config_.job, "hw:" + std::to_string(config_.node)), node_faults_fields(hw));
  }
  std::cerr << "megascale-train: rank " << config_.rank << ": injecting " << format_inject(f) << "\n" << std::flush;
}

void RankAgent::before_enter() {
  if (const model::InjectSpec* f = due("kill")) {
    record_fired(*f);
    ::raise(SIGKILL);
  }
  if (const model::InjectSpec* f = due("corrupt_checkpoint")) {
    const std::optional<int64_t> latest = engine::latest_checkpoint(config_.checkpoint_dir);
    if (latest) {
      const std::string shard = engine::shard_path(config_.checkpoint_dir, *latest, config_.rank);
      try {
        corrupt_file(shard, 100, 16);  // inside the body: the CRC no longer matches
        std::cerr << "megascale-train: rank " << config_.rank << ": corrupted " << shard << "\n";
      } catch (const std::exception& e) {
        std::cerr << "megascale-train: rank " << config_.rank << ": " << e.what() << "\n";
      }
    } else {
      std::cerr << "megascale-train: rank " << config_.rank << ": corrupt_checkpoint: no complete checkpoint yet\n";
    }
    record_fired(*f);
    ::raise(SIGKILL);
  }
  if (const model::InjectSpec* f = due("traffic_stop")) {
    record_fired(*f);
    block_forever();  // alive, heartbeating, sending and receiving nothing
  }
}

void RankAgent::after_enter() {
  if (const model::InjectSpec* f = due("hang")) {
    record_fired(*f);
    block_forever();  // inside the collective: entered, never posted
  }
}

void RankAgent::beat() {
  std::map<std::string, std::string> fields;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fields = status_;
  }
  const RankMonitor::Snapshot s = monitor_->snapshot();
  fields["coll_op"] = s.current.op;
  fields["coll_group"] = s.current.group;
  fields["coll_seq"] = std::to_string(s.current.seq);
  fields["coll_state"] = s.current.state;
  fields["coll_peer"] = std::to_string(s.current.peer);
  for (const auto& [group, seq] : s.seq_by_group) fields["seq:" + group] = std::to_string(seq);
  fields["comm_s"] = redis_number(s.comm_s);
  fields["bytes_sent"] = std::to_string(s.bytes_sent);
  fields["bytes_recv"] = std::to_string(s.bytes_recv);
  fields["time_s"] = redis_number(wall_now_s());
  beat_client_->hset(job_key(config_.job, "rank:" + std::to_string(config_.rank)), fields);
}

void RankAgent::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    beat();
    lock.lock();
    wake_.wait_for(lock, std::chrono::duration<double>(config_.heartbeat_period_s));
  }
  lock.unlock();
  beat();
}

}  // namespace megascale::robust
