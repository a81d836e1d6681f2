// robust/driver.cc: see driver.h.
#include "robust/driver.h"

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

#include "base/json.h"
#include "base/number_text.h"
#include "robust/attempt_dirs.h"
#include "robust/detector.h"
#include "robust/diagnosis.h"
#include "robust/executor.h"
#include "robust/fault_injection.h"
#include "robust/keys.h"
#include "robust/netns.h"
#include "robust/recovery_profile.h"
#include "robust/redis_client.h"
#include "robust/redis_server.h"
#include "robust/self_check.h"

namespace megascale::robust {
namespace {

// At most this many spare executors run on one machine, whatever
// [recovery] spare_nodes says (its default, 32, sizes a 12,288-GPU job).
constexpr int kMaxLocalSpares = 4;
// How long the driver waits for mpirun's report of a rank's death after
// noticing it, before naming the rank from the executors' reports instead.
constexpr double kSignalReportWait_s = 1.5;
// A stall while a rank waits for its checkpoint write to reach storage is a
// fault only after this many x [recovery] step_stall_s. Assumption: fsync of a
// 1 MB shard took over 3 s on this project's 2-core machine shared with
// compiler jobs; a storage that slow is not a rank's fault.
constexpr double kStorageWaitFactor = 10;
// Self-checks (robust/self_check.h): each all-reduce check's time limit. A
// 1 MiB all-reduce over loopback TCP takes about 1 ms here; 1 s leaves room
// for a 2-core machine at load 10 (assumption) and bounds what a dead link
// costs the check.
constexpr double kSelfCheckLimit_s = 1.0;
// ... and how long the driver waits for the executors' answers beyond the two
// all-reduce limits: an executor looks for a request every 50 ms and its
// compute check takes about 5 x 4 ms; 3 s covers a starved executor.
constexpr double kSelfCheckAnswerWait_s = 3.0;

using base::fixed;

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// SIGINT, SIGTERM or SIGHUP while the driver runs: it stops at its next poll
// and cleans up (attempt, executors, Redis, network namespaces) as after an
// error.
volatile sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

// The faults the driver fires itself (the ranks never see them).
bool driver_fault(const std::string& fault) {
  return fault == "redis_kill" || fault == "link_cut" || fault == "node_down";
}

// New complete lines of a growing file.
class LogTail {
 public:
  LogTail(std::string path, int rank) : path_(std::move(path)), rank_(rank) {}
  int rank() const { return rank_; }
  const std::string& path() const { return path_; }
  std::vector<std::string> read() {
    std::vector<std::string> lines;
    std::ifstream in(path_, std::ios::binary);
    if (!in) return lines;
    in.seekg(pos_);
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    pos_ += static_cast<std::streamoff>(chunk.size());
    partial_ += chunk;
    size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      lines.push_back(partial_.substr(start, nl - start));
      start = nl + 1;
    }
    partial_.erase(0, start);
    return lines;
  }

 private:
  std::string path_;
  int rank_;
  std::streamoff pos_ = 0;
  std::string partial_;
};

// Children of `parent` (from /proc), so that the ranks mpirun forked die with it
// even when they are in another process group.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string text;
    std::getline(stat, text);
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == parent) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

using Fired = FiredFault;

// A record of fault `f`, which is now given to a detection (or superseded).
FaultRecord take_fired(Fired& f) {
  f.matched = true;
  FaultRecord r;
  r.fault = f.fault;
  r.rank = f.rank;
  r.step = f.step;
  r.injected_at_s = f.at_s;
  return r;
}

// The first fault of `kind` not yet given to a detection, or nullptr.
Fired* first_unmatched(std::vector<Fired>& fired, const std::string& kind) {
  for (Fired& f : fired)
    if (!f.matched && f.fault == kind) return &f;
  return nullptr;
}

class Driver {
 public:
  Driver(const DriverOptions& o, std::ostream& out, std::ostream& err) : o_(o), s_(o.scenario), out_(out), err_(err) {}
  int run();

 private:
  void event(const std::string& text) {
    const double t = wall_now_s() - start_s_;
    profile_.events.push_back(fixed(t, 3) + " s: " + text);
    out_ << "[run " << fixed(t, 1) << " s] " << text << "\n" << std::flush;
  }
  // [recovery] nodes = "netns": one namespace per node and spare
  // (robust/netns.h), or the reason they cannot be made (local processes).
  void make_nodes();
  // Fires link_cut and node_down once their rank reports their step.
  void fire_network_faults(const std::vector<RankStatus>& st);
  void start_control_plane();
  void stop_control_plane();
  void publish_layout();
  void note_engine_error(const std::string& line);
  pid_t launch();
  void kill_attempt();
  std::vector<RankStatus> read_statuses();
  void read_fired();
  void read_stdout();
  std::optional<Detection> scan_logs(bool* checksum, long long* bad_step);
  bool handle_fault(const Detection& d, bool checksum, long long bad_step, const std::vector<RankStatus>& st);
  int node_of_rank(int rank) const { return slot_node_[static_cast<size_t>(rank / gpus_per_node_)]; }
  void finish_pending_ready(const std::vector<RankStatus>& st, double now);
  // Self-checks on the nodes of `suspect_ranks`, each with a reference node
  // (another node of the job, else a spare); the nodes judged faulty, in the
  // order of the ranks. Records the time and the report in `rec`.
  std::vector<int> self_check(const std::vector<int>& suspect_ranks, FaultRecord& rec);

  const DriverOptions& o_;
  const model::Scenario& s_;
  std::ostream& out_;
  std::ostream& err_;
  RecoveryProfile profile_;
  double start_s_ = 0;
  std::string job_;
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<RedisClient> redis_;
  std::string redis_address_;
  std::vector<pid_t> executors_;
  int ranks_ = 0, gpus_per_node_ = 1, nodes_ = 0;
  std::vector<int> slot_node_;   // logical node -> executor id
  std::vector<int> spares_;      // executor ids free to take a slot
  std::set<int> bad_nodes_;
  int attempt_ = 0;
  pid_t mpirun_ = -1;
  double launched_at_ = 0;
  std::vector<LogTail> logs_;
  std::unique_ptr<LogTail> stdout_;
  std::map<int64_t, double> losses_;
  int64_t first_step_this_attempt_ = -1;
  int64_t last_step_this_attempt_ = -1;  // rank 0's latest step line (stdout)
  bool node_unreachable_ = false;  // the heartbeat_missed detection's executor was silent too
  double first_step_at_ = 0;
  std::vector<Fired> fired_;
  std::set<std::string> fired_seen_;
  std::vector<model::InjectSpec> pending_faults_;
  std::optional<size_t> pending_record_;  // the fault whose restart is being measured
  // engine_error_text of every engine/checkpoint error line read, this
  // attempt and the one before (diagnosis.h: the same error after a recovery
  // is the job's).
  std::set<std::string> engine_errors_, engine_errors_before_;
  std::optional<size_t> redis_record_;
  double redis_restarted_at_ = 0;
  double redis_ok_since_ = 0;
  std::vector<uint64_t> traffic_;
  uint64_t check_id_ = 0;
  std::unique_ptr<NetnsCluster> net_;  // null: the nodes are local processes
};

