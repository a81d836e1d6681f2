// robust/executor.cc: see executor.h.
#include "robust/executor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "robust/keys.h"
#include "robust/redis_client.h"
#include "robust/self_check.h"

namespace megascale::robust {
namespace {

// How often an executor looks for a self-check request between its
// heartbeats: the request waits at most this long (50 ms, small next to the
// checks' own ~0.1 s).
constexpr double kRequestPoll_s = 0.05;

// A live process, not a zombie (a rank mpirun has not reaped yet is gone for us).
bool process_alive(int pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(stat, text);
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return true;
  return text[close + 2] != 'Z' && text[close + 2] != 'X';
}

}  // namespace

int run_executor(const ExecutorOptions& o) {
  const auto [host, port] = parse_host_port(o.redis);
  RedisClient redis(host, port, 0.5);
  const pid_t parent = ::getppid();
  const std::string node_key = job_key(o.job, "node:" + std::to_string(o.node));
  std::map<int, std::pair<int, double>> gone;  // rank -> (pid, first seen gone)
  // Self-checks (robust/self_check.h): the check port and the compute
  // baseline, measured now, before any fault touched the node.
  CheckListener listener(!o.address.empty());
  const double baseline_gemm_cpu_s = run_compute_check(kGemmN, kGemmReps, 0).gemm_cpu_s;
  std::fprintf(stderr, "executor %d: self-check port %d, baseline GEMM (%d^3) %.3f ms CPU\n", o.node, listener.port(),
               kGemmN, baseline_gemm_cpu_s * 1e3);
  const std::string request_key = job_key(o.job, "selfcheck:" + std::to_string(o.node));
  uint64_t last_check = 0;
  while (::getppid() == parent) {
    const double now = wall_now_s();
    redis.hset(job_key(o.job, "executor:" + std::to_string(o.node)),
               {{"pid", std::to_string(::getpid())}, {"state", "up"}, {"time_s", redis_number(now)},
                {"check_port", std::to_string(listener.port())},
                {"check_host", o.address.empty() ? std::string("127.0.0.1") : o.address},
                {"baseline_gemm_cpu_s", redis_number(baseline_gemm_cpu_s)}});
    if (redis.get(job_key(o.job, "stop"))) break;
    bool ok = false;
    const std::map<std::string, std::string> layout = redis.hgetall(job_key(o.job, "layout"), &ok);
    if (ok) {
      const std::string attempt = layout.count("attempt") ? layout.at("attempt") : "";
      std::map<std::string, std::string> report = {{"time_s", redis_number(now)}, {"attempt", attempt}};
      for (const auto& [k, v] : layout) {
        if (k.rfind("rank:", 0) != 0 || std::atoi(v.c_str()) != o.node) continue;
        const int rank = std::atoi(k.c_str() + 5);
        const std::map<std::string, std::string> status =
            redis.hgetall(job_key(o.job, "rank:" + std::to_string(rank)));
        const auto a = status.find("attempt");
        const auto p = status.find("pid");
        if (a == status.end() || a->second != attempt || p == status.end()) continue;  // not started yet
        const int pid = std::atoi(p->second.c_str());
        const bool alive = process_alive(pid);
        report["alive:" + std::to_string(rank)] = alive ? "1" : "0";
        // The process the finding is about: HSET adds to the hash, so a field
        // written for an earlier attempt can outlive it (the driver deletes
        // the hash at a launch, and a report of the old attempt may land just
        // after); the driver counts alive:<r> = 0 only for its rank's pid.
        report["pid:" + std::to_string(rank)] = std::to_string(pid);
        if (!alive) {
          auto it = gone.find(rank);
          if (it == gone.end() || it->second.first != pid) it = gone.insert_or_assign(rank, std::make_pair(pid, now)).first;
          report["gone_at:" + std::to_string(rank)] = redis_number(it->second.second);
        }
      }
      redis.hset(node_key, report);
    }
    // Until the next period, answer a self-check request as soon as it comes.
    const double next = now + o.period_s;
    while (wall_now_s() < next) {
      const SelfCheckRequest req = parse_request(redis.hgetall(request_key));
      if (req.id != 0 && req.id != last_check) {
        last_check = req.id;
        const NodeFaults faults = parse_node_faults(redis.hgetall(job_key(o.job, "hw:" + std::to_string(o.node))));
        const SelfCheckReport rep = run_self_check(o.node, req, faults, baseline_gemm_cpu_s, listener);
        redis.hset(job_key(o.job, "selfcheck_result:" + std::to_string(o.node)), report_fields(rep));
        std::fprintf(stderr, "executor %d: self-check %llu: GEMM %.3f ms CPU, loopback %s, neighbour %s\n", o.node,
                     static_cast<unsigned long long>(req.id), rep.compute.gemm_cpu_s * 1e3,
                     rep.loopback.ok ? "ok" : rep.loopback.detail.c_str(),
                     req.peer_node < 0 ? "none" : rep.neighbour.ok ? "ok" : rep.neighbour.detail.c_str());
        break;
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(kRequestPoll_s, o.period_s)));
    }
  }
  return 0;
}

pid_t spawn_executor(const std::string& self_binary, const ExecutorOptions& o, const std::string& log_path) {
  std::vector<std::string> args = o.command_prefix;
  for (const std::string& a : {self_binary, std::string("run"), std::string("--executor"), std::string("--redis"), o.redis,
                               std::string("--job"), o.job, std::string("--node"), std::to_string(o.node),
                               std::string("--period"), redis_number(o.period_s)}) {
    args.push_back(a);
  }
  if (!o.address.empty()) {
    args.push_back("--address");
    args.push_back(o.address);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cannot start an executor: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    if (o.command_prefix.empty()) {
      ::execv(argv[0], argv.data());
    } else {
      ::execvp(argv[0], argv.data());
      const std::string sbin = std::string("/usr/sbin/") + argv[0];  // iproute2's ip
      ::execv(sbin.c_str(), argv.data());
    }
    ::_exit(127);
  }
  return child;
}

}  // namespace megascale::robust
