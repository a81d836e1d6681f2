// robust/self_check.h: the self-checks an executor runs on its node when the
// driver suspects it, and the verdict they give (MegaScale NSDI'24 section 4:
// after a detection, lightweight diagnostic tests on the suspected machines,
// a compute check and loopback / neighbour all-reduce checks, find the
// faulty one before it is evicted).
//
// defines: NodeFaults, parse_node_faults, node_faults_fields, ThreadCpuClock,
//          ComputeCheck, run_compute_check, AllReduceCheck, CheckListener,
//          loopback_allreduce, neighbour_allreduce, SelfCheckRequest,
//          SelfCheckReport, run_self_check, judge_self_check, SelfCheckPair,
//          run_self_check_pair
//
// The checks (each real work, timed):
//   compute    a float GEMM (kGemmN x kGemmN x kGemmN) kGemmReps times; the
//              fastest repetition's thread CPU time against the same check
//              the executor ran when it started (its baseline) and the
//              reference node's time now. CPU time, as the slow detector
//              (robust/detector.h): a healthy check descheduled on a busy
//              machine is not slow.
//   loopback   an all-reduce (sum) of kAllReduceFloats floats between two TCP
//              endpoints of the node itself (127.0.0.1), within a time limit:
//              the node's own network path.
//   neighbour  (run first, so that both sides start it together) the same
//              all-reduce with a reference node's executor over TCP
//              (the lower node id accepts on its check port, the other
//              connects; the first 8 bytes carry the request id so that a
//              late connection of an earlier check is not taken for this
//              one), within the time limit.
// Verdict (judge_self_check): faulty when the node did not answer, its GEMM
// took more than slow_factor x both its baseline and the reference's, its
// loopback failed, or the neighbour all-reduce failed while the reference's
// own loopback passed (the reference is then presumed healthy).
//
// Emulated hardware (NodeFaults, Redis ms:<job>:hw:<node>): on one machine
// the "nodes" share the processor and the loopback interface, so the
// hardware part of a fault is emulated, the same way for the training rank
// and for the checks: a `slow` fault makes every compute on the node do
// compute_extra_percent% more work (RankAgent::begin_step for the rank; here,
// CPU burnt after each GEMM repetition, in proportion to its own time), a
// `traffic_stop` makes the node's network deliver nothing (the rank blocks
// before its collectives; here, the node's endpoints never send). The rank
// writes the key when its fault fires (robust/heartbeat.h). The checks never
// read the fault's name: they measure, and the verdict comes from the
// measurements.
//
// Thread-safety: the functions are reentrant; a CheckListener is used by one
// thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace megascale::robust {

class RedisClient;

// The GEMM of the compute check: 2 x 384^3 = 113 MFLOP, about 2 ms of one
// core of this project's machine (the plain i-k-j loop, which -O3 vectorises:
// 128^3 took 0.065 ms, ~60 GFLOP/s; the executor's baseline is in
// executor_<n>.log): long next to the clock's overheads (a 128^3 GEMM's
// baseline varied 2x), short enough to repeat.
inline constexpr int kGemmN = 384;
// Repetitions; the fastest counts (the others absorb cache warm-up and
// preemption).
inline constexpr int kGemmReps = 5;
// Floats per all-reduce check: 1 MiB, a message the paper's all-reduce tests
// would call small; it crosses loopback TCP in about a millisecond here.
inline constexpr size_t kAllReduceFloats = 262144;

// The emulated hardware state of a node (see above).
struct NodeFaults {
  double compute_extra_percent = 0;  // every compute does this much more work
  bool link_down = false;            // the node's network sends nothing
};
NodeFaults parse_node_faults(const std::map<std::string, std::string>& hash);
std::map<std::string, std::string> node_faults_fields(const NodeFaults& f);

// The calling thread's CPU time, seconds.
double thread_cpu_now_s();

