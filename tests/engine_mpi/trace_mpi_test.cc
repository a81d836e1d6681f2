// tests/engine_mpi/trace_mpi_test.cc: merging the per-rank traces of real
// processes into one CSV + Chrome JSON on rank 0.
#include "engine/trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "engine/comm_mpi.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

TEST(TraceMpi, MergeAllRanks) {
  auto world = MpiComm::world();
  float pid = world->rank() == 0 ? static_cast<float>(getpid() % (1 << 24)) : 0.0f;
  world->broadcast(&pid, 1, 0);
  const std::string prefix =
      (fs::temp_directory_path() / ("trace_mpi_" + std::to_string(static_cast<int>(pid)))).string();
  TraceRecorder rec(world->rank());
  for (int mb = 0; mb < 3; ++mb) {
    TraceRecorder::Scope s(&rec, model::Stream::kCompute, "forward", mb, 0);
  }
  {
    TraceRecorder::Scope s(&rec, model::Stream::kDpComm, "dp_allgather", -1, 0, -1, 4096);
    world->barrier();
  }
  const auto merged = merge_traces(*world, rec, prefix);
  if (world->rank() == 0) {
    ASSERT_EQ(merged.size(), 4u * world->size());
    std::set<int> ranks;
    for (const TraceEvent& e : merged) ranks.insert(e.rank);
    EXPECT_EQ(static_cast<int>(ranks.size()), world->size());
    EXPECT_EQ(merged.front().start_us, 0.0);
    EXPECT_EQ(read_trace_csv(prefix + ".csv"), merged);
    EXPECT_TRUE(fs::exists(prefix + ".json"));
    fs::remove(prefix + ".csv");
    fs::remove(prefix + ".json");
  }
}

}  // namespace
}  // namespace megascale::engine
