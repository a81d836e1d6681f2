// tests/model/sensitivity_test.cc: each hardware input changed on its own.
#include "model/sensitivity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/estimator.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "valid_scenario.h"

namespace megascale::model {
namespace {

double analytical_s(const Scenario& s) { return estimate(s).iteration_time_s; }

const InputSensitivity& find(const Sensitivity& r, const std::string& input) {
  const auto it = std::find_if(r.inputs.begin(), r.inputs.end(),
                               [&](const InputSensitivity& i) { return i.input == input; });
  if (it == r.inputs.end()) throw std::out_of_range("no input " + input);
  return *it;
}

Scenario valid() { return parse_scenario(testing::kValidScenario, "valid.toml"); }

// One GPU, no network: the NIC does not matter; a faster GPU shortens the step,
// never by more than the input's own change (elasticity in [-1, 0)).
TEST(Sensitivity, OneGpuHangsOnTheGpuNotTheNic) {
  Scenario s = valid();
  s.parallel.tp = s.parallel.pp = s.parallel.dp = 1;
  s.parallel.global_batch = 4;
  s.parallel.sequence_parallel = false;
  s.cluster.gpus = 1;
  s.hardware.gpus_per_node = 1;
  s.hardware.nics_per_node = 1;
  const Sensitivity r = sensitivity(s, 0.1, analytical_s);
  EXPECT_DOUBLE_EQ(r.base_iteration_s, analytical_s(s));
  EXPECT_DOUBLE_EQ(find(r, "hardware.nic_gbps").elasticity, 0.0);
  EXPECT_DOUBLE_EQ(find(r, "nvlink_busbw_gbs").elasticity, 0.0);
  for (const char* key : {"peak_tflops", "max_gemm_efficiency"}) {
    const InputSensitivity& i = find(r, key);
    EXPECT_LT(i.elasticity, -0.3) << key;
    EXPECT_GE(i.elasticity, -1.0 - 1e-9) << key;
    EXPECT_LT(i.iteration_s, r.base_iteration_s) << key;
  }
}

// memory_gbs and memory_efficiency only ever appear as their product, so the
// same relative change must move the step by the same amount; the GEMM
// efficiency is timed 10% up, the step shorter.
TEST(Sensitivity, InputsThatMultiplyMoveTheStepAlike) {
  const Sensitivity r = sensitivity(valid(), 0.1, analytical_s);
  const InputSensitivity& bw = find(r, "memory_gbs");
  const InputSensitivity& eff = find(r, "memory_efficiency");
  EXPECT_LT(bw.elasticity, 0.0);
  EXPECT_NEAR(bw.iteration_s, eff.iteration_s, 1e-12 * bw.iteration_s);
  const InputSensitivity& gemm = find(r, "max_gemm_efficiency");
  EXPECT_NEAR(gemm.changed_value, gemm.value * 1.1, 1e-12);
  EXPECT_DOUBLE_EQ(gemm.change, gemm.iteration_s / r.base_iteration_s - 1);
  EXPECT_DOUBLE_EQ(gemm.elasticity, std::log(gemm.iteration_s / r.base_iteration_s) / std::log(1.1));
}

// Sorted by |elasticity|; each input carries its profile source; inputs at 0
// are listed apart and not timed; capacities and formats are not inputs.
TEST(Sensitivity, SortedWithSourcesAndZerosApart) {
  const Scenario s = valid();
  const GpuProfile& p = hardware_profile(s);
  const Sensitivity r = sensitivity(s, 0.05, analytical_s);
  ASSERT_FALSE(r.inputs.empty());
  for (size_t i = 1; i < r.inputs.size(); ++i)
    EXPECT_GE(std::abs(r.inputs[i - 1].elasticity), std::abs(r.inputs[i].elasticity)) << r.inputs[i].input;
  EXPECT_EQ(find(r, "peak_tflops").source, p.provenance.at("peak_tflops").source);
  EXPECT_EQ(find(r, "hardware.nic_gbps").source, "scenario");
  const std::vector<ProfileNumber> numbers = profile_numbers();
  for (const char* zero : {"step_overhead_s", "op_gap_us"}) {
    const auto n = std::find_if(numbers.begin(), numbers.end(), [&](const ProfileNumber& k) { return k.key == zero; });
    ASSERT_NE(n, numbers.end()) << zero;
    ASSERT_EQ(p.*(n->member), 0.0) << zero;
    EXPECT_NE(std::find(r.at_zero.begin(), r.at_zero.end(), zero), r.at_zero.end()) << zero;
    EXPECT_THROW(find(r, zero), std::out_of_range);
  }
  for (const char* not_speed : {"memory_bytes", "activation_bytes", "param_gather_bytes", "nic_gbps"})
    EXPECT_THROW(find(r, not_speed), std::out_of_range) << not_speed;
}

// An efficiency that a step up would take past 1 is timed a step down.
TEST(Sensitivity, AnEfficiencyNearOneIsLoweredInstead) {
  Scenario s = valid();
  auto p = std::make_shared<GpuProfile>(hardware_profile(s));
  p->memory_efficiency = 0.95;
  s.hardware.loaded_profile = p;
  const Sensitivity r = sensitivity(s, 0.1, analytical_s);
  const InputSensitivity& i = find(r, "memory_efficiency");
  EXPECT_NEAR(i.changed_value, 0.855, 1e-12);
  EXPECT_GT(i.iteration_s, analytical_s(s));  // slower memory, longer step
  EXPECT_LT(i.elasticity, 0.0);               // still: more efficiency, shorter step
}

// A changed value the scenario refuses (a NIC faster than its switch port) is
// timed the other way; refused both ways, the input is listed with the reason.
TEST(Sensitivity, ARefusedValueIsTimedTheOtherWayOrListed) {
  const Scenario s = valid();
  const double nic = s.hardware.nic_gbps;
  const Sensitivity down = sensitivity(s, 0.1, [nic](const Scenario& v) {
    if (v.hardware.nic_gbps > nic) throw std::invalid_argument("the NIC does not fit the switch port");
    return analytical_s(v);
  });
  EXPECT_NEAR(find(down, "hardware.nic_gbps").changed_value, 0.9 * nic, 1e-9);
  EXPECT_TRUE(down.refused.empty());
  const Sensitivity none = sensitivity(s, 0.1, [nic](const Scenario& v) {
    if (v.hardware.nic_gbps != nic) throw std::invalid_argument("only the given NIC");
    return analytical_s(v);
  });
  EXPECT_THROW(find(none, "hardware.nic_gbps"), std::out_of_range);
  ASSERT_EQ(none.refused.size(), 1u);
  EXPECT_EQ(none.refused[0].input, "hardware.nic_gbps");
  EXPECT_EQ(none.refused[0].reason, "only the given NIC");
}

// The elasticity is a ratio of logarithms: a time inversely proportional to
// an input gives exactly -1 whether the input was moved up (peak) or down (an
// efficiency near 1), so the two compare.
TEST(Sensitivity, InverselyProportionalIsMinusOneEitherWay) {
  Scenario s = valid();
  auto p = std::make_shared<GpuProfile>(hardware_profile(s));
  p->memory_efficiency = 0.95;
  s.hardware.loaded_profile = p;
  const Sensitivity r = sensitivity(s, 0.2, [](const Scenario& v) {
    const GpuProfile& g = hardware_profile(v);
    return 1.0 / (g.peak_tflops * g.memory_efficiency);
  });
  const InputSensitivity& peak = find(r, "peak_tflops");
  const InputSensitivity& eff = find(r, "memory_efficiency");
  EXPECT_GT(peak.changed_value, peak.value);
  EXPECT_LT(eff.changed_value, eff.value);
  EXPECT_NEAR(peak.elasticity, -1.0, 1e-12);
  EXPECT_NEAR(eff.elasticity, -1.0, 1e-12);
  EXPECT_DOUBLE_EQ(find(r, "hardware.nic_gbps").elasticity, 0.0);
}

// A time that is not a positive finite number is refused: unchanged, as an
// error; changed, as a refused input.
TEST(Sensitivity, ANonPhysicalTimeIsAnError) {
  const Scenario s = valid();
  EXPECT_THROW(sensitivity(s, 0.1, [](const Scenario&) { return 0.0; }), std::invalid_argument);
  EXPECT_THROW(sensitivity(s, 0.1, [](const Scenario&) { return std::nan(""); }), std::invalid_argument);
  const double nic = s.hardware.nic_gbps;
  const Sensitivity r = sensitivity(s, 0.1, [nic](const Scenario& v) {
    return v.hardware.nic_gbps == nic ? 1.0 : -1.0;
  });
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].input, "hardware.nic_gbps");
}

// A profile with measured tables (the CPU profile) names them: the kernels they
// time do not read the scalar values.
TEST(Sensitivity, MeasuredTablesAreNamed) {
  Scenario s = valid();
  s.hardware.loaded_profile = std::make_shared<GpuProfile>(builtin_profile("cpu"));
  const Sensitivity r = sensitivity(s, 0.1, [](const Scenario&) { return 1.0; });
  EXPECT_NE(std::find(r.measured_tables.begin(), r.measured_tables.end(), "gemm"), r.measured_tables.end());
  EXPECT_TRUE(sensitivity(valid(), 0.1, analytical_s).measured_tables.empty());
}

TEST(Sensitivity, StepOutsideItsRangeIsRefused) {
  const Scenario s = valid();
  for (double step : {0.0, -0.1, 0.51, std::nan("")}) {
    try {
      sensitivity(s, step, analytical_s);
      ADD_FAILURE() << "accepted step " << step;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("(0, 0.5]"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace megascale::model
