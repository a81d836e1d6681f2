// tests/engine/micro_launch_test.cc: engine::micro_mpirun_args, the command
// line `megascale calibrate micro` launches: one rank per core (at most 8) on
// the CPU with the profile file and the scenarios, one process on the GPU, and
// the combinations megascale-micro does not run refused before any launch.
#include "engine/micro_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace megascale::engine {
namespace {

using Args = std::vector<std::string>;

TEST(MicroLaunch, CpuRunsOneRankPerCoreUpToEightWithTheProfileFileAndTheScenarios) {
  MicroLaunch m;
  m.scenarios = {"a.toml", "b.toml"};
  m.quick = true;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(micro_mpirun_args("/bin/micro", m),
            (Args{"--oversubscribe", "-np", std::to_string(std::min(cores, 8)), "/bin/micro", "--out",
                  "cpu-profile.toml", "--quick", "a.toml", "b.toml"}));
  m.ranks = 3;
  m.out_file = std::string("-");  // stdout: no --out (a move: GCC 12 warns, wrongly, on = "-")
  m.single = true;
  EXPECT_EQ(micro_mpirun_args("/bin/micro", m),
            (Args{"--oversubscribe", "-np", "3", "/bin/micro", "--quick", "--single", "a.toml", "b.toml"}));
}

TEST(MicroLaunch, CudaIsOneProcessAndTheEngineProfileTakesTheScenariosAlone) {
  MicroLaunch m;
  m.cuda = true;
  m.ranks = 4;         // one process on the GPU whatever was asked
  m.single = true;     // a cpu option, not passed on
  m.scenarios = {"s.toml"};
  m.gemm_csv = "g.csv";
  EXPECT_EQ(micro_mpirun_args("m", m), (Args{"--oversubscribe", "-np", "1", "m", "--device", "cuda", "--gemm-csv",
                                             "g.csv", "--out", "cuda-micro.toml"}));
  m.engine_profile = "e.toml";
  EXPECT_EQ(micro_mpirun_args("m", m), (Args{"--oversubscribe", "-np", "1", "m", "--device", "cuda", "--gemm-csv",
                                             "g.csv", "--engine-profile", "e.toml", "s.toml"}));
}

TEST(MicroLaunch, WhatMegascaleMicroDoesNotRunIsRefused) {
  MicroLaunch cpu;
  cpu.gemm_csv = "g.csv";
  EXPECT_THROW(micro_mpirun_args("m", cpu), std::invalid_argument);
  cpu.gemm_csv.clear();
  cpu.engine_profile = "e.toml";
  cpu.scenarios = {"s.toml"};
  EXPECT_THROW(micro_mpirun_args("m", cpu), std::invalid_argument);
  MicroLaunch gpu;
  gpu.cuda = true;
  gpu.engine_profile = "e.toml";  // no scenarios to measure
  try {
    micro_mpirun_args("m", gpu);
    ADD_FAILURE() << "an engine profile of no scenario was launched";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs the SCENARIO files"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace megascale::engine
