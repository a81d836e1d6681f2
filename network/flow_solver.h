// network/flow_solver.h: flow-level rates and completion times on a set of
// directed links, independent of any topology code.
//
// defines: LinkId, FlowSet, FlowSolver, FlowSolverOptions, RateSolution,
//          CompletionResult, SolveStats, solve_rates, simulate_completion
//
// What it models
// --------------
// A fabric is a vector of directed link capacities in Gb/s (1 Gb/s = 1e9 bit/s),
// indexed by a dense link id. A flow is a path (the ordered list of link ids it
// crosses), a size in bytes, an optional rate cap in Gb/s (a NIC limit, or the
// rate a congestion-control model allows) and a start time in seconds. Rates
// are max-min fair with per-flow caps: no flow can get more without taking
// from a flow that has no more than it (Bertsekas & Gallager, "Data Networks",
// 6.5.2). This is the same fluid model SimGrid's CM02 network model solves with
// zero latency and no bandwidth factors; network/simgrid_check.h runs SimGrid
// on the same input and the test requires agreement within 1%.
//
// Algorithm (solve of one set of concurrent flows): progressive filling in
// its bottleneck form. Every link keeps its remaining capacity and the number
// of still-unfrozen flows crossing it; its fair share is remaining / count. An
// indexed binary min-heap over links holds the fair shares, and the finite
// caps of unfrozen flows are kept sorted. Repeatedly take the smaller of the
// least fair share and the least cap: a cap freezes that one flow at its cap;
// a link freezes every unfrozen flow crossing it at its fair share (that link
// is their bottleneck). Freezing a flow at rate r subtracts r from each link on
// its path and decrements its counter; those links' heap keys are updated. A
// share never decreases while filling (r is the global minimum), so the heap
// keys only move down the heap. Each flow is frozen once and each (flow, link)
// pair is touched a constant number of times.
//
// Structure exploited (FlowSolver):
//  * Components. Flows that share no link, directly or through other flows,
//    do not interact. A union-find over link ids splits the flows into
//    connected components (independent rails/planes, DP groups on disjoint
//    switches, ...) which are solved separately.
//  * Memoisation. Each component is rewritten in a canonical form: its links
//    renumbered 0.. in order of first appearance along its flows (flows in
//    input order), followed by their capacities, the flows' relabelled paths
//    and caps (and, for completion times, bytes and start times relative to the
//    component's first start). The canonical form is hashed and compared
//    exactly; a repeated form (the same ring step again, the same DP group on
//    another rail) is answered from the cache and mapped back to real ids.
//    Two components that are equal up to a link relabelling that preserves
//    first-appearance order hit the same entry; arbitrary isomorphisms are
//    not searched for.
//
// Completion times (simulate_completion): event-driven fluid simulation per
// component. Events are flow starts and flow completions (completions within
// a relative 1e-9 of each other are one event). At an event only the flows
// that can change rate are re-solved, on the capacity the others leave:
//  * reach: active flows connected, through shared links and other such
//    flows, to the links of the flows that just started or finished;
//  * level: when flows of rate >= r finish and none starts, every flow with
//    a rate below r keeps it (progressive filling freezes flows in increasing
//    order of rate and no link on a flow's path saturates below that flow's
//    rate, so the events below r are unchanged) and does not carry the change
//    further. Only flows at >= r (less 1e-9 relative) are re-solved. In a
//    ring step the fastest flows finish first, so most completions re-solve
//    nothing. A start can lower any rate: it re-solves its whole reach.
// Progress is accounted lazily (bytes left are settled only when a flow's
// rate changes), so an event costs the size of what it re-solves.
//
// Complexity (F flows, P mean path length, L links, F*P = total path entries):
//   component split + canonical form:   O(L + F*P)            per call
//   one progressive filling:            O(F*P log L + F log F) (the F log F
//                                        term only for flows with finite caps)
//   memoised component:                 O(F*P) to hash, compare and map back
//   simulate_completion:                O(sum over events of the re-solved
//                                        part's F*P log L); at most 2F events
//                                        per component; a ring step of 12,288
//                                        flows re-solves once per component.
// No step costs O(flows x links).
//
// Conventions: a link repeated in one path is counted once per occurrence (the
// flow uses that link's capacity twice). A flow with an empty path and no cap
// has an unbounded rate (bottleneck kUnlimited) and completes at its start. A
// flow whose rate is 0 (a zero-capacity link, a zero cap) never completes:
// its completion time is +infinity. A flow of 0 bytes completes at its start.
//
// Thread-safety: a FlowSolver holds its cache and scratch space and is not
// thread-safe; use one per thread. FlowSet is a plain value. The free
// functions solve_rates / simulate_completion use a fresh solver per call and
// may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace megascale::network {

// Dense directed link id: an index into the capacity vector.
using LinkId = std::int32_t;

// No per-flow rate cap.
inline constexpr double kNoRateCap = std::numeric_limits<double>::infinity();

// bottleneck_link values that are not links.
inline constexpr LinkId kLimitedByRateCap = -1;  // the flow runs at its own cap
inline constexpr LinkId kUnlimited = -2;         // no link and no cap, or never ran

