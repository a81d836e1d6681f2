// network/congestion.h: congestion control on one shared bottleneck-queue fluid
// model: switch egress ports with a capacity and a shared-buffer share, ECN
// marking (RED), PFC with pause propagation and head-of-line blocking, and N
// senders each driven by one controller (none, DCQCN, Swift or the MegaScale
// hybrid; network/dcqcn.h, network/swift.h, network/hybrid_cc.h), time-stepped
// with dt = 1 us.
//
// What it is for:
//   * congestion_effect(): the numbers the training simulation needs for a
//     traffic pattern (N senders into one bottleneck): achieved bandwidth
//     fraction, added queueing latency, PFC pause fraction. Memoised by input,
//     thread-safe, so a simulator may call it for every collective step.
//   * incast_report() + incast_svg() / incast_report_json(): the time series
//     (queue, total rate, pauses) behind `megascale net incast`.
//   * run_fluid(): the engine itself, on any small set of ports and flows (e.g.
//     the two-hop chain of pfc_hol_chain() that shows pause propagation).
//
// Model (one time step of dt):
//   1. Feedback generated one base RTT earlier reaches each sender: ACKed bytes
//      with the fabric delay they saw (Swift, hybrid) and CNPs (DCQCN, hybrid).
//      Feedback delay is the flow's base RTT; queueing delay is added to the
//      measured RTT but not to the feedback loop delay (a simplification).
//   2. Each sender injects min(rate*dt, bytes left) unless its NIC link is paused.
//   3. Ports in path order: each serves min(backlog + this step's arrivals, C*dt)
//      unless its output link is PFC-paused, split over flows in proportion to
//      their bytes there (fluid FIFO); served bytes reach the flow's next port in
//      the same step or are delivered. What is left is the port's queue. A queue
//      above its hard limit drops the excess of this step's arrivals (reachable
//      only without PFC; dropped bytes are sent again later).
//   4. Delivered bytes carry delay = base RTT + sum of queue/C over their ports,
//      and are ECN-marked with probability 1 - prod_k(1 - p_k) (p_k = RED of port
//      k's queue; a seeded RNG draws whether a step's packets held a mark); the
//      receiver's NP turns marks into at most one CNP per 50 us per flow.
//   5. PFC: a port whose queue exceeds XOFF asserts pause until it drains below
//      XON; every link that feeds an active flow into that port is paused after
//      pfc_reaction_us. A paused switch port keeps its queue, which grows and
//      pauses its own upstream (propagation); a paused link stops every flow on
//      it, including flows to idle destinations (head-of-line blocking).
//      Hardware triggers PFC on per-ingress buffer accounting; triggering on the
//      congested egress and pausing its feeding links is equivalent when that
//      egress holds the switch's buffer, as in incast (a simplification).
// Controllers start at line rate (one BDP of window for Swift/hybrid), as RDMA
// NICs do, unless FluidFlowSpec::initial_rate_gbps says otherwise.
// Buffer: a port may use `buffer_bytes` (its share of the switch's shared pool;
// default Broadcom Tomahawk-4 ~114 MB / 128 x 200G ports, ../shared/REFERENCE.md)
// plus, with PFC, a per-ingress-link headroom reserve of
// link_rate * (pfc_reaction_us + dt) + MTU, which absorbs what is in flight after
// XOFF. With PFC on, queue <= buffer + headroom always, so there is no loss.
//
// Measured (tests/network/congestion_test.cc; 200 Gb/s, base RTT 10 us, PFC on,
// steady-state mean queue in KB for an N:1 incast, N = 2 / 8 / 32 / 128):
//   DCQCN   16 / 59 / 130 / 138   (grows with N: RED must mark harder as each
//                                  flow's packets per CNP interval shrink)
//   Swift  155 / 170 / 218 / 347  (near its 6-11 us target; saturates at ~400 KB
//                                  for N >= 256 once windows fall below 1 packet)
//   hybrid  57 / 156 / 140 / 260  (ECN keeps it under Swift's queue)
// DCQCN's paper parameters (R_AI 40 Mb/s, tuned at 40G) make it slow at 200G:
// ~20 ms to recover from an incast burst, ~200 ms to converge from 190/10 Gb/s.
//
// Units: rates in Gb/s (1 Gb/s = 125 bytes/us), time in us, sizes in bytes.
// Thread-safety: run_fluid, incast_report, incast_svg, incast_report_json are
// pure (no shared state). congestion_effect() shares a mutex-protected memo
// table; it is safe to call from many threads.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "network/dcqcn.h"
#include "network/hybrid_cc.h"
#include "network/swift.h"

