// tests/robust/heartbeat_test.cc: the rank agent's per-step compute
// (robust/heartbeat.h) against a real redis-server (skipped, visibly, when it
// is not installed): a busy background checkpoint writer, and a save's stall,
// are not the step's.
#include "robust/heartbeat.h"

#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "engine/background_cpu.h"
#include "engine/checkpoint.h"
#include "engine/comm_threads.h"
#include "robust/keys.h"
#include "robust/redis_client.h"
#include "robust/redis_server.h"

namespace megascale::robust {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("megascale-heartbeat-test-" + name + "-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir.string();
}

void spin_cpu(double seconds) {
  const double until = thread_cpu_s() + seconds;
  volatile double sink = 0;
  while (thread_cpu_s() < until) sink = sink + 1;
}

RankAgentConfig agent_config(int port, const std::string& job) {
  RankAgentConfig c;
  c.redis_host = "127.0.0.1";
  c.redis_port = port;
  c.job = job;
  c.heartbeat_period_s = 0.05;
  return c;
}

// Step 1's compute_s as the agent published it (its last heartbeat, written
// when it was destroyed).
double published_compute(int port, const std::string& job) {
  RedisClient client("127.0.0.1", port, 1.0);
  bool ok = false;
  const auto h = client.hgetall(job_key(job, "rank:0"), &ok);
  EXPECT_TRUE(ok) << client.error();
  EXPECT_EQ(h.count("step") ? h.at("step") : "", "1");
  return h.count("compute_s") ? std::atof(h.at("compute_s").c_str()) : -1;
}

// A background helper (as the checkpoint writer) burns CPU on its own thread
// during the step: the step's compute is the step's own work, not the sum.
TEST(RankAgent, StepComputeLeavesOutABusyBackgroundThread) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisServer server(free_local_port(), temp_dir("synthetic"));
  server.start();
  double background_s = 0;
  {
    RankAgent agent(agent_config(server.port(), "bgsynthetic"));
    agent.begin_training(0, 0);
    const double b0 = engine::background_cpu_s();
    std::thread writer([] {
      const engine::BackgroundCpuScope scope;
      spin_cpu(0.10);
    });
    spin_cpu(0.05);  // the step's own work
    writer.join();
    background_s = engine::background_cpu_s() - b0;
    agent.on_step(1, 0.1);
  }
  ASSERT_GE(background_s, 0.10);
  const double compute = published_compute(server.port(), "bgsynthetic");
  // Without the writer's CPU taken out the step would read >= 0.15 s.
  EXPECT_GE(compute, 0.05);
  EXPECT_LT(compute, 0.05 + 0.3 * background_s) << "background " << background_s;
}

// The same with the real two-stage checkpoint writer persisting a 64 MB shard
// while the step runs (its checksum, its copies into the page cache).
TEST(RankAgent, StepComputeLeavesOutTheCheckpointWriter) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisServer server(free_local_port(), temp_dir("writer"));
  server.start();
  const std::string root = temp_dir("writer") + "/ckpt";
  double writer_s = 0;
  engine::run_on_threads(1, [&](engine::Comm& c) {
    engine::CheckpointLayout layout;
    layout.model = "heartbeat-test";
    engine::ShardState state;
    state.arrays.push_back({"params", std::vector<float>(16 << 20, 0.25f)});  // 64 MB
    engine::begin_checkpoint(c, root, 1);
    engine::CheckpointPersister persister;
    {
      RankAgent agent(agent_config(server.port(), "bgwriter"));
      agent.begin_training(0, 0);
      const double b0 = engine::background_cpu_s();
      persister.start(root, 1, 0, layout, std::move(state));
      spin_cpu(0.05);  // the step's own work
      persister.wait();
      writer_s = engine::background_cpu_s() - b0;
      agent.on_step(1, 0.1);
    }
    ASSERT_TRUE(engine::finish_checkpoint(c, persister, true));
  });
  fs::remove_all(root);
  ASSERT_GE(writer_s, 0.02) << "the writer used too little CPU for this test to tell";
  const double compute = published_compute(server.port(), "bgwriter");
  EXPECT_GE(compute, 0.05);
  EXPECT_LT(compute, 0.05 + 0.5 * writer_s) << "writer " << writer_s;
}

// A checkpoint's stall (the snapshot copied on the rank's thread, before the
// next step) is not that step's compute either.
TEST(RankAgent, StepComputeLeavesOutTheSaveStallBeforeIt) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisServer server(free_local_port(), temp_dir("stall"));
  server.start();
  {
    RankAgent agent(agent_config(server.port(), "savestall"));
    agent.begin_training(0, 0);
    spin_cpu(0.05);  // the save's stall
    agent.end_save(0);
    spin_cpu(0.03);  // the step's own work
    agent.on_step(1, 0.03);
  }
  const double compute = published_compute(server.port(), "savestall");
  EXPECT_GE(compute, 0.03);
  EXPECT_LT(compute, 0.045);  // 0.08 with the stall counted
}

}  // namespace
}  // namespace megascale::robust
