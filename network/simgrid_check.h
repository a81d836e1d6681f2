// network/simgrid_check.h: run a flow set through SimGrid 3.32's own network
// solver, to cross-check network/flow_solver.h at small scale.
//
// defines: SimGridOptions, SimGridResult, simgrid_completion_times,
//          max_relative_error
//
// The platform is built from the same description the flow solver takes:
//  * one SimGrid link per used link id, bandwidth = capacity_gbps * 1e9 / 8
//    bytes/s, latency 0, sharing policy SHARED;
//  * one source host per flow and one common sink host; hosts carry no
//    bandwidth limit of their own in SimGrid's host model;
//  * a flow's rate cap becomes a private link of that bandwidth at the head of
//    its route (SimGrid 3.32 ignores Comm::set_rate on host-to-host comms:
//    measured, a capped flow finished as if uncapped), which is exactly a cap
//    in max-min terms;
//  * routing is a NetZone subclass (simgrid::kernel::routing::NetZoneImpl,
//    get_local_route overridden) that returns each flow's exact link list,
//    O(flows) memory; a FullZone would need a hosts^2 route table.
// Each flow is a Comm::sendto of its bytes, started at its start_s by one
// controller actor; completion time is the Comm's finish time.
//
// Apples-to-apples configuration (SimGrid 3.32 option names):
//   network/model:CM02        bandwidth-factor 1, latency-factor 1, weight-S 0
//                             (the default LV08 uses 0.97, 13.01 and 20537,
//                             i.e. RTT-weighted, not plain, max-min);
//   network/crosstraffic:0    no 5% reverse-path ACK load;
//   latency 0 on every link   so the TCP-gamma window bound does not apply.
// With these, SimGrid solves plain max-min fairness with bounds, the model of
// flow_solver.h; its solver precision (maxmin/precision 1e-5, relative) is the
// expected disagreement.
//
// SimGrid's engine can be initialised only once per process, so by default
// every call forks a child process that builds the platform, runs it, sends
// the results back through a pipe and exits. Wall times are measured inside
// the child.
//
// Thread-safety: do not call concurrently from threads of one process (fork).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "network/flow_solver.h"  // defines: FlowSet

namespace megascale::network {

struct SimGridOptions {
  // Fork a child per call (SimGrid's engine cannot be re-initialised in a
  // process). false runs in this process, at most once per process (throws
  // std::logic_error the second time).
  bool fork_child = true;
  // SimGrid's log threshold (critical keeps its output quiet unless it fails).
  const char* log_threshold = "critical";
};

struct SimGridResult {
  std::vector<double> completion_s;  // (flows): SimGrid's finish time of each flow
  double build_wall_s = 0.0;         // wall time to create the engine and platform
  double run_wall_s = 0.0;           // wall time of Engine::run (SimGrid's solver)
  std::size_t hosts = 0;             // hosts created (flows + 1 sink)
  std::size_t links = 0;             // links created (used links + cap limiters)
};

// Completion times of `flows` on the links `capacity_gbps`, computed by
// SimGrid. REQUIRES: every flow has a non-empty path, link ids in range,
// used capacities > 0 and finite, caps > 0 (kNoRateCap for none), start_s
// >= 0; bytes are rounded to whole bytes (SimGrid's payload is an integer).
// Throws std::invalid_argument on bad input, std::runtime_error if SimGrid
// (the child) fails.
SimGridResult simgrid_completion_times(std::span<const double> capacity_gbps, const FlowSet& flows,
                                       const SimGridOptions& options = {});

// max_i |a_i - b_i| / max(|b_i|, floor_s): the agreement measure of the
// cross-check. Infinities must match (else the result is +inf). REQUIRES:
// equal sizes (throws std::invalid_argument).
double max_relative_error(std::span<const double> a, std::span<const double> b, double floor_s = 1e-12);

}  // namespace megascale::network
