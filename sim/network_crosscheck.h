// sim/network_crosscheck.h: the event-level step against SimGrid's own network
// model, at small scale (DESIGN.md: "SimGrid's solver remains the cross-check").
//
// defines: CrossCheckOptions, NetworkCrossCheck, network_crosscheck
//
// The default event simulation times every communication op once, with network/
// solving all the groups that run the same collective at the same time, and then
// lets the ops that overlap on one rank share its NIC (sim/event_engine.h). The
// cross-check removes both shortcuts for one step of a small job:
//   1. run the step (every DP replica simulated, step 0's compute factors);
//   2. turn every communication op into the flows it is on the fabric, each
//      starting when the op started in that run: a pipeline send is one flow per
//      TP rank (each on its own rail); a DP collective is, per TP rank, a ring over
//      the replicas whose every edge carries the ring's (n-1)/n x payload
//      (x 2 for an all-reduce) as one continuous flow (NCCL pipelines the ring in
//      chunks), from when the last replica arrived;
//   3. route them as network/ does (CollectiveSimulator::subflows: ECMP per QP,
//      NIC and NVLink caps) and let SimGrid 3.32 (network/simgrid_check.h:
//      plain max-min on every link, flows entering and leaving as they start and
//      end) give each flow its completion time;
//   4. an op's time is its slowest flow plus NCCL's latency for it (network/'s
//      cost form: base + hops); run the step again with these times and repeat
//      from 2 for `rounds` rounds (the start times move with the durations).
// What stays out on both sides: congestion control's effect at shared switch
// queues (network/ applies it, plain max-min does not; at the check's scale
// flows meet at the NIC caps) and the ring's step-by-step synchronisation.
// What it shows (tests/sim/network_crosscheck_test.cc, sim/README.md): the step
// times agree within 0.05%, the DP collectives within 0.2% per op; single sends
// differ by up to 2x where two transfers meet at a receiving NIC (the event
// simulation shares only the sender's NIC) or where SimGrid's max-min gives a
// send more than the equal NIC share of the event simulation.
//
// Thread-safety: not thread-safe (SimGrid, forked child per round).
#pragma once

#include <cstddef>
#include <string>

#include "model/config.h"
#include "sim/job_sim.h"

namespace megascale::sim {

struct CrossCheckOptions {
  int rounds = 2;            // SimGrid solves (each re-times the step)
  std::size_t max_flows = 200000;  // refuse larger flow sets (SimGrid's cost)
};

struct NetworkCrossCheck {
  double event_step_s = 0;     // the event simulation as it is (network/ + NIC sharing)
  double simgrid_step_s = 0;   // the step with SimGrid's op times, after the last round
  int rounds = 0;
  std::size_t flows = 0;       // sub-flows SimGrid solved in the last round
  int send_ops = 0, dp_ops = 0;
  // Per op, |simgrid - event| / event: the event simulation's own op times
  // (first round) against SimGrid's for the same start times.
  double send_mean_rel_diff = 0, send_max_rel_diff = 0;
  double dp_mean_rel_diff = 0, dp_max_rel_diff = 0;
  std::string worst_send;      // the send that differs most, with both times
  double simgrid_wall_s = 0;   // SimGrid's build + run, all rounds
  double wall_s = 0;
};

// REQUIRES: o.comm == kNetwork with a fabric; o.max_replicas >= DP (every
// replica is simulated). Throws std::invalid_argument otherwise, or when the
// step needs more than options.max_flows sub-flows.
NetworkCrossCheck network_crosscheck(const model::Scenario& s, const SimOptions& o,
                                     const CrossCheckOptions& options = {});

}  // namespace megascale::sim