void Driver::make_nodes() {
  const int spares = std::min(s_.recovery.spare_nodes, kMaxLocalSpares);
  std::string why;
  if (s_.recovery.nodes == "netns") {
    why = netns_unavailable_reason();
    if (why.empty()) {
      if (const int swept = sweep_stale_netns(); swept > 0) {
        event("removed " + std::to_string(swept) + " network namespace(s)/link(s) left by runs that are gone");
      }
      try {
        net_ = std::make_unique<NetnsCluster>(nodes_ + spares, static_cast<int>(::getpid()));
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (!net_) {
      profile_.netns_unavailable = why;
      event("network namespaces unavailable (" + why + "): the nodes are local processes instead");
    } else {
      profile_.node_kind = "netns";
      event("nodes are network namespaces: " + net_->describe());
    }
  }
  // Faults that need a node's network cannot happen without one.
  for (auto it = pending_faults_.begin(); it != pending_faults_.end();) {
    if (!net_ && (it->fault == "link_cut" || it->fault == "node_down")) {
      profile_.skipped_faults.push_back(format_inject(*it) + ": skipped, needs [recovery] nodes = \"netns\"" +
                                        (why.empty() ? std::string(" (the nodes are local processes)") : " (" + why + ")"));
      event("fault " + profile_.skipped_faults.back());
      it = pending_faults_.erase(it);
    } else {
      ++it;
    }
  }
}

void Driver::fire_network_faults(const std::vector<RankStatus>& st) {
  if (!net_) return;
  for (auto it = pending_faults_.begin(); it != pending_faults_.end(); ++it) {
    if (it->fault != "link_cut" && it->fault != "node_down") continue;
    const RankStatus& r = st[static_cast<size_t>(it->rank)];
    // The step the job has reached: the rank's heartbeat, or rank 0's step
    // line (the ranks move in lockstep; heartbeats lag a period behind).
    // Recorded as the step it fired at, which may be later than the one due.
    const int64_t reached = std::max(r.present ? r.step : 0, last_step_this_attempt_);
    if (!r.present || reached < it->step) continue;
    const int node = node_of_rank(it->rank);
    const double at = wall_now_s();
    if (it->fault == "link_cut") {
      net_->cut_link(node);
      event("injecting link_cut at step " + std::to_string(reached) + ": node " + std::to_string(node) + " (rank " +
            std::to_string(it->rank) + ") cut off: `ip link set " + net_->host_link(node) + " down`");
    } else {
      const std::vector<pid_t> killed = net_->remove_node(node);
      event("injecting node_down at step " + std::to_string(reached) + ": node " + std::to_string(node) + " (rank " +
            std::to_string(it->rank) + ") gone: " + std::to_string(killed.size()) +
            " process(es) SIGKILLed, its veth and namespace deleted");
    }
    fired_.push_back({it->fault, it->rank, static_cast<int>(reached), at, false});
    pending_faults_.erase(it);
    break;
  }
}

std::vector<int> Driver::self_check(const std::vector<int>& suspect_ranks, FaultRecord& rec) {
  std::vector<int> faulty_ranks;
  std::set<int> checked;
  rec.self_check_s = 0;
  for (int rank : suspect_ranks) {
    const int node = node_of_rank(rank);
    if (!checked.insert(node).second) continue;
    int reference = -1;
    for (int n : slot_node_) {
      if (n != node) {
        reference = n;
        break;
      }
    }
    if (reference < 0 && !spares_.empty()) reference = spares_.front();
    event("self-check on node " + std::to_string(node) + " (rank " + std::to_string(rank) + ")" +
          (reference >= 0 ? ", reference node " + std::to_string(reference) : std::string(", no reference node")));
    const SelfCheckPair pair = run_self_check_pair(*redis_, job_, node, reference, ++check_id_, s_.recovery.slow_factor,
                                                   kSelfCheckLimit_s, kSelfCheckAnswerWait_s);
    rec.self_check_s += pair.seconds;
    for (const std::string& l : pair.lines) {
      rec.self_check.push_back(l);
      event("  " + l);
    }
    if (pair.suspect_verdict.faulty) {
      faulty_ranks.push_back(rank);
      rec.self_check_faulty = true;
    }
  }
  rec.self_check_ran = true;
  return faulty_ranks;
}

void Driver::start_control_plane() {
  if (s_.recovery.redis.empty()) {
    // With namespaces, Redis listens on the bridge too: every node reaches it
    // over its own link.
    server_ = std::make_unique<RedisServer>(free_local_port(), o_.work_dir + "/redis", net_ ? net_->host_address() : "");
    server_->start();
    redis_address_ = server_->address();
    event("started redis-server on " + redis_address_ + " (pid " + std::to_string(server_->pid()) + ")");
  } else {
    redis_address_ = s_.recovery.redis;
    event("using Redis at " + redis_address_ + " ([recovery] redis)");
  }
  const auto [host, port] = parse_host_port(redis_address_);
  redis_ = std::make_unique<RedisClient>(host, port, 0.5);
  if (!redis_->ping()) throw std::runtime_error("Redis at " + redis_address_ + " does not answer: " + redis_->error());
  const int spares = std::min(s_.recovery.spare_nodes, kMaxLocalSpares);
  for (int n = 0; n < nodes_ + spares; ++n) {
    ExecutorOptions eo{redis_address_, job_, n, s_.recovery.heartbeat_period_s, "", {}};
    if (net_) {
      eo.address = net_->address(n);
      eo.command_prefix = net_->command_prefix(n);
    }
    executors_.push_back(spawn_executor(o_.self_binary, eo, o_.work_dir + "/executor_" + std::to_string(n) + ".log"));
    if (n >= nodes_) spares_.push_back(n);
  }
  for (int n = 0; n < nodes_; ++n) slot_node_.push_back(n);
  // Rendezvous: every executor registered.
  const double deadline = wall_now_s() + 10;
  while (wall_now_s() < deadline) {
    int up = 0;
    for (int n = 0; n < nodes_ + spares; ++n) up += redis_->hgetall(job_key(job_, "executor:" + std::to_string(n))).empty() ? 0 : 1;
    if (up == nodes_ + spares) {
      event(std::to_string(nodes_) + " executors and " + std::to_string(spares) + " spare(s) registered");
      return;
    }
    sleep_s(0.05);
  }
  throw std::runtime_error("the executors did not register in Redis within 10 s; see " + o_.work_dir + "/executor_*.log");
}

void Driver::stop_control_plane() {
  if (redis_) redis_->set(job_key(job_, "stop"), "1");
  for (pid_t p : executors_) {
    ::kill(p, SIGTERM);
    int status = 0;
    ::waitpid(p, &status, 0);
  }
  executors_.clear();
  if (server_) server_->stop();
}

void Driver::publish_layout() {
  std::map<std::string, std::string> layout = {{"attempt", std::to_string(attempt_)}};
  for (int r = 0; r < ranks_; ++r) layout["rank:" + std::to_string(r)] = std::to_string(node_of_rank(r));
  redis_->del(job_key(job_, "layout"));
  redis_->hset(job_key(job_, "layout"), layout);
}

void Driver::note_engine_error(const std::string& line) {
  if (std::optional<std::string> e = engine_error_text(line)) engine_errors_.insert(*e);
}

pid_t Driver::launch() {
  ++attempt_;
  engine_errors_before_ = std::move(engine_errors_);
  engine_errors_.clear();
  for (int r = 0; r < ranks_; ++r) redis_->del(job_key(job_, "rank:" + std::to_string(r)));
  for (int n = 0; n < nodes_ + static_cast<int>(spares_.size()) + static_cast<int>(bad_nodes_.size()); ++n) {
    redis_->del(job_key(job_, "node:" + std::to_string(n)));
  }
  publish_layout();
  const std::string dir = attempt_dir(o_.work_dir, attempt_);
  std::filesystem::create_directories(dir);
  logs_.clear();
  logs_.emplace_back(dir + "/mpirun.err", -1);
  for (int r = 0; r < ranks_; ++r) logs_.emplace_back(dir + "/rank_" + std::to_string(r) + ".log", r);
  stdout_ = std::make_unique<LogTail>(dir + "/mpirun.out", -1);
  first_step_this_attempt_ = -1;
  last_step_this_attempt_ = -1;
  node_unreachable_ = false;
  first_step_at_ = 0;
  std::string nodes;
  for (int r = 0; r < ranks_; ++r) {
    if (r > 0) nodes += ",";
    nodes += std::to_string(node_of_rank(r));
  }
  std::vector<model::InjectSpec> rank_faults;
  for (const model::InjectSpec& f : pending_faults_) {
    if (!driver_fault(f.fault)) rank_faults.push_back(f);
  }
  const std::map<std::string, std::string> env = {
      {kEnvRedis, redis_address_},           {kEnvJob, job_},
      {kEnvAttempt, std::to_string(attempt_)}, {kEnvNodes, nodes},
      {kEnvInject, format_inject_list(rank_faults)}, {kEnvHeartbeat, fixed(s_.recovery.heartbeat_period_s, 6)},
      {kEnvLogDir, dir}};
  std::map<std::string, std::string> mpirun_env;  // for mpirun itself
  std::vector<std::string> args = {"mpirun", "--oversubscribe"};
  if (net_) {
    for (const std::string& a : mpirun_network_args(*net_)) args.push_back(a);
    mpirun_env = mpirun_network_env(*net_);
  }
  for (const auto& [k, v] : env) {
    args.push_back("-x");
    args.push_back(k);
  }
  std::vector<std::string> rank_command = {o_.engine_binary, o_.scenario_path, "--json"};
  for (const std::string& ov : o_.overrides) {
    rank_command.push_back("--set");
    rank_command.push_back(ov);
  }
  if (!net_) {
    args.push_back("-np");
    args.push_back(std::to_string(ranks_));
    args.insert(args.end(), rank_command.begin(), rank_command.end());
  } else {
    // MPMD: one application context per rank, each started in its node's
    // namespace (`ip netns exec` execs the engine: the rank's pid is its own).
    for (int r = 0; r < ranks_; ++r) {
      if (r > 0) args.push_back(":");
      args.push_back("-np");
      args.push_back("1");
      for (const std::string& a : net_->command_prefix(node_of_rank(r))) args.push_back(a);
      args.insert(args.end(), rank_command.begin(), rank_command.end());
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  out_.flush();
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cannot start mpirun: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);
    // A driver killed before it could stop the job (SIGKILL, a crash) takes the
    // job with it: mpirun gets SIGTERM when the launching thread (the driver's
    // main thread) ends, and ends its ranks. A driver that died before this
    // line is seen by getppid(). Without it the ranks trained on, unwatched.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    for (const auto& [k, v] : mpirun_env) ::setenv(k.c_str(), v.c_str(), 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    const int o = ::open((dir + "/mpirun.out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open((dir + "/mpirun.err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o >= 0) ::dup2(o, STDOUT_FILENO);
    if (e >= 0) ::dup2(e, STDERR_FILENO);
    ::execvp("mpirun", argv.data());
    const char* msg = "megascale run: cannot run mpirun (is openmpi-bin installed? scripts/setup.sh)\n";
    (void)!::write(STDERR_FILENO, msg, std::strlen(msg));
    ::_exit(127);
  }
  ::setpgid(child, child);
  mpirun_ = child;
  launched_at_ = wall_now_s();
  event("attempt " + std::to_string(attempt_) + ": mpirun -np " + std::to_string(ranks_) +
        (net_ ? std::string(" (ranks in their nodes' namespaces, btl tcp on ") + net_->subnet() + ")" : std::string()) +
        " (pid " +
        std::to_string(child) + "), ranks on nodes " + nodes +
        (rank_faults.empty() ? std::string() : ", armed: " + format_inject_list(rank_faults)));
  return child;
}

void Driver::kill_attempt() {
  if (mpirun_ <= 0) return;
  std::vector<pid_t> victims = children_of(mpirun_);
  for (const RankStatus& st : read_statuses()) {
    if (st.pid > 0) victims.push_back(st.pid);
  }
  ::kill(-mpirun_, SIGKILL);
  for (pid_t p : victims) ::kill(p, SIGKILL);
  int status = 0;
  while (::waitpid(mpirun_, &status, 0) < 0 && errno == EINTR) {
  }
  // The ranks are reaped by init once mpirun is gone; wait until they are.
  const double deadline = wall_now_s() + 5;
  for (pid_t p : victims) {
    while (::kill(p, 0) == 0 && wall_now_s() < deadline) {
      std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
      std::string text;
      std::getline(stat, text);
      const size_t close = text.rfind(')');
      if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'Z') break;
      sleep_s(0.01);
    }
  }
  mpirun_ = -1;
}

std::vector<RankStatus> Driver::read_statuses() {
  std::vector<RankStatus> out;
  for (int r = 0; r < ranks_; ++r) {
    RankStatus st = parse_rank_status(r, redis_->hgetall(job_key(job_, "rank:" + std::to_string(r))));
    if (st.present && st.attempt != attempt_) {
      st = RankStatus{};
      st.rank = r;
    }
    out.push_back(st);
  }
  return out;
}

void Driver::read_fired() {
  if (!redis_) return;  // the run failed before its control plane started (a bad --work-dir)
  bool ok = false;
  for (const std::string& e : redis_->lrange(job_key(job_, "fired"), &ok)) {
    if (!fired_seen_.insert(e).second) continue;
    Fired f;
    char name[64] = {};
    if (std::sscanf(e.c_str(), "%63[^|]|%d|%d|%lf", name, &f.rank, &f.step, &f.at_s) != 4) continue;
    f.fault = name;
    fired_.push_back(f);
    pending_faults_.erase(std::remove_if(pending_faults_.begin(), pending_faults_.end(),
                                         [&](const model::InjectSpec& p) { return p.fault == f.fault && p.rank == f.rank; }),
                          pending_faults_.end());
    event("rank " + std::to_string(f.rank) + " reports the injected fault " + f.fault + " at step " + std::to_string(f.step));
  }
}

void Driver::read_stdout() {
  if (!stdout_) return;
  for (const std::string& line : stdout_->read()) {
    const base::Json j = base::Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j.contains("loss")) continue;
    const int64_t step = j["step"].get<int64_t>();
    const double loss = j["loss"].is_number() ? j["loss"].get<double>() : std::numeric_limits<double>::quiet_NaN();
    const auto it = losses_.find(step);
    if (it != losses_.end() && std::memcmp(&it->second, &loss, sizeof loss) != 0) {
      profile_.reruns_identical = false;
      event("step " + std::to_string(step) + " re-run gave loss " + j["loss"].dump() + ", not the first run's");
    }
    losses_[step] = loss;
    last_step_this_attempt_ = std::max(last_step_this_attempt_, step);
    if (first_step_this_attempt_ < 0) {
      first_step_this_attempt_ = step;
      first_step_at_ = wall_now_s();
      if (pending_record_) profile_.faults[*pending_record_].first_step_at_s = first_step_at_;
    }
    if (pending_record_) {
      FaultRecord& rec = profile_.faults[*pending_record_];
      if (rec.caught_up_at_s == 0 && step >= rec.interrupted_step) rec.caught_up_at_s = wall_now_s();
    }
  }
}

