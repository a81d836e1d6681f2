// model/speed_spread.h: what the spread of identical GPUs' speeds costs a
// synchronous training step, in expectation, for the closed form.
//
// defines: expected_slowest_speed_factor
//
// The event fidelity draws every GPU's persistent speed factor exp(sigma z),
// z ~ N(0, 1) ([hardware] gpu_speed_sigma; sim/variability.h): a TP (and CP)
// group runs at its slowest GPU's pace (its collectives synchronise every
// layer), a pipeline's steady state at its slowest stage's, and the DP
// collectives make every replica wait for the slowest. First order, the step's
// compute runs at the pace of the slowest of the job's n GPUs. The closed form
// (model/estimator.h) takes that factor's expectation over the draws:
//   E[exp(sigma max(z_1..z_n))] = integral of exp(sigma x) n phi(x) Phi(x)^(n-1) dx,
// so sigma 0.015 costs 2.7% on 16 GPUs, 4.3% on 256, 5.3% on 2,240 and 6.0% on
// 12,288 (tests/model/speed_spread_test.cc). The event fidelity, one draw, can
// land either side, and hides part of a slow stage in the pipeline's own waits.
//
// Thread-safety: pure (a one-entry thread_local cache of the last integral).
#pragma once

namespace megascale::model {

// E[exp(sigma * max of `gpus` independent standard normals)]: >= 1, 1 when
// sigma is 0 or there is one GPU. Throws std::invalid_argument for gpus < 1 or
// sigma < 0 / not finite.
double expected_slowest_speed_factor(double sigma, long long gpus);

}  // namespace megascale::model
