// robust/keys.h: the Redis key layout of one `megascale run` job and the
// environment variables the driver hands to its ranks.
//
// Keys (all under "ms:<job>:"):
//   layout            hash  rank -> node (executor) id, for the current attempt;
//                           field "attempt" = attempt number
//   rank:<r>          hash  the rank's heartbeat (written every period by its
//                           heartbeat thread, robust/heartbeat.h): pid, node,
//                           attempt, phase, step, compute_s, comm_s, coll_*,
//                           seq:<group>, bytes_sent, bytes_recv, load_s, time_s
//   executor:<n>      hash  executor n's heartbeat: pid, state, time_s,
//                           check_port, baseline_gemm_cpu_s
//   node:<n>          hash  what executor n sees of its ranks: alive:<r> = 1|0,
//                           pid:<r> = the process alive:<r> is about,
//                           gone_at:<r> = time it was first seen gone
//   hw:<n>            hash  node n's emulated hardware state, written by a rank
//                           whose slow / traffic_stop fault fired:
//                           compute_extra_percent, link = up|down
//                           (robust/self_check.h NodeFaults)
//   selfcheck:<n>     hash  the driver's self-check request to executor n:
//                           id, peer_node, peer_port, time_limit_s
//   selfcheck_result:<n> hash  executor n's answer (self_check.h report_fields)
//   fired             list  one entry per fault a rank fired:
//                           "<fault>|<rank>|<step>|<time_s>"
//   stop              string  present: executors exit
// Times are seconds since the Unix epoch (wall clock, shared by every process
// on the machine).
//
// Thread-safety: constants and pure functions.
#pragma once

#include <chrono>
#include <string>

#include <fmt/format.h>

namespace megascale::robust {

inline std::string job_key(const std::string& job, const std::string& what) { return "ms:" + job + ":" + what; }

// Environment of a rank started by the driver (engine/tools/train_rank_main.cc reads them).
inline constexpr const char* kEnvRedis = "MEGASCALE_REDIS";          // host:port
inline constexpr const char* kEnvJob = "MEGASCALE_JOB";              // job id
inline constexpr const char* kEnvAttempt = "MEGASCALE_ATTEMPT";      // 1, 2, ...
inline constexpr const char* kEnvNodes = "MEGASCALE_NODES";          // node id per rank, "0,1,2"
inline constexpr const char* kEnvInject = "MEGASCALE_INJECT";        // faults, "kill:rank=1:step=5;..."
inline constexpr const char* kEnvHeartbeat = "MEGASCALE_HEARTBEAT_S";  // period, seconds
inline constexpr const char* kEnvLogDir = "MEGASCALE_LOG_DIR";       // rank_<r>.log goes there

inline double wall_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A number as the heartbeat and self-check hashes store it: fixed, 6
// decimals (microseconds for the times, which are seconds).
inline std::string redis_number(double v) { return fmt::format("{:.6f}", v); }

}  // namespace megascale::robust