namespace megascale::network {

// Broadcom Tomahawk-4 shared packet buffer (../shared/REFERENCE.md, Hardware).
inline constexpr double kTomahawk4SharedBufferBytes = 114e6;
// Default per-port share: the pool over 128 x 200G ports (MegaScale splits the
// ToR's 400G downlinks in two). A parameter everywhere it is used.
inline constexpr double kDefaultPortBufferBytes = kTomahawk4SharedBufferBytes / 128;

enum class CcAlgorithm { kNone, kDcqcn, kSwift, kHybrid };

std::string_view cc_algorithm_name(CcAlgorithm cc);  // "none", "dcqcn", "swift", "hybrid"
std::optional<CcAlgorithm> parse_cc_algorithm(std::string_view name);
// The same, with std::invalid_argument listing the words for an unknown one.
CcAlgorithm cc_choice(std::string_view name);

// Every controller's parameters plus the switches' ECN marking profile.
// The hybrid's delay path uses `swift` (hybrid.swift is ignored here), so Swift
// and the hybrid are compared on the same delay target.
struct CcConfig {
  RedEcnParams red;
  DcqcnParams dcqcn;
  SwiftParams swift;
  HybridParams hybrid;
};

struct PfcConfig {
  bool enabled = true;
  double xoff_bytes = -1;        // < 0: the port's buffer_bytes
  double xon_gap_bytes = 8192;   // XON = XOFF - gap (2 MTU; assumption)
  double reaction_us = 1.0;      // threshold crossing -> upstream stops (cable + frame; assumption)
};

struct FluidPortSpec {
  std::string name;
  double capacity_gbps = 200;
  double buffer_bytes = kDefaultPortBufferBytes;
  bool ecn = true;  // RED marking on this port
};

struct FluidFlowSpec {
  std::vector<int> path;                                       // port indices, in order
  double line_rate_gbps = 200;                                 // sender NIC
  double start_us = 0;
  double size_bytes = std::numeric_limits<double>::infinity();  // inf: never ends
  double base_rtt_us = 10;                                     // unloaded fabric RTT
  double initial_rate_gbps = -1;  // < 0: line rate (DCQCN and RDMA practice); else
                                  // the controller starts at this rate
};

struct FluidNetwork {
  std::vector<FluidPortSpec> ports;
  std::vector<FluidFlowSpec> flows;
};

struct FluidOptions {
  CcAlgorithm cc = CcAlgorithm::kDcqcn;
  CcConfig cc_config;
  PfcConfig pfc;
  double dt_us = 1.0;
  double duration_us = 10'000;
  double sample_interval_us = 10;   // time-series resolution
  double steady_from_us = -1;       // < 0: duration / 2; start of the steady-state window
  int observed_port = 0;            // the port the time series follows
  double mtu_bytes = 4096;          // RoCE MTU
  std::uint64_t seed = 1;           // ECN marking draws
  bool stop_when_done = true;       // end when every finite flow is delivered
};

// One point of the observed port's time series; rates and queue are averages
// over the sample interval ending at t_us.
struct FluidSample {
  double t_us = 0;
  double queue_bytes = 0;
  double total_rate_gbps = 0;   // sum of all senders' injection rates
  double throughput_gbps = 0;   // departures from the observed port
  bool paused = false;          // a link feeding the observed port was paused
  double paused_senders_fraction = 0;  // of active senders, time-averaged
};

struct FluidFlowStats {
  double delivered_bytes = 0;
  double finish_us = -1;        // last byte delivered, placed within its step; -1: not finished
  double paused_us = 0;         // time its NIC link was paused while it had data
  double active_us = 0;         // time it had data to send or in flight
  double dropped_bytes = 0;
  double steady_rate_gbps = 0;  // goodput over the steady-state window
  double final_rate_gbps = 0;   // controller rate at the end
  int cnps = 0;
};

struct FluidPortStats {
  double max_queue_bytes = 0;
  double mean_queue_bytes = 0;          // whole run
  double steady_mean_queue_bytes = 0;   // steady-state window
  double steady_max_queue_bytes = 0;
  double limit_bytes = 0;               // hard limit (buffer [+ PFC headroom])
  double xoff_bytes = 0;
  double dropped_bytes = 0;
  double pause_asserted_us = 0;         // time this port asserted PFC
  double served_bytes = 0;
};

struct FluidResult {
  double end_us = 0;
  std::vector<FluidSample> series;
  std::vector<FluidFlowStats> flows;
  std::vector<FluidPortStats> ports;
  double total_dropped_bytes = 0;
};

// Runs the fluid model. Throws std::invalid_argument on an inconsistent network
// (empty path, unknown port, non-positive capacity or rate).
FluidResult run_fluid(const FluidNetwork& net, const FluidOptions& opt);

// N senders, each on its own NIC at line_rate_gbps, into one egress port.
// start_us (optional) gives per-sender start times.
FluidNetwork incast_network(int senders, double capacity_gbps, double line_rate_gbps,
                            double flow_bytes, double base_rtt_us,
                            double buffer_bytes = kDefaultPortBufferBytes,
                            const std::vector<double>& start_us = {});

// Two-hop chain for pause propagation and head-of-line blocking:
//   `congested` senders + 1 victim -> switch S1 -> uplink (port 2, capacity
//   uplink_gbps) -> switch S2 -> port 0 (to the busy receiver, capacity_gbps)
//   or port 1 (to an idle receiver, capacity_gbps). Flows 0..congested-1 go to
//   port 0; flow `congested` (the victim) goes to port 1. Observed port: 0.
FluidNetwork pfc_hol_chain(int congested, double capacity_gbps, double uplink_gbps,
                           double base_rtt_us, double buffer_bytes = kDefaultPortBufferBytes);

// ---- `megascale net incast` ------------------------------------------------

struct IncastOptions {
  int senders = 8;
  CcAlgorithm cc = CcAlgorithm::kDcqcn;
  double capacity_gbps = 200;     // bottleneck port and every sender's NIC
  double base_rtt_us = 10;
  double duration_us = 5'000;
  double sample_interval_us = 10;
  double flow_bytes = std::numeric_limits<double>::infinity();
  bool pfc = true;
  double buffer_bytes = kDefaultPortBufferBytes;
  CcConfig cc_config;
  std::uint64_t seed = 1;
};

struct IncastReport {
  IncastOptions options;
  std::vector<FluidSample> series;
  double steady_mean_queue_bytes = 0;   // second half of the run
  double steady_max_queue_bytes = 0;
  double max_queue_bytes = 0;
  double queue_limit_bytes = 0;
  double pfc_xoff_bytes = 0;
  double pause_fraction = 0;            // mean over senders of paused / active time
  double port_pause_asserted_fraction = 0;
  double throughput_fraction = 0;       // bottleneck departures / (C * duration)
  double dropped_bytes = 0;
  double jain_fairness = 0;             // of steady per-sender goodput
};

IncastReport incast_report(const IncastOptions& opt);

// Hand-written SVG (no dependency): three stacked panels sharing the time axis:
// queue (KB, with the XOFF line), total sender rate (Gb/s, with capacity line),
// PFC paused senders (fraction).
std::string incast_svg(const IncastReport& report);
// JSON object: options, summary figures and the series as arrays.
base::Json incast_report_json(const IncastReport& report);

// ---- the simulator's entry point ---------------------------------------------

// A traffic pattern summary: `senders_per_bottleneck` flows of `flow_bytes` each
// start together into one egress port of `link_capacity_gbps` (every sender's NIC
// at the same rate), with fabric base RTT `base_rtt_us`.
struct CongestionInput {
  int senders_per_bottleneck = 1;
  double flow_bytes = 64e6;
  double link_capacity_gbps = 200;
  double base_rtt_us = 10;
  CcAlgorithm controller = CcAlgorithm::kHybrid;
  bool pfc = true;
  auto operator<=>(const CongestionInput&) const = default;
};

struct CongestionEffect {
  double achieved_bandwidth_fraction = 1;  // total goodput / (C * completion time)
  double added_latency_us = 0;             // time-mean queueing delay over the transfer
  double pfc_pause_fraction = 0;           // mean over senders of paused / active time
  double completion_time_us = 0;           // last byte delivered
  bool extrapolated = false;               // transfer longer than the simulated horizon
  std::vector<FluidSample> queue_series;   // bottleneck series, <= 256 points
};

// The simulated horizon: transfers longer than this are simulated for this long
// and the rest is extrapolated at the goodput, queueing delay and pause fraction
// of the horizon's last quarter (DCQCN at 200 Gb/s may still be recovering from
// the initial burst then, so its long-transfer figures are slightly pessimistic).
inline constexpr double kCongestionHorizonUs = 20'000;

// Memoised by input (thread-safe). REQUIRES: senders >= 1, flow_bytes > 0,
// capacity > 0, base_rtt >= 1 us (throws std::invalid_argument otherwise).
CongestionEffect congestion_effect(const CongestionInput& in);
std::size_t congestion_cache_size();
void clear_congestion_cache();

}  // namespace megascale::network
