// tests/robust/self_check_test.cc: the self-checks an executor runs on a
// suspected node (robust/self_check.h): the compute check, the loopback and
// neighbour all-reduces over real TCP sockets with their time limits, the
// verdict, and the whole request / answer through real executors and a real
// redis-server.
#include "robust/self_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "robust/executor.h"
#include "robust/keys.h"
#include "robust/redis_client.h"
#include "robust/redis_server.h"

namespace megascale::robust {
namespace {

TEST(SelfCheck, ComputeCheckRunsTheGemmAndSeesAnEmulatedSlowProcessor) {
  // Healthy and slow runs alternate, each keeping its fastest, so that a
  // stretch of contention (a neighbour test on the other core, the VM's host)
  // falls on both alike: in one CI run under ASan, three healthy runs in a row
  // came out slower than the three slow ones that followed.
  ComputeCheck healthy, slow;
  healthy.gemm_cpu_s = slow.gemm_cpu_s = 1e30;
  for (int i = 0; i < 3; ++i) {
    const ComputeCheck h = run_compute_check(kGemmN, 1, 0);
    const ComputeCheck s = run_compute_check(kGemmN, 1, 300);
    if (h.gemm_cpu_s < healthy.gemm_cpu_s) healthy = h;
    if (s.gemm_cpu_s < slow.gemm_cpu_s) slow = s;
  }
  EXPECT_GT(healthy.gemm_cpu_s, 0);
  EXPECT_GT(healthy.gflops, 0);
  EXPECT_EQ(healthy.checksum, slow.checksum) << "the same GEMM, exact in float";
  EXPECT_NE(healthy.checksum, 0);
  // 300% more work: 4x the CPU time; the bound leaves room for timer noise.
  EXPECT_GT(slow.gemm_cpu_s, 2.5 * healthy.gemm_cpu_s);
  EXPECT_THROW(run_compute_check(0, 1, 0), std::invalid_argument);
  EXPECT_THROW(run_compute_check(8, 1, -1), std::invalid_argument);
}

TEST(SelfCheck, LoopbackAllReduceSumsAndADeadLinkTimesOut) {
  const AllReduceCheck ok = loopback_allreduce(kAllReduceFloats, 2.0, false);
  EXPECT_TRUE(ok.ok) << ok.detail;
  EXPECT_LT(ok.seconds, 2.0);
  const AllReduceCheck dead = loopback_allreduce(1024, 0.3, true);
  EXPECT_FALSE(dead.ok);
  EXPECT_GE(dead.seconds, 0.29);
  EXPECT_NE(dead.detail.find("timed out"), std::string::npos) << dead.detail;
}

TEST(SelfCheck, NeighbourAllReduceBetweenTwoNodes) {
  CheckListener l0, l1;
  for (bool node1_down : {false, true}) {
    AllReduceCheck r0, r1;
    const uint64_t id = node1_down ? 8 : 7;
    const double limit_s = node1_down ? 0.5 : 5.0;  // generous when it must pass: a loaded machine
    std::thread t([&] { r1 = neighbour_allreduce(l1, 1, 0, "127.0.0.1", l0.port(), id, 4096, limit_s, node1_down); });
    r0 = neighbour_allreduce(l0, 0, 1, "127.0.0.1", l1.port(), id, 4096, limit_s, false);
    t.join();
    EXPECT_EQ(r0.ok, !node1_down) << r0.detail;
    EXPECT_EQ(r1.ok, !node1_down) << r1.detail;
  }
}

TEST(SelfCheck, AStaleConnectionOfAnotherRequestIsNotTaken) {
  CheckListener l0, l1;
  AllReduceCheck r0, r1;
  // Node 1 answers request 3 while node 0 runs request 4: no match, both fail.
  std::thread t([&] { r1 = neighbour_allreduce(l1, 1, 0, "127.0.0.1", l0.port(), 3, 1024, 0.3, false); });
  r0 = neighbour_allreduce(l0, 0, 1, "127.0.0.1", l1.port(), 4, 1024, 0.3, false);
  t.join();
  EXPECT_FALSE(r0.ok);
  EXPECT_FALSE(r1.ok);
}

SelfCheckReport report(int node, double gemm_s, double baseline_s, bool loopback, int peer, bool neighbour) {
  SelfCheckReport r;
  r.node = node;
  r.answered = true;
  r.compute.gemm_cpu_s = gemm_s;
  r.baseline_gemm_cpu_s = baseline_s;
  r.loopback.ok = loopback;
  r.peer_node = peer;
  r.neighbour.ok = neighbour;
  return r;
}

TEST(SelfCheck, Verdicts) {
  const SelfCheckReport ref = report(0, 0.004, 0.004, true, 1, true);
  // Healthy.
  EXPECT_FALSE(judge_self_check(report(1, 0.0045, 0.004, true, 0, true), &ref, 2.5).faulty);
  // Slow against its baseline and the reference.
  const SelfCheckVerdict slow = judge_self_check(report(1, 0.02, 0.004, true, 0, true), &ref, 2.5);
  EXPECT_TRUE(slow.faulty);
  EXPECT_NE(slow.why.find("compute check failed"), std::string::npos) << slow.why;
  // Slow against its baseline only (the whole machine slowed down now): not this node.
  const SelfCheckReport slow_ref = report(0, 0.018, 0.004, true, 1, true);
  EXPECT_FALSE(judge_self_check(report(1, 0.02, 0.004, true, 0, true), &slow_ref, 2.5).faulty);
  // Without a reference, the baseline decides.
  EXPECT_TRUE(judge_self_check(report(1, 0.02, 0.004, true, -1, false), nullptr, 2.5).faulty);
  // Loopback failed.
  EXPECT_TRUE(judge_self_check(report(1, 0.004, 0.004, false, 0, false), &ref, 2.5).faulty);
  // The exchange failed while the reference's own loopback passed.
  EXPECT_TRUE(judge_self_check(report(1, 0.004, 0.004, true, 0, false), &ref, 2.5).faulty);
  // ... but not when the reference's loopback failed too.
  const SelfCheckReport bad_ref = report(0, 0.004, 0.004, false, 1, false);
  EXPECT_FALSE(judge_self_check(report(1, 0.004, 0.004, true, 0, false), &bad_ref, 2.5).faulty);
  // No answer.
  SelfCheckReport silent;
  silent.node = 1;
  EXPECT_TRUE(judge_self_check(silent, &ref, 2.5).faulty);
  EXPECT_THROW(judge_self_check(ref, nullptr, 1.0), std::invalid_argument);
}

TEST(SelfCheck, RequestAndReportRoundTripThroughTheirFields) {
  SelfCheckRequest q;
  q.id = 42;
  q.peer_node = 3;
  q.peer_port = 5000;
  q.time_limit_s = 0.5;
  const SelfCheckRequest q2 = parse_request(request_fields(q));
  EXPECT_EQ(q2.id, 42u);
  EXPECT_EQ(q2.peer_node, 3);
  EXPECT_EQ(q2.peer_port, 5000);
  EXPECT_DOUBLE_EQ(q2.time_limit_s, 0.5);
  SelfCheckReport r = report(2, 0.004, 0.003, true, 3, false);
  r.id = 42;
  r.neighbour.detail = "timed out";
  const SelfCheckReport r2 = parse_report(2, report_fields(r));
  EXPECT_TRUE(r2.answered);
  EXPECT_EQ(r2.id, 42u);
  EXPECT_DOUBLE_EQ(r2.compute.gemm_cpu_s, 0.004);
  EXPECT_TRUE(r2.loopback.ok);
  EXPECT_FALSE(r2.neighbour.ok);
  EXPECT_EQ(r2.neighbour.detail, "timed out");
  NodeFaults f;
  f.compute_extra_percent = 400;
  f.link_down = true;
  const NodeFaults f2 = parse_node_faults(node_faults_fields(f));
  EXPECT_DOUBLE_EQ(f2.compute_extra_percent, 400);
  EXPECT_TRUE(f2.link_down);
  EXPECT_FALSE(parse_node_faults({}).link_down);
}

// Two real executors (robust/executor.h, in threads) and a real redis-server:
// the driver's request, the executors' checks on their nodes, the verdict.
TEST(SelfCheck, ExecutorsAnswerTheDriversRequest) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  const auto dir = std::filesystem::temp_directory_path() / ("megascale-selfcheck-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  RedisServer server(free_local_port(), dir.string());
  server.start();
  const std::string job = "selfcheck-test";
  std::vector<std::thread> executors;
  for (int n = 0; n < 2; ++n) {
    executors.emplace_back([&, n] { run_executor(ExecutorOptions{server.address(), job, n, 0.2, "", {}}); });
  }
  RedisClient redis("127.0.0.1", server.port(), 1.0);
  for (int i = 0; i < 200; ++i) {
    if (!redis.hgetall(job_key(job, "executor:1")).empty() && !redis.hgetall(job_key(job, "executor:0")).empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  // Healthy nodes pass.
  SelfCheckPair p = run_self_check_pair(redis, job, 1, 0, 1, 2.5, 3.0, 5.0);
  EXPECT_FALSE(p.suspect_verdict.faulty) << p.suspect_verdict.why;
  EXPECT_FALSE(p.reference_verdict.faulty) << p.reference_verdict.why;
  EXPECT_TRUE(p.suspect.neighbour.ok) << p.suspect.neighbour.detail;
  EXPECT_GT(p.seconds, 0);
  // A slow processor on node 1.
  NodeFaults slow;
  slow.compute_extra_percent = 400;
  redis.hset(job_key(job, "hw:1"), node_faults_fields(slow));
  p = run_self_check_pair(redis, job, 1, 0, 2, 2.5, 3.0, 5.0);
  EXPECT_TRUE(p.suspect_verdict.faulty);
  EXPECT_NE(p.suspect_verdict.why.find("compute check failed"), std::string::npos) << p.suspect_verdict.why;
  EXPECT_FALSE(p.reference_verdict.faulty) << p.reference_verdict.why;
  // A dead link on node 1.
  NodeFaults dead;
  dead.link_down = true;
  redis.hset(job_key(job, "hw:1"), node_faults_fields(dead));
  p = run_self_check_pair(redis, job, 1, 0, 3, 2.5, 0.5, 5.0);
  EXPECT_TRUE(p.suspect_verdict.faulty);
  EXPECT_NE(p.suspect_verdict.why.find("loopback"), std::string::npos) << p.suspect_verdict.why;
  EXPECT_FALSE(p.reference_verdict.faulty) << p.reference_verdict.why;
  // An executor that does not answer (no such node): faulty, within the wait.
  p = run_self_check_pair(redis, job, 5, -1, 4, 2.5, 0.2, 0.5);
  EXPECT_TRUE(p.suspect_verdict.faulty);
  EXPECT_LT(p.seconds, 2.0);
  redis.set(job_key(job, "stop"), "1");
  for (std::thread& t : executors) t.join();
  server.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace megascale::robust
