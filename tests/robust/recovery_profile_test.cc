// tests/robust/recovery_profile_test.cc: the measured recovery profile's JSON
// (robust/recovery_profile.h): stage times per fault and their means.
#include "robust/recovery_profile.h"

#include <gtest/gtest.h>

namespace megascale::robust {
namespace {

FaultRecord kill_record() {
  FaultRecord f;
  f.fault = "kill";
  f.rank = 1;
  f.step = 4;
  f.injected_at_s = 10.0;
  f.detected_by = "process_gone";
  f.detected_at_s = 10.5;
  f.diagnosed_at_s = 10.75;
  f.evicted_at_s = 11.0;
  f.restarted = true;
  f.relaunched_at_s = 11.0;
  f.ready_at_s = 13.0;
  f.checkpoint_load_s = 0.5;
  f.first_step_at_s = 13.5;
  f.caught_up_at_s = 14.0;
  return f;
}

TEST(RecoveryProfile, StagesAreTheDifferencesOfTheRecordedTimes) {
  RecoveryProfile p;
  p.faults = {kill_record()};
  const base::Json j = profile_json(p);
  const base::Json& st = j["faults"][0]["stages_s"];
  EXPECT_DOUBLE_EQ(st["detection_s"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(st["diagnosis_s"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(st["restart_s"].get<double>(), 1.5);  // ready - relaunched - checkpoint load
  EXPECT_DOUBLE_EQ(j["stages_s"]["restart"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["stages_s"]["catch_up"].get<double>(), 1.0);
}

// A checkpoint load longer than the whole relaunch (the rank's clock against
// the driver's) gives a negative restart: written as null (not measured) and
// left out of the mean, never as a negative time, which `plan
// --recovery-profile` would refuse.
TEST(RecoveryProfile, ANegativeStageIsNotMeasuredRatherThanWritten) {
  RecoveryProfile p;
  FaultRecord bad = kill_record();
  bad.checkpoint_load_s = 5.0;  // > ready - relaunched = 2 s
  p.faults = {bad, kill_record()};
  const base::Json j = profile_json(p);
  EXPECT_TRUE(j["faults"][0]["stages_s"]["restart_s"].is_null());
  EXPECT_DOUBLE_EQ(j["faults"][1]["stages_s"]["restart_s"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["stages_s"]["restart"].get<double>(), 1.5);  // the good one only
  EXPECT_DOUBLE_EQ(j["stages_s"]["detection"].get<double>(), 0.5);
}

// A fault whose diagnosis ran self-checks (robust/self_check.h) has its own
// self_check_s stage and report; one without has null (the mean is over the
// faults that had it).
TEST(RecoveryProfile, SelfCheckIsItsOwnStage) {
  RecoveryProfile p;
  FaultRecord slow = kill_record();
  slow.fault = "slow";
  slow.self_check_ran = true;
  slow.self_check_faulty = true;
  slow.self_check_s = 0.2;
  slow.self_check = {"FAULTY node 1: compute check failed"};
  p.faults = {slow, kill_record()};
  const base::Json j = profile_json(p);
  EXPECT_DOUBLE_EQ(j["faults"][0]["stages_s"]["self_check_s"].get<double>(), 0.2);
  EXPECT_TRUE(j["faults"][0]["self_check"]["faulty"].get<bool>());
  EXPECT_EQ(j["faults"][0]["self_check"]["report"][0].get<std::string>(), "FAULTY node 1: compute check failed");
  EXPECT_TRUE(j["faults"][1]["stages_s"]["self_check_s"].is_null());
  EXPECT_FALSE(j["faults"][1].contains("self_check"));
  EXPECT_DOUBLE_EQ(j["stages_s"]["self_check"].get<double>(), 0.2);
}

}  // namespace
}  // namespace megascale::robust