std::optional<Detection> Driver::scan_logs(bool* checksum, long long* bad_step) {
  std::optional<Detection> found;
  for (LogTail& t : logs_) {
    for (const std::string& line : t.read()) {
      const std::optional<LogFinding> f = scan_log_line(line, t.rank());
      if (!f) continue;
      note_engine_error(line);
      event("log " + std::filesystem::path(t.path()).filename().string() + ": " + f->kind + ": " + line.substr(0, 200));
      if (f->kind == "checksum_mismatch") {
        *checksum = true;
        *bad_step = f->step;
        found = Detection{"log_error", wall_now_s(), f->rank, f->kind + ": " + line};
      } else if (!found || (found->rank < 0 && f->rank >= 0)) {
        found = Detection{"log_error", wall_now_s(), f->rank, f->kind + ": " + line};
      }
    }
  }
  return found;
}

void Driver::finish_pending_ready(const std::vector<RankStatus>& st, double now) {
  (void)now;
  if (!pending_record_) return;
  FaultRecord& rec = profile_.faults[*pending_record_];
  if (rec.ready_at_s > 0) return;
  double ready = 0, load = 0;
  for (const RankStatus& r : st) {
    if (!r.present || r.ready_at_s <= 0) return;
    ready = std::max(ready, r.ready_at_s);
    load = std::max(load, r.load_s);
  }
  rec.ready_at_s = ready;
  rec.checkpoint_load_s = load;
  rec.resumed_from_step = st.empty() ? -1 : st[0].start_step;
}

