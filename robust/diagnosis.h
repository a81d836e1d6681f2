// robust/diagnosis.h: naming the faulty rank once a detector fired.
//
// defines: WaitEdge, HangDiagnosis, diagnose_hang, LogFinding, scan_log_line
//
// Hangs (MegaScale NSDI'24 section 4: the wait-for relations of collective and
// point-to-point progress localise the rank that holds everyone up): from each
// rank's reported current operation (robust/monitored_comm.h),
//   - a rank that posted collective s of group G waits for every member of G
//     that entered fewer than s collectives of G, or entered s and never
//     posted it;
//   - a rank in a point-to-point wait waits for its peer.
// Following the edges from every waiting rank, the chains end at ranks that
// wait for nobody: the culprits. The report lists every rank and where the
// chains end, in the form `megascale simulate --fail-gpu` prints.
//
// Logs: error keywords in mpirun's output and in the ranks' logs (MegaScale
// scans logs for error keywords, section 4.1): a rank that died on a signal
// (mpirun's report names it), a refused checkpoint (checksum mismatch: which
// rank's shard of which step), an engine error, a crash.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "robust/detector.h"

namespace megascale::robust {

struct WaitEdge {
  int from = -1, to = -1;
  std::string why;  // "all_reduce #57 on c1[0,1]: rank 1 is at #56"
};

struct HangDiagnosis {
  std::vector<WaitEdge> edges;
  std::vector<int> culprits;          // where the wait chains end (sorted)
  std::vector<std::string> lines;     // the report, one line per rank then the chain ends
};

HangDiagnosis diagnose_hang(const std::vector<RankStatus>& ranks);

struct LogFinding {
  // diverged: the engine's TrainingDiverged line (engine/trainer.h: every
  // rank stops at the same step, rank 0 prints "megascale train: step N: ...
  // the training diverged ..."), which names no rank.
  std::string kind;   // signal | checksum_mismatch | checkpoint_error | engine_error | diverged | crash | mpi_error
  int rank = -1;      // the rank the line names (-1: none)
  long long step = -1;  // checksum_mismatch: the checkpoint's step; diverged: the step that diverged
  std::string line;
};

// `rank_of_file`: the rank whose log this is, -1 for mpirun's own output.
std::optional<LogFinding> scan_log_line(const std::string& line, int rank_of_file);

// An engine's own error, as the driver compares it across attempts: the kind
// and the text after "megascale train: rank R: " of an engine_error or
// checkpoint_error line ("engine_error|/data/x.msds: cannot open: ..."), or
// after "megascale train: " of a diverged line ("diverged|step 2: the loss is
// NaN ..."), or nullopt for any other line (a signal, a crash, an MPI error). The same text
// in two attempts, after the node that reported it was evicted or returned
// repaired, is the job's error (its input, configuration or code), not a
// node's: the driver stops instead of evicting node after node.
std::optional<std::string> engine_error_text(const std::string& line);

// A fault a rank (or the driver) reported firing (keys.h "fired").
struct FiredFault {
  std::string fault;
  int rank = -1;
  int step = -1;
  double at_s = 0;
  bool matched = false;  // already given to a detection
};

// The fault detection `d` belongs to: among the unmatched faults fired before
// it (0.5 s of clock slack), a slow fault for a slow detection and any other
// fault for the rest (a slow rank neither stalls nor dies), then one of the
// rank the detection names, then the earliest. Returns its index, or -1 (a
// false positive).
int match_detection(const std::vector<FiredFault>& fired, const Detection& d);

}  // namespace megascale::robust
