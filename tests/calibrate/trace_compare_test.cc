// tests/calibrate/trace_compare_test.cc: a measured trace split into steps and
// compared op by op with a predicted one (calibrate/trace_compare.h).
#include "calibrate/trace_compare.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "model/schedule.h"

namespace megascale::calibrate {
namespace {

model::TraceEvent ev(int rank, const char* kind, double start_us, double end_us,
                     model::Stream stream = model::Stream::kCompute) {
  model::TraceEvent e;
  e.rank = rank;
  e.kind = kind;
  e.start_us = start_us;
  e.end_us = end_us;
  e.stream = stream;
  return e;
}

// One rank, PP 1, two micro-batches: data_load, F0, B0, F1, B1, optimizer.
model::Schedule schedule() {
  model::ScheduleOptions o;
  o.pp = 1;
  o.vpp = 1;
  o.microbatches = 2;
  o.layers = 2;
  o.dp = 1;
  return model::build_schedule(o);
}

std::vector<model::TraceEvent> step(double t0, double fwd_us, double kernel_us) {
  std::vector<model::TraceEvent> e;
  double t = t0;
  e.push_back(ev(0, "data_load", t, t));
  for (int mb = 0; mb < 2; ++mb) {
    e.push_back(ev(0, "forward", t, t + fwd_us));
    e.push_back(ev(0, "qkv", t + 1, t + 1 + kernel_us));
    e.push_back(ev(0, "ag_qkv", t + 1 + kernel_us, t + 2 + kernel_us, model::Stream::kTpComm));
    t += fwd_us;
    e.push_back(ev(0, "backward", t, t + 2 * fwd_us));
    t += 2 * fwd_us;
  }
  e.push_back(ev(0, "optimizer_step", t, t + 10));
  return e;
}

TEST(TraceCompare, StepsSplitByTheIrOpCountAndOpsCompare) {
  const model::Schedule sch = schedule();
  ASSERT_EQ(sch.ranks[0].ops.size(), 6u);
  std::vector<model::TraceEvent> measured;
  for (int k = 0; k < 4; ++k) {
    const auto s = step(k * 1000.0, 100, 40);
    measured.insert(measured.end(), s.begin(), s.end());
  }
  model::ParallelConfig p;
  const std::vector<StepWindow> w = split_steps(measured, sch, p);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[2].step, 2);
  EXPECT_EQ(w[2].events.size(), 6u + 4u);  // IR ops + the two kernels and collectives inside
  // Predicted: the same step with kernels 10% faster.
  const Comparison c = compare_traces(measured, step(0, 100, 36), sch, p, /*warmup=*/1);
  EXPECT_EQ(c.steps_used, 3);
  bool saw_qkv = false;
  for (const OpRow& r : c.ops) {
    if (r.kind != "qkv") continue;
    saw_qkv = true;
    EXPECT_NEAR(r.measured_s, 80e-6, 1e-12);  // two 40 us kernels per step
    EXPECT_NEAR(r.error, -0.1, 1e-9);
  }
  EXPECT_TRUE(saw_qkv);
  // The split: compute = forward + backward - TP, TP on its stream, optimizer, the rest waiting.
  EXPECT_NEAR(c.measured.tp_s, 2e-6, 1e-12);
  EXPECT_NEAR(c.measured.compute_s, 600e-6 - 2e-6, 1e-12);
  EXPECT_NEAR(c.measured.optimizer_s, 10e-6, 1e-12);
  EXPECT_NEAR(c.measured.wait_s, 0.0, 1e-12);
}

TEST(TraceCompare, ATraceOfAnotherScheduleIsRefused) {
  std::vector<model::TraceEvent> measured = step(0, 100, 40);
  measured.pop_back();  // 5 IR ops: not a whole step
  model::ParallelConfig p;
  EXPECT_THROW(split_steps(measured, schedule(), p), std::runtime_error);
  EXPECT_THROW(compare_traces(step(0, 100, 40), step(0, 100, 40), schedule(), p, /*warmup=*/1), std::runtime_error);
}

}  // namespace
}  // namespace megascale::calibrate