struct ComputeCheck {
  double gemm_cpu_s = 0;   // fastest repetition, thread CPU seconds
  double gflops = 0;       // 2 n^3 / gemm_cpu_s / 1e9
  double checksum = 0;     // sum of C (the GEMM really ran; the same every run)
};
// REQUIRES: n >= 1, reps >= 1, extra_percent >= 0.
ComputeCheck run_compute_check(int n, int reps, double extra_percent);

struct AllReduceCheck {
  bool ok = false;
  double seconds = 0;      // wall time of the exchange (until done or the limit)
  std::string detail;      // why not ok ("timed out after 1.00 s: received 0 of 1048576 bytes")
};

// A TCP listening socket on 127.0.0.1, or on every address of the node
// (`every_address`: an executor in a network namespace, robust/netns.h), port
// chosen by the kernel: the executor's check port for neighbour all-reduces.
// Throws std::runtime_error when it cannot be made.
class CheckListener {
 public:
  explicit CheckListener(bool every_address = false);
  ~CheckListener();
  CheckListener(const CheckListener&) = delete;
  CheckListener& operator=(const CheckListener&) = delete;
  int port() const { return port_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// All-reduce (sum) of `floats` floats between two TCP endpoints of this node.
AllReduceCheck loopback_allreduce(size_t floats, double time_limit_s, bool link_down);

// All-reduce of `floats` floats with node `peer_node` (listening on
// `peer_host`:`peer_port`); `id` names the request (both sides must be given
// the same).
AllReduceCheck neighbour_allreduce(CheckListener& mine, int my_node, int peer_node, const std::string& peer_host,
                                   int peer_port, uint64_t id, size_t floats, double time_limit_s, bool link_down);

// What the driver asks an executor (Redis ms:<job>:selfcheck:<node>).
struct SelfCheckRequest {
  uint64_t id = 0;
  int peer_node = -1;      // -1: no neighbour check
  std::string peer_host = "127.0.0.1";  // the peer executor's check_host (netns: its node's address)
  int peer_port = 0;
  double time_limit_s = 1;
};
std::map<std::string, std::string> request_fields(const SelfCheckRequest& r);
SelfCheckRequest parse_request(const std::map<std::string, std::string>& hash);

// What an executor answers (Redis ms:<job>:selfcheck_result:<node>).
struct SelfCheckReport {
  int node = -1;
  bool answered = false;
  uint64_t id = 0;
  double baseline_gemm_cpu_s = 0;  // the executor's check at its start
  ComputeCheck compute;
  AllReduceCheck loopback;
  int peer_node = -1;
  AllReduceCheck neighbour;
  double seconds = 0;              // the whole self-check, wall
};
std::map<std::string, std::string> report_fields(const SelfCheckReport& r);
SelfCheckReport parse_report(int node, const std::map<std::string, std::string>& hash);

// The executor's part: runs the checks of `req` on this node.
SelfCheckReport run_self_check(int node, const SelfCheckRequest& req, const NodeFaults& faults,
                               double baseline_gemm_cpu_s, CheckListener& listener);

struct SelfCheckVerdict {
  bool faulty = false;
  std::string why;         // one line, the measurements that decided
};
// `reference`: the peer's report, or nullptr when there was none.
// REQUIRES: slow_factor > 1.
SelfCheckVerdict judge_self_check(const SelfCheckReport& node, const SelfCheckReport* reference, double slow_factor);

// The driver's part: asks the executors of `suspect` and `reference` (-1:
// none) for a self-check through Redis, waits for both answers (at most
// 2 x time_limit_s + answer_wait_s), and judges the suspect (and the
// reference, which a failed exchange may also implicate).
struct SelfCheckPair {
  SelfCheckReport suspect, reference;
  SelfCheckVerdict suspect_verdict, reference_verdict;
  double seconds = 0;                // request -> both answers in
  std::vector<std::string> lines;    // a report, one line per node
};
SelfCheckPair run_self_check_pair(RedisClient& redis, const std::string& job, int suspect, int reference,
                                  uint64_t id, double slow_factor, double time_limit_s, double answer_wait_s);

}  // namespace megascale::robust