// A set of flows in compressed form (one allocation for all paths), so that
// hundreds of thousands of flows cost a few vectors, not one per flow.
class FlowSet {
 public:
  // Appends a flow and returns its index. REQUIRES: bytes >= 0 and finite,
  // rate_cap_gbps >= 0 (kNoRateCap for none), start_s finite; link ids are
  // checked against the capacities when solved (throws std::invalid_argument
  // there).
  std::size_t add(std::span<const LinkId> path, double bytes, double rate_cap_gbps = kNoRateCap,
                  double start_s = 0.0);
  std::size_t add(std::initializer_list<LinkId> path, double bytes, double rate_cap_gbps = kNoRateCap,
                  double start_s = 0.0) {
    return add(std::span<const LinkId>(path.begin(), path.size()), bytes, rate_cap_gbps, start_s);
  }

  void reserve(std::size_t flows, std::size_t path_entries);
  void clear();

  std::size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  std::size_t path_entries() const { return links_.size(); }

  std::span<const LinkId> path(std::size_t flow) const {
    return {links_.data() + offset_[flow], offset_[flow + 1] - offset_[flow]};
  }
  double bytes(std::size_t flow) const { return bytes_[flow]; }
  double rate_cap_gbps(std::size_t flow) const { return cap_gbps_[flow]; }
  double start_s(std::size_t flow) const { return start_s_[flow]; }

 private:
  std::vector<std::size_t> offset_{0};  // (flows + 1): path of f is links_[offset_[f], offset_[f+1])
  std::vector<LinkId> links_;           // (path entries)
  std::vector<double> bytes_;           // (flows)
  std::vector<double> cap_gbps_;        // (flows)
  std::vector<double> start_s_;         // (flows)
};

// What one call did (for tests, benchmarks and "why is this slow").
struct SolveStats {
  std::size_t components = 0;         // independent groups of flows (shared links);
                                      // flows with an empty path are answered
                                      // directly and not counted
  std::size_t components_solved = 0;  // solved by progressive filling / simulation
  std::size_t cache_hits = 0;         // answered from the memo
  std::size_t events = 0;             // simulate_completion: rate recomputations
};

// Max-min fair rates of a set of concurrent flows (start times and bytes are
// ignored).
struct RateSolution {
  std::vector<double> rate_gbps;         // (flows); +inf only for kUnlimited flows
  std::vector<LinkId> bottleneck_link;   // (flows): the saturated link that fixed
                                         // the rate, or kLimitedByRateCap / kUnlimited
  std::vector<double> link_load_gbps;    // (links): sum of the rates crossing it
  std::vector<double> link_utilisation;  // (links): load / capacity (0 if capacity 0)
  SolveStats stats;
};

// Completion times of flows that start at their start_s, with rates
// recomputed whenever a flow starts or finishes.
struct CompletionResult {
  std::vector<double> completion_s;     // (flows): absolute time of the last byte; +inf if never
  std::vector<LinkId> bottleneck_link;  // (flows): the limit (link, or kLimitedByRateCap)
                                        // in force while the flow moved the most bytes
                                        // between two of its rate changes
  std::vector<double> link_bytes;       // (links): bytes carried
  std::vector<double> link_mean_utilisation;  // (links): link_bytes*8 / (capacity *
                                              // (makespan_s - first_start_s))
  std::vector<double> link_peak_utilisation;  // (links): max over time of load / capacity
  double first_start_s = 0.0;  // earliest start (0 if no flows)
  double makespan_s = 0.0;     // latest finite completion time (first_start_s if none)
  SolveStats stats;
};

struct FlowSolverOptions {
  bool split_components = true;          // solve connected components separately
  bool memoise = true;                   // cache canonical components
  std::size_t max_cache_entries = 4096;  // the cache is emptied when it would exceed this
  double event_rel_tol = 1e-9;           // completions this close (relative) are one event
};

class FlowSolver {
 public:
  explicit FlowSolver(FlowSolverOptions options = {});
  ~FlowSolver();
  FlowSolver(const FlowSolver&) = delete;
  FlowSolver& operator=(const FlowSolver&) = delete;
  FlowSolver(FlowSolver&&) noexcept;
  FlowSolver& operator=(FlowSolver&&) noexcept;

  // Max-min fair rates with per-flow caps. REQUIRES: capacities finite and >= 0,
  // every link id in [0, capacity_gbps.size()); throws std::invalid_argument
  // naming the offending flow or link otherwise.
  RateSolution solve_rates(std::span<const double> capacity_gbps, const FlowSet& flows);

  // Event-driven completion times. Same REQUIRES as solve_rates.
  CompletionResult simulate_completion(std::span<const double> capacity_gbps, const FlowSet& flows);

  void clear_cache();
  std::size_t cache_entries() const;
  const FlowSolverOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One-shot forms (a fresh FlowSolver: components are split and identical
// components within this one call are solved once).
RateSolution solve_rates(std::span<const double> capacity_gbps, const FlowSet& flows);
CompletionResult simulate_completion(std::span<const double> capacity_gbps, const FlowSet& flows);

}  // namespace megascale::network
