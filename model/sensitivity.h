// model/sensitivity.h: which inputs a prediction hangs on - each hardware
// input changed on its own by a relative step, the job timed again.
//
// defines: InputSensitivity, Sensitivity, kMaxSensitivityStep, sensitivity
//
// A prediction is only as good as the inputs it is built from, and the shipped
// profiles mix datasheet figures, published microbenchmarks, fits and
// assumptions (each value's `source`, calibrate/profiles/README.md). This
// answers the capacity planner's next question: which of them move this job's
// iteration time, and by how much. Every real-valued value of the scenario's
// hardware profile (model/profile.h profile_numbers) except the ones that are
// formats or capacities rather than speeds (memory_bytes, activation_bytes,
// param_gather_bytes, cache_bytes, and nic_gbps, which the scenario's own
// hardware.nic_gbps replaces), plus the scenario's hardware.nic_gbps and
// hardware.gpu_speed_sigma, is multiplied by (1 + step) with everything else
// kept, and the job is timed again by the caller's function (the analytical
// estimate or the event simulation: the same fidelity as the base time).
// An efficiency (a fraction of a peak) that would pass 1 is moved down
// instead, by (1 - step); an input whose changed value the scenario refuses
// (the timing function throws: a NIC faster than the switch port it plugs
// into) is timed the other way, and listed in `refused` with the reason when
// both are refused. An input at 0 stays 0 under a relative change: it is
// listed apart (`at_zero`), not timed.
//
// Reported per input: the value, its source (the profile's provenance:
// spec | measured | fitted | assumption; "scenario" for hardware.*), the new
// iteration time, its relative change and the elasticity, ln(t'/t) / ln(x'/x):
// -1 for an input the time is inversely proportional to, whichever way and
// however far it was moved (a ratio of relative changes would give -0.83 for
// +20% and -1.25 for -20%, so inputs moved up and down would not compare), 0
// for one it does not use. Sorted by |elasticity|, largest first (ties in the
// schema's order). A profile's measured tables (a CPU profile's GEMM,
// attention and kernel times) are not changed: where they time a kernel, the
// scalar they replace shows 0; their names are listed (`measured_tables`).
//
// Errors: a step outside (0, kMaxSensitivityStep] or not finite throws
// std::invalid_argument naming the range; whatever the timing function throws
// on the unchanged scenario propagates, and an unchanged time that is not a
// positive finite number throws std::invalid_argument (a changed one that is
// not counts as refused).
//
// Thread-safety: pure; calls `iteration_s` once per timed input.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/config.h"

namespace megascale::model {

// Largest relative step: beyond it the change stops describing the
// neighbourhood of the given input (a 50% faster NIC is another machine).
inline constexpr double kMaxSensitivityStep = 0.5;

struct InputSensitivity {
  std::string input;        // profile key ("max_gemm_efficiency") or "hardware.nic_gbps"
  double value = 0;         // as given
  double changed_value = 0; // as timed
  std::string source;       // spec | measured | fitted | assumption | scenario
  double iteration_s = 0;   // with the input changed
  double change = 0;        // iteration_s / base - 1
  double elasticity = 0;    // ln(iteration_s / base) / ln(changed_value / value)
};

struct Sensitivity {
  double step = 0;                       // relative change asked for
  double base_iteration_s = 0;           // nothing changed
  std::vector<InputSensitivity> inputs;  // by |elasticity|, largest first
  std::vector<std::string> at_zero;      // inputs at 0, not timed
  std::vector<std::string> measured_tables;  // the profile's ("gemm", ...), not changed
  struct Refused {
    std::string input, reason;  // both changed values refused; the first reason
  };
  std::vector<Refused> refused;
};

// Times `s` with nothing changed, then once per input as above.
Sensitivity sensitivity(const Scenario& s, double step,
                        const std::function<double(const Scenario&)>& iteration_s);

}  // namespace megascale::model