bool Driver::handle_fault(const Detection& d, bool checksum, long long bad_step, const std::vector<RankStatus>& st) {
  read_fired();
  // A checkpoint refused at load is the consequence of an earlier fault
  // (corrupt_checkpoint): move it aside, note it on that fault, relaunch.
  if (checksum) {
    const std::string dir = o_.scenario.train.checkpoint_dir;
    const std::string name = fmt::format("step_{:08d}", bad_step);
    const std::filesystem::path from = std::filesystem::path(dir) / name;
    const std::filesystem::path to = std::filesystem::path(dir) / (name + ".corrupt");
    std::error_code ec;
    std::filesystem::remove_all(to, ec);
    std::filesystem::rename(from, to, ec);
    kill_attempt();
    const std::string note = "checkpoint step " + std::to_string(bad_step) + " refused (rank " +
                             std::to_string(d.rank) + "'s shard failed its CRC check); moved to " + to.string() +
                             (ec ? " (failed: " + ec.message() + ")" : std::string()) +
                             "; resuming from the previous complete checkpoint";
    event(note);
    if (pending_record_) {
      profile_.faults[*pending_record_].notes.push_back(note);
      profile_.faults[*pending_record_].ready_at_s = 0;
      profile_.faults[*pending_record_].first_step_at_s = 0;
      profile_.faults[*pending_record_].caught_up_at_s = 0;
      profile_.faults[*pending_record_].relaunched_at_s = wall_now_s();
    }
    return !ec;
  }
  // The fault this detection belongs to (diagnosis.h match_detection).
  const int index = match_detection(fired_, d);
  FaultRecord rec = index >= 0 ? take_fired(fired_[static_cast<size_t>(index)]) : FaultRecord{};
  rec.detected_by = d.kind;
  rec.detection_detail = d.detail;
  rec.detected_at_s = d.at_s;
  event("detected (" + d.kind + "): " + d.detail);
  // Diagnosis.
  int culprit = d.rank;
  std::string why = d.detail;
  if (d.kind == "stall") {
    const HangDiagnosis h = diagnose_hang(st);
    rec.chain = h.lines;
    for (const std::string& l : h.lines) event("  " + l);
    if (h.culprits.size() == 1) {
      culprit = h.culprits[0];
      why = "wait-for chain ends at rank " + std::to_string(culprit);
    } else {
      why = "wait-for chain ends at " + std::to_string(h.culprits.size()) + " ranks";
    }
  } else if (d.kind != "slow" && !(d.kind == "heartbeat_missed" && node_unreachable_) &&
             d.detail.rfind("diverged:", 0) != 0 &&
             (d.kind != "log_error" || culprit < 0 || d.detail.rfind("signal", 0) != 0)) {
    // A rank died (or the job exited): mpirun names the rank that died on a
    // signal; wait briefly for that report.
    const double until = wall_now_s() + kSignalReportWait_s;
    bool named = false;
    while (!named && wall_now_s() < until) {
      for (LogTail& t : logs_) {
        for (const std::string& line : t.read()) {
          const std::optional<LogFinding> f = scan_log_line(line, t.rank());
          if (f) note_engine_error(line);
          if (f && f->kind == "signal") {
            culprit = f->rank;
            why = "mpirun: " + line;
            named = true;
          }
        }
      }
      if (!named) sleep_s(0.05);
    }
  }
  // The detection's own engine error first, then the others this attempt printed.
  std::vector<std::string> seen;
  if (std::optional<std::string> own = engine_error_text(d.detail)) seen.push_back(*own);
  seen.insert(seen.end(), engine_errors_.begin(), engine_errors_.end());
  // A diverged training (engine/trainer.h TrainingDiverged) is the job's from
  // the first time: every rank stopped at the same step, so no node is more
  // suspect than another, and the engine is deterministic, so a relaunch
  // from the last finite checkpoint diverges again. Stop, nothing evicted
  // (it evicted node after node until max_restarts).
  for (const std::string& e : seen) {
    if (e.rfind("diverged|", 0) != 0) continue;
    const std::string what = e.substr(e.find('|') + 1);
    rec.diagnosed_rank = -1;
    rec.diagnosed_node = -1;
    rec.diagnosis = "no rank named: the training diverged, the job's error, not a node's (" + what + ")";
    rec.diagnosed_at_s = wall_now_s();
    event("diagnosis: " + rec.diagnosis);
    profile_.faults.push_back(rec);
    throw std::runtime_error(fmt::format(
        "stopped: \"{}\" in attempt {}: a diverged training is the job's (its learning rate, data or numerics), not "
        "a node's: nothing evicted and no relaunch, which would diverge again from the same checkpoint",
        what, attempt_));
  }
  // The job's own error: an engine error the attempt before reported too,
  // when neither detection is an injected fault's. The node that reported it
  // was evicted (or returned repaired) in between and it came back: evicting
  // more nodes would only use up the spares. Stop and say so.
  if (index < 0 && pending_record_ && profile_.faults[*pending_record_].fault == "none") {
    for (const std::string& e : seen) {
      if (!engine_errors_before_.count(e)) continue;
      const FaultRecord& before = profile_.faults[*pending_record_];
      const std::string what = e.substr(e.find('|') + 1);
      const std::string since =
          before.evicted_node < 0 ? "a restart in place"
          : before.replacement_node >= 0 && before.replacement_node != before.evicted_node
              ? fmt::format("node {} was evicted and node {} took its slot", before.evicted_node, before.replacement_node)
              : fmt::format("node {} was evicted and returned to service", before.evicted_node);
      rec.diagnosed_rank = -1;
      rec.diagnosed_node = -1;
      rec.diagnosis = fmt::format("no rank named: the job's error, not a node's: attempt {} failed as attempt {} did, "
                                  "after {} ({})",
                                  attempt_, attempt_ - 1, since, what);
      rec.diagnosed_at_s = wall_now_s();
      event("diagnosis: " + rec.diagnosis);
      profile_.faults.push_back(rec);
      throw std::runtime_error(fmt::format(
          "stopped: \"{}\" again in attempt {}, after {}: an error that survives a recovery is the job's (its input, "
          "configuration or code), not a node's; fix it and rerun (`megascale train` on the scenario shows it "
          "without recovery)",
          what, attempt_, since));
    }
  }
  // Self-checks where the detection alone does not settle it (MegaScale
  // section 4): a slow rank (its step time may stand out for another
  // reason) and a stall (a silent link looks like a hang from the wait-for
  // chain). The attempt is stopped first: the checks need the node.
  if (d.kind == "slow" || d.kind == "stall") {
    std::vector<int> suspects;
    if (d.kind == "slow") {
      suspects.push_back(d.rank);
    } else {
      const HangDiagnosis h = diagnose_hang(st);
      suspects = h.culprits;
      if (suspects.empty() || suspects.size() > 1) {
        suspects.clear();
        for (int r = 0; r < ranks_; ++r) suspects.push_back(r);
      }
    }
    kill_attempt();
    const std::vector<int> faulty = self_check(suspects, rec);
    if (d.kind == "slow") {
      if (faulty.empty()) {
        culprit = -1;
        why = d.detail + "; the self-check passed: not evicted, restarted in place";
      } else {
        why = d.detail + "; self-check: " + rec.self_check.front();
      }
    } else if (culprit >= 0) {
      why += faulty.empty() ? "; the self-check passed (a software hang): evicted on the wait-for chain"
                            : "; self-check: " + rec.self_check.front();
    } else if (!faulty.empty()) {
      culprit = faulty.front();
      why += "; the self-check names rank " + std::to_string(culprit) + ": " + rec.self_check.front();
    }
  }
  rec.diagnosed_rank = culprit;
  rec.diagnosed_node = culprit >= 0 ? node_of_rank(culprit) : -1;
  rec.diagnosis = culprit >= 0 ? "rank " + std::to_string(culprit) + " on node " + std::to_string(rec.diagnosed_node) + ": " + why
                               : "no rank named: " + why;
  rec.diagnosis_right = rec.fault != "none" && culprit == rec.rank;
  rec.diagnosed_at_s = wall_now_s();
  event("diagnosis: " + rec.diagnosis);
  // Eviction.
  int64_t reached = 0;
  for (const auto& [step, loss] : losses_) reached = std::max(reached, step);
  rec.interrupted_step = reached;
  kill_attempt();
  if (culprit >= 0) {
    const int slot = culprit / gpus_per_node_;
    const int bad = slot_node_[static_cast<size_t>(slot)];
    rec.evicted_node = bad;
    if (!spares_.empty()) {
      bad_nodes_.insert(bad);
      slot_node_[static_cast<size_t>(slot)] = spares_.front();
      spares_.erase(spares_.begin());
      rec.replacement_node = slot_node_[static_cast<size_t>(slot)];
      event("evicted node " + std::to_string(bad) + "; spare node " + std::to_string(rec.replacement_node) +
            " takes its slot");
    } else if (net_ && net_->removed(bad)) {
      throw std::runtime_error("node " + std::to_string(bad) + " is gone and no spare node is left");
    } else {
      rec.replacement_node = bad;
      // Back in service means repaired: its emulated hardware fault goes
      // (robust/self_check.h NodeFaults), or a later self-check would meet it;
      // a cut link is mended.
      redis_->del(job_key(job_, "hw:" + std::to_string(bad)));
      if (net_) net_->restore_link(bad);
      rec.notes.push_back("no spare left: node " + std::to_string(bad) + " returns to service (local processes)");
      event(rec.notes.back());
    }
  }
  rec.evicted_at_s = wall_now_s();
  rec.restarted = true;
  profile_.faults.push_back(rec);
  pending_record_ = profile_.faults.size() - 1;
  // Other faults this attempt fired ended with it, before anything could
  // detect them: not missed, superseded.
  read_fired();
  for (Fired& f : fired_) {
    if (f.matched || f.fault == "redis_kill") continue;
    FaultRecord s = take_fired(f);
    s.superseded = true;
    s.notes.push_back("fired in attempt " + std::to_string(attempt_) + ", which the recovery from " + rec.fault +
                      " (" + d.kind + ") ended before it could be detected");
    event("fault " + f.fault + " of rank " + std::to_string(f.rank) + " superseded: " + s.notes.back());
    profile_.faults.push_back(s);
  }
  return true;
}

