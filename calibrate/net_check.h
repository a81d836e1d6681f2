// calibrate/net_check.h: the fabric model and NCCL tuner (`megascale net
// collective`, network/collective_tuner.h) against nccl-tests output measured
// on real machines (`megascale calibrate net-check`; its report is
// report/net_check_report.h).
//
// Input: a manifest (TOML) naming each nccl-tests file and the machine it ran on,
// as its source states it:
//
//   [[run]]
//   file = "all_reduce_perf_a100_16gpu_2node_oke.txt"   # relative to the manifest
//   gpu = "A100-SXM4-40GB"                               # a profile name or file
//   nics_per_node = 8
//   nic_gbps = 200
//   transport = "RoCE, 16 x 100G per node"               # for the report
//   unscored = "why"                                     # optional: predicted, listed, not in the bounds
//   exclude = "why"                                      # optional: listed only
//   nccl_version = "2.19.3"                              # optional: as the source states it
//   nccl_algo = "ring"                                   # optional: NCCL_ALGO the source forced
//   nccl_proto = "Simple"                                # optional: NCCL_PROTO the source forced
//
// nccl_algo / nccl_proto restrict the tuner as the environment variables
// restrict NCCL (one name each: ring, tree, nvls, nvls-tree; LL, LL128,
// Simple; case-insensitive); a --algo / --proto given to net-check replaces
// them (a what-if). nccl_version is reported beside the run; the tuner's
// constants are NCCL 2.30.7's whatever it says (network/nccl_tuner.h: no other
// version's tables are known to the code), so a different version is a stated
// limit of the comparison, not a switch.
//
// or files with one machine (profile_machine). Every printed size is predicted
// by the tuner on a MegaScale fabric of that many nodes with those NICs
// (nccl-tests' ranks and nodes from the file) and compared with nccl-tests'
// out-of-place time (the in-place time where the out-of-place one was
// disturbed: calibrate/nccl_tests.h kDisturbedRatio). Scored classes: large
// (>= 256 MiB) and small (<= 1 MiB) messages, in one node and across nodes: median and max |error| against issue
// 12's bounds (large: median 5%, max 10%; small: median 20%, max 50%). The
// command exits 1 when a scored class with points misses its bound.
//
// Thread-safety: pure functions (they read files).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "calibrate/statistics.h"

namespace megascale::calibrate {

// The scored message sizes (issue 12: ">= 256 MB" large, "<= 1 MB" small).
constexpr double kLargeBytes = 256.0 * (1 << 20);
constexpr double kSmallBytes = 1.0 * (1 << 20);

struct NetMachine {
  std::string file;       // path of the nccl-tests output
  std::string gpu;        // profile name or file
  int nics_per_node = 0;
  double nic_gbps = 0;
  std::string transport;
  std::string exclude;    // non-empty: listed, not predicted
  std::string unscored;   // non-empty: predicted and listed, left out of the bounds
  // NCCL settings the source states for the run (nullopt / empty: not stated).
  std::optional<network::CollectiveAlgorithm> nccl_algo;  // NCCL_ALGO forced
  std::optional<network::NcclProtocol> nccl_proto;        // NCCL_PROTO forced
  std::string nccl_version;                               // "2.19.3"
  // "NCCL 2.19.3, NCCL_ALGO=ring" (empty when none is stated).
  std::string nccl_settings() const;
};

struct NetPoint {
  double bytes = 0;
  double measured_us = 0;       // the time compared: out of place, or in place when disturbed
  double predicted_us = 0;
  std::string choice;  // "ring/LL"
  int channels = 0;    // NCCL channels the chosen pair runs on at this size (network/nccl_tuner.h)
  double out_of_place_us = 0;   // nccl-tests' out-of-place time, as printed
  bool disturbed = false;       // out_of_place_disturbed (calibrate/nccl_tests.h): in place compared
  double error() const { return (predicted_us - measured_us) / measured_us; }
};

struct NetRun {
  NetMachine machine;
  std::string op;
  int ranks = 0;
  int nodes = 0;
  std::string skipped;  // why it was not predicted (exclusion, unsupported op)
  std::vector<NetPoint> points;
};

struct NetRestriction {
  std::optional<network::CollectiveAlgorithm> algorithm;
  std::optional<network::NcclProtocol> protocol;
};

struct NetClassStats {
  std::string name;
  double median_bound = 0, max_bound = 0;
  std::vector<double> errors;  // |relative error|
  double median() const { return calibrate::median(errors); }
  double max() const { return errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end()); }
  bool pass() const { return errors.empty() || (median() <= median_bound && max() <= max_bound); }
};

// The manifest's runs; relative file paths resolve against the manifest.
// Throws std::invalid_argument naming the file, line and key.
std::vector<NetMachine> read_net_manifest(const std::string& path);

// One run predicted point by point (skipped, with the reason, when excluded or
// not modellable). `only`: NCCL_ALGO / NCCL_PROTO as a restriction; where it
// leaves a key unset, the manifest's nccl_algo / nccl_proto for the run apply. Throws
// ImportError for an unreadable nccl-tests file, std::invalid_argument for a
// restriction no NCCL pair meets on that machine.
NetRun predict_net_run(const NetMachine& m, const NetRestriction& only);
// Every machine's run; the std::invalid_argument of a restriction no NCCL pair
// meets names the machine's file.
std::vector<NetRun> predict_net_runs(const std::vector<NetMachine>& machines, const NetRestriction& only);

// A machine of the GPU profile `gpu` (a name or a file) with the profile's
// default NICs per node and NIC speed. Throws model::ScenarioError for an
// unknown profile.
NetMachine profile_machine(const std::string& gpu);

// One run's |errors|: every point, the large and the small ones (no bounds).
struct NetRunErrors {
  NetClassStats all, large, small;
};
NetRunErrors net_run_errors(const NetRun& r);

// Whether every class meets its bounds.
bool all_pass(const std::vector<NetClassStats>& classes);

// The four scored classes (one node / across nodes x large / small) over the
// scored runs, with issue 12's bounds.
std::vector<NetClassStats> score_net_runs(const std::vector<NetRun>& runs);

}  // namespace megascale::calibrate