int Driver::run() {
  start_s_ = wall_now_s();
  ranks_ = s_.cluster.gpus;
  gpus_per_node_ = std::max(1, std::min(s_.hardware.gpus_per_node, ranks_));
  nodes_ = (ranks_ + gpus_per_node_ - 1) / gpus_per_node_;
  job_ = s_.name + "-" + std::to_string(::getpid());
  pending_faults_ = o_.faults;
  profile_.scenario = s_.name;
  profile_.source = s_.source;
  profile_.ranks = ranks_;
  profile_.nodes = nodes_;
  profile_.spare_nodes = std::min(s_.recovery.spare_nodes, kMaxLocalSpares);
  profile_.steps = s_.train.steps;
  profile_.heartbeat_period_s = s_.recovery.heartbeat_period_s;
  profile_.heartbeat_misses = s_.recovery.heartbeat_misses;
  profile_.step_stall_s = s_.recovery.step_stall_s;
  int rc = 1;
  try {
    std::filesystem::create_directories(o_.work_dir);
    // An earlier run's rank logs would be read as this run's (attempt_dirs.h).
    if (const int stale = remove_attempt_dirs(o_.work_dir); stale > 0) {
      event(fmt::format("removed {} attempt folder(s) of an earlier run in {}", stale, o_.work_dir));
    }
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, on_signal);
    make_nodes();
    start_control_plane();
    profile_.control_plane =
        net_ ? std::to_string(nodes_) + " executor(s) + " + std::to_string(profile_.spare_nodes) +
                   " spare(s), each in its node's network namespace (" + net_->describe() + "), Redis at " +
                   redis_address_ + ", MPI over TCP on " + net_->subnet()
             : "local processes: " + std::to_string(nodes_) + " executor(s) + " + std::to_string(profile_.spare_nodes) +
                   " spare(s), Redis at " + redis_address_ + " (no network namespaces" +
                   (profile_.netns_unavailable.empty() ? std::string(")")
                                                       : ": " + profile_.netns_unavailable + ")");
    // Four polls per heartbeat period, at most 0.5 s apart: the poll is also
    // when a SIGINT / SIGTERM is seen (sleep_for resumes after a signal), and
    // a driver polling every period / 4 did not stop for a long period
    // (heartbeat_period_s = 1e9 slept through a SIGTERM).
    const double scan_s = std::clamp(s_.recovery.heartbeat_period_s / 4, 0.02, 0.5);
    const double missed_s = s_.recovery.heartbeat_period_s * s_.recovery.heartbeat_misses;
    int restarts = 0;
    bool done = false;
    redis_ok_since_ = wall_now_s();
    while (!done) {
      launch();
      StallDetector stall(s_.recovery.step_stall_s);
      SlowDetector slow(s_.recovery.slow_factor, s_.recovery.slow_steps, ranks_);
      std::set<int> reported_slow;
      bool reported_uniform = false;
      bool all_ready = false;
      std::optional<Detection> detection;
      bool checksum = false;
      long long bad_step = -1;
      int exit_status = -1;
      std::vector<RankStatus> st;
      while (!detection) {
        sleep_s(scan_s);
        if (g_signal != 0) throw std::runtime_error("stopped by signal " + std::to_string(g_signal));
        const double now = wall_now_s();
        // Redis.
        if (!redis_->ping()) {
          if (!server_) {
            if (now - redis_ok_since_ > 30) throw std::runtime_error("Redis at " + redis_address_ + " unreachable for 30 s: " + redis_->error());
          } else {
            Detection d{"redis_down", now, -1, "Redis at " + redis_address_ + " does not answer: " + redis_->error()};
            Fired* killed = first_unmatched(fired_, "redis_kill");
            FaultRecord rec = killed ? take_fired(*killed) : FaultRecord{};
            rec.detected_by = d.kind;
            rec.detection_detail = d.detail;
            rec.detected_at_s = now;
            rec.diagnosis = "the control plane (Redis) is down; training goes on";
            rec.diagnosis_right = rec.fault == "redis_kill";
            event("detected (redis_down): " + d.detail);
            server_->start();
            rec.diagnosed_at_s = wall_now_s();
            rec.relaunched_at_s = rec.diagnosed_at_s;
            publish_layout();
            event("restarted redis-server on " + redis_address_ + "; waiting for every heartbeat");
            profile_.faults.push_back(rec);
            redis_record_ = profile_.faults.size() - 1;
            redis_restarted_at_ = rec.relaunched_at_s;
            redis_ok_since_ = wall_now_s();
          }
          continue;
        }
        st = read_statuses();
        // The driver-side fault: kill Redis once a rank reached its step.
        int64_t max_step = 0;
        uint64_t traffic = 0;
        for (const RankStatus& r : st) {
          max_step = std::max(max_step, r.step);
          traffic += r.bytes_sent + r.bytes_recv;
        }
        for (auto it = pending_faults_.begin(); it != pending_faults_.end(); ++it) {
          if (it->fault == "redis_kill" && server_ && max_step >= it->step) {
            // The step the ranks had reached (heartbeats lag): when it fired, not when it was due.
            fired_.push_back({"redis_kill", -1, static_cast<int>(max_step), wall_now_s(), false});
            event("injecting redis_kill at step " + std::to_string(max_step));
            server_->kill();
            pending_faults_.erase(it);
            break;
          }
        }
        fire_network_faults(st);
        read_fired();
        read_stdout();
        finish_pending_ready(st, now);
        if (redis_record_) {
          FaultRecord& rec = profile_.faults[*redis_record_];
          bool back = true;
          double first = 0;
          for (const RankStatus& r : st) {
            back = back && r.present && r.time_s > redis_restarted_at_;
            first = std::max(first, r.time_s);
          }
          if (back || mpirun_ < 0) {
            rec.ready_at_s = first;
            rec.first_step_at_s = first;
            event("every rank heartbeats to the restarted Redis");
            redis_record_.reset();
          }
        }
        // Logs, then the job's exit.
        if (std::optional<Detection> d = scan_logs(&checksum, &bad_step)) detection = d;
        int status = 0;
        if (!detection && ::waitpid(mpirun_, &status, WNOHANG) == mpirun_) {
          exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          read_stdout();
          if (std::optional<Detection> d = scan_logs(&checksum, &bad_step)) detection = d;
          mpirun_ = -1;
          if (!detection && exit_status == 0 && !losses_.empty() && losses_.rbegin()->first >= s_.train.steps) {
            done = true;
            break;
          }
          // Every rank finished, but the losses of the last steps never came:
          // this attempt resumed at the final checkpoint and trained nothing
          // (an earlier attempt was stopped after that checkpoint and before
          // mpirun relayed its last lines, or a finished job was run again).
          // Relaunching would do the same again.
          if (!detection && exit_status == 0) {
            const std::vector<RankStatus> fresh = read_statuses();
            if (std::all_of(fresh.begin(), fresh.end(),
                            [&](const RankStatus& r) { return finished_training(r, s_.train.steps); })) {
              const int64_t last = losses_.empty() ? 0 : losses_.rbegin()->first;
              event(fmt::format("every rank finished all {} steps; the losses of steps {}-{} were not read (the job "
                                "resumed from a checkpoint past them: an attempt stopped after its final checkpoint "
                                "and before mpirun relayed them, or a run of a job that had finished)",
                                s_.train.steps, last + 1, s_.train.steps));
              done = true;
              break;
            }
          }
          if (!detection) detection = Detection{"job_exited", now, -1, "mpirun exited with status " + std::to_string(exit_status)};
          break;
        }
        if (detection) break;
        // Executors: a rank's process gone.
        std::vector<int> host_of_rank;
        for (int r = 0; r < ranks_; ++r) host_of_rank.push_back(node_of_rank(r));
        for (int n = 0; n < nodes_ + profile_.spare_nodes && !detection; ++n) {
          const std::map<std::string, std::string> rep = redis_->hgetall(job_key(job_, "node:" + std::to_string(n)));
          for (const int r : gone_ranks(rep, n, attempt_, host_of_rank, st, s_.train.steps)) {
            // `st` was read before the report: the rank may have finished in
            // between (its process gone, no fault). Read its heartbeat again.
            const RankStatus fresh = parse_rank_status(r, redis_->hgetall(job_key(job_, "rank:" + std::to_string(r))));
            if (fresh.attempt == attempt_ && finished_training(fresh, s_.train.steps)) continue;
            detection = Detection{"process_gone", now, r, "executor " + std::to_string(n) + ": rank " + std::to_string(r) + " is gone"};
            break;
          }
        }
        if (detection) break;
        // Heartbeats.
        if (now - redis_ok_since_ > missed_s) {
          for (const RankStatus& r : st) {
            if (r.present && !finished_training(r, s_.train.steps) && now - r.time_s > missed_s) {
              // Its node's executor silent too: the node, not the rank, is unreachable.
              const int node = node_of_rank(r.rank);
              const std::map<std::string, std::string> ex = redis_->hgetall(job_key(job_, "executor:" + std::to_string(node)));
              const double ex_age = ex.count("time_s") ? now - std::atof(ex.at("time_s").c_str()) : -1;
              // The executor heartbeats every period too; cut off at the same
              // moment as its rank, it may have written a little later: half
              // the rank's limit (still several periods) says it is silent.
              const bool ex_silent = ex_age > std::max(missed_s / 2, 3 * s_.recovery.heartbeat_period_s);
              detection = Detection{"heartbeat_missed", now, r.rank,
                                    "rank " + std::to_string(r.rank) + ": no heartbeat for " + fixed(now - r.time_s, 2) + " s" +
                                        (ex_silent ? "; node " + std::to_string(node) + "'s executor silent for " +
                                                                 fixed(ex_age, 2) + " s too: the node is unreachable"
                                                           : std::string())};
              // Then no death report from mpirun is coming to wait for.
              node_unreachable_ = ex_silent;
              break;
            }
          }
        }
        if (detection) break;
        // Progress.
        bool ready = !st.empty();
        for (const RankStatus& r : st) ready = ready && r.present && r.ready_at_s > 0;
        if (ready && !all_ready) {
          all_ready = true;
          stall.reset(now);
        }
        if (all_ready) {
          stall.observe(now, max_step, traffic);
          std::optional<double> idle = stall.stalled(now);
          // A rank waiting for its checkpoint write (fsync on a busy disk took
          // several seconds on this project's shared machine) stalls the job
          // on storage, not on a rank: that gets kStorageWaitFactor x longer.
          int io_rank = -1;
          double io_wait_s = 0;
          for (const RankStatus& r : st) {
            if (r.storage_wait_since_s > 0 && now - r.storage_wait_since_s > io_wait_s) {
              io_rank = r.rank;
              io_wait_s = now - r.storage_wait_since_s;
            }
          }
          if (idle && io_rank >= 0 && io_wait_s <= kStorageWaitFactor * s_.recovery.step_stall_s) idle.reset();
          if (idle) {
            detection = Detection{"stall", now, -1, "no step and no traffic for " + fixed(*idle, 2) + " s (at step " +
                                                        std::to_string(max_step) + ")" +
                                                        (io_rank >= 0 ? "; rank " + std::to_string(io_rank) +
                                                                            " has waited " + fixed(io_wait_s, 2) +
                                                                            " s for its checkpoint write"
                                                                      : std::string())};
            break;
          }
          for (const RankStatus& r : st) slow.add(r.rank, r.compute_hist);
          if (std::optional<std::pair<int, std::string>> sr = slow.slow_rank()) {
            if (s_.recovery.evict_slow) {
              detection = Detection{"slow", now, sr->first, sr->second};
              break;
            }
            if (reported_slow.insert(sr->first).second) {
              read_fired();
              Fired* slowed = first_unmatched(fired_, "slow");
              FaultRecord rec = slowed ? take_fired(*slowed) : FaultRecord{};
              rec.detected_by = "slow";
              rec.detection_detail = sr->second;
              rec.detected_at_s = now;
              rec.diagnosed_rank = sr->first;
              rec.diagnosed_node = node_of_rank(sr->first);
              rec.diagnosis = "rank " + std::to_string(sr->first) + " on node " + std::to_string(rec.diagnosed_node) +
                              " is slow (reported; [recovery] evict_slow = false keeps it)";
              rec.diagnosis_right = rec.fault == "slow" && rec.rank == sr->first;
              rec.diagnosed_at_s = now;
              profile_.faults.push_back(rec);
              event("slow rank: " + sr->second + " (not evicted)");
            }
          }
          // Every rank slowed alike: nobody stands out from the others, the
          // job's own baseline does. No node to evict (evicting one at random
          // would not help): reported, training goes on.
          if (!reported_uniform) {
            if (std::optional<std::string> u = slow.uniform_slowdown()) {
              reported_uniform = true;
              read_fired();
              Fired* slowed = first_unmatched(fired_, "slow_all");
              FaultRecord rec = slowed ? take_fired(*slowed) : FaultRecord{};
              rec.detected_by = "uniform_slowdown";
              rec.detection_detail = *u;
              rec.detected_at_s = now;
              rec.diagnosed_rank = -1;
              rec.diagnosed_node = -1;
              rec.diagnosis = "no rank named: " + *u +
                              "; a job-wide cause (the machines throttled, a shared input or network slow), "
                              "not one node: nothing evicted, training goes on";
              rec.diagnosis_right = rec.fault == "slow_all";
              rec.diagnosed_at_s = now;
              profile_.faults.push_back(rec);
              event("uniform slowdown: " + *u + " (no node evicted; training goes on)");
            }
          }
        }
      }
      if (done) {
        if (redis_record_) {
          profile_.faults[*redis_record_].notes.push_back(
              "the job finished before every rank heartbeated to the restarted Redis: no time back measured");
          redis_record_.reset();
        }
        break;
      }
      if (++restarts > s_.recovery.max_restarts) {
        kill_attempt();
        // The detection is recorded (its fault detected, not recovered from),
        // so the profile does not list the fault as missed.
        read_fired();
        const int index = match_detection(fired_, *detection);
        FaultRecord rec = index >= 0 ? take_fired(fired_[static_cast<size_t>(index)]) : FaultRecord{};
        rec.detected_by = detection->kind;
        rec.detection_detail = detection->detail;
        rec.detected_at_s = detection->at_s;
        rec.diagnosis = "not diagnosed: no recovery left ([recovery] max_restarts = " +
                        std::to_string(s_.recovery.max_restarts) + ")";
        profile_.faults.push_back(rec);
        throw std::runtime_error("gave up after " + std::to_string(s_.recovery.max_restarts) +
                                 " recoveries ([recovery] max_restarts); last: " + detection->detail);
      }
      // A rank that died before training in this attempt may have refused a
      // corrupt checkpoint at load: its log line reaches mpirun.err through
      // mpirun's output relay, which can lag the executor's report of the
      // death (a loaded CI machine saw the death first and counted it as a new
      // fault). Wait for the line as for mpirun's own death report.
      if (!checksum && (detection->kind == "process_gone" || detection->kind == "job_exited")) {
        const bool loading = std::any_of(st.begin(), st.end(), [&](const RankStatus& r) {
          return (detection->rank < 0 || r.rank == detection->rank) &&
                 (!r.present || r.attempt != attempt_ || r.phase == "init");
        });
        const double until = wall_now_s() + kSignalReportWait_s;
        while (loading && !checksum && wall_now_s() < until) {
          sleep_s(0.05);
          read_stdout();
          if (std::optional<Detection> d = scan_logs(&checksum, &bad_step); d && checksum) detection = d;
        }
      }
      if (!handle_fault(*detection, checksum, bad_step, st)) {
        throw std::runtime_error("could not recover from: " + detection->detail);
      }
      if (pending_record_) profile_.faults[*pending_record_].relaunched_at_s = wall_now_s();
    }
    profile_.completed = true;
    rc = 0;
    event("training complete: " + std::to_string(s_.train.steps) + " steps in " + std::to_string(attempt_) + " attempt(s)");
  } catch (const std::exception& e) {
    profile_.error = e.what();
    err_ << "megascale run: " << e.what() << "\n";
    if (mpirun_ > 0) kill_attempt();
  }
  // Checkpoint timings from the last heartbeats (slowest rank, mean per checkpoint).
  if (redis_ && redis_->ping()) {
    for (const RankStatus& r : read_statuses()) {
      if (r.ckpt_count <= 0) continue;
      profile_.checkpoints = std::max<int>(profile_.checkpoints, static_cast<int>(r.ckpt_count));
      profile_.checkpoint_snapshot_s = std::max(profile_.checkpoint_snapshot_s, r.ckpt_snapshot_total_s / r.ckpt_count);
      profile_.checkpoint_persist_s = std::max(profile_.checkpoint_persist_s, r.ckpt_persist_total_s / r.ckpt_count);
      profile_.checkpoint_bytes_per_rank = std::max(profile_.checkpoint_bytes_per_rank, r.ckpt_bytes);
      profile_.checkpoint_bytes_total += r.ckpt_bytes;
    }
  }
  // Faults that fired and were never detected.
  read_fired();
  for (const Fired& f : fired_) {
    if (f.matched) continue;
    FaultRecord rec;
    rec.fault = f.fault;
    rec.rank = f.rank;
    rec.step = f.step;
    rec.injected_at_s = f.at_s;
    profile_.faults.push_back(rec);
  }
  stop_control_plane();
  net_.reset();  // namespaces, links, bridge: gone
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
  profile_.attempts = attempt_;
  profile_.wall_s = wall_now_s() - start_s_;
  for (int64_t step = 1; step <= s_.train.steps; ++step) {
    const auto it = losses_.find(step);
    profile_.losses.push_back(it == losses_.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
  }
  for (const FaultRecord& f : profile_.faults) {
    const bool detected = !f.detected_by.empty();
    out_ << "fault=" << f.fault << " rank=" << f.rank << " step=" << f.step
         << " detected_by=" << (detected ? f.detected_by : f.superseded ? "superseded" : "none")
         << " detected_s=" << (detected && f.injected_at_s > 0 ? fixed(f.detected_at_s - f.injected_at_s, 2) : "n/a")
         << " diagnosis=" << (f.diagnosis_right ? "right" : "wrong")
         << " resumed_s=" << (f.first_step_at_s > 0 && f.injected_at_s > 0 ? fixed(f.first_step_at_s - f.injected_at_s, 2) : "n/a")
         << "\n";
  }
  if (!write_profile(o_.profile_path, profile_)) {
    err_ << "megascale run: cannot write " << o_.profile_path << "\n";
    return 1;
  }
  out_ << "wrote " << o_.profile_path << "\n";
  return rc;
}

}  // namespace

int run_driver(const DriverOptions& o, std::ostream& out, std::ostream& err) {
  Driver d(o, out, err);
  return d.run();
}

}  // namespace megascale::robust
