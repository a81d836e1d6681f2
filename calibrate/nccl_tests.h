// calibrate/nccl_tests.h: reader for users' existing NVIDIA nccl-tests output
// (`megascale calibrate import`): the text that all_reduce_perf, all_gather_perf,
// reduce_scatter_perf, sendrecv_perf, alltoall_perf, broadcast_perf and
// reduce_perf print, exactly as printed (or pasted into an issue).
//
// Sources (NVIDIA/nccl-tests): src/util.cu writeResultHeader /
// writeBenchmarkLineBody / getFloatStr (the table layout and number formats:
// time "%7.2f" falling back to "%7.1f", "%7.0f", "%7.1e" when too wide; algbw and
// busbw "%6.2f" likewise; "#wrong" "%6g" or "N/A"), src/<op>.cu <Op>GetBw (the
// bus-bandwidth factors) and doc/PERFORMANCE.md (their derivation).
//
// Formats accepted, all found in public logs:
//  - the current table: `size count type redop root time algbw busbw #wrong
//    time algbw busbw #wrong`, with "cputime" instead of "time", optional
//    per-iteration columns (i_min ...) and a trailing timestamp;
//  - the older tables without `root`, and with an `error` column (5e-07, N/A)
//    instead of `#wrong`; broadcast's `root` without `redop`; the 2017 layout
//    `bytes N type op time algbw busbw res` (time in ms; the unit is read from
//    the "(us)"/"(ms)" line or, when absent, from algbw = bytes / time);
//  - comment '#' characters eaten by markdown, mpirun "[1,0]<stdout>:" tags
//    (also inside rows: --tag-output tags each chunk a rank writes, and
//    nccl-tests writes a row in three chunks), srun "0: " line prefixes,
//    markdown "> " quotes, NCCL INFO / ssh / shell noise between lines;
//  - several runs in one text (parse_nccl_tests_runs), split at "# nccl-tests
//    version", "# Collective test starting:" or "# nThread" lines.
//
// Which collective: the text first ("# Collective test starting: X_perf", an
// echoed command line naming X_perf), then `op_hint` (the caller's --op; an
// explicit hint contradicting the text is an error), then the source file name
// (all_gather_perf_h100.txt), and last the columns (root >= 0: broadcast or
// reduce; count * type size * ranks == size: reduce_scatter, or all_gather /
// alltoall which cannot be told apart; count * type size == size: all_reduce or
// sendrecv told apart by busbw / algbw when ranks > 2). Undecidable: error.
//
// How many ranks: the "#  Rank  N Group G Pid P on HOST device D [bus] NAME"
// lines (one per rank, printed by rank 0 for all ranks); without them, from
// busbw / algbw (2(n-1)/n or (n-1)/n); for ops whose factor is 1, from the
// "nThread T nGpus G" header (a single process assumed), else 0 (unknown).
//
// Consistency check (errors, not warnings): every printed row must satisfy
// algbw = size / time and busbw = factor(op, ranks) x algbw within 2% plus the
// rounding of the printed digits (half a unit in the last place of each number:
// 0.00 / 0.01 GB/s rows of tiny messages carry no information and always pass,
// rows >= ~1 GB/s are checked to ~2.5%). all_gather / reduce_scatter output of
// nccl-tests before mid-2020 (issue NVIDIA/nccl-tests#45) folded (n-1)/n into
// algbw and printed busbw = algbw; both conventions are accepted.
//
// Units: bytes, time_us (microseconds), *_gbs (GB/s = 1e9 B/s, nccl-tests').
//
// defines: ImportError, NcclTestsPoint, NcclTestsRun, canonical_nccl_op,
//          gpu_model, nccl_busbw_factor, parse_nccl_tests,
//          parse_nccl_tests_runs, read_nccl_tests_file
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace megascale::calibrate {

// Every import error: the message is "FILE:LINE: reason" (LINE counts from 1).
class ImportError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One printed row (one message size).
struct NcclTestsPoint {
  int64_t bytes = 0;            // "size" (B): nccl-tests' S, the full buffer (all_gather: the output)
  int64_t count = 0;            // "count" (elements)
  std::string dtype;            // "type": float, half, bfloat16, double, int8, ...
  std::string redop;            // "redop": sum, none, ...; "" when the column is absent
  int root = -1;                // "root"; -1 when absent or printed -1
  double time_us = 0;           // out-of-place time
  double algbw_gbs = 0;         // out-of-place algorithm bandwidth, as printed
  double busbw_gbs = 0;         // out-of-place bus bandwidth, as printed
  double inplace_time_us = 0;   // in-place columns; 0 when not printed
  double inplace_algbw_gbs = 0;
  double inplace_busbw_gbs = 0;
  bool has_inplace = false;
  int64_t wrong = -1;           // out-of-place "#wrong"; -1 when "N/A" or an old float "error"
  int line = 0;                 // line in the source text
};

// One nccl-tests invocation.
struct NcclTestsRun {
  std::string source;           // file name (or what the caller passed)
  std::string op;               // all_reduce, all_gather, reduce_scatter, sendrecv, alltoall, broadcast, reduce
  std::string op_from;          // "text", "hint", "file name" or "columns"
  int ranks = 0;                // communicator size; 0 if unknown (only for factor-1 ops)
  std::string ranks_from;       // "rank lines", "busbw/algbw", "header" or "unknown"
  int nodes = 0;                // distinct host names in the Rank lines, 0 if unknown
  std::string device;           // GPU name from the Rank lines ("" if absent; " + "-joined if mixed)
  std::string nccl_tests_version;  // "# nccl-tests version X" if printed
  double avg_busbw_gbs = 0;     // "# Avg bus bandwidth" if printed, else 0
  int first_line = 0;           // first line of this run in the source
  std::vector<NcclTestsPoint> points;  // in printed order
};

// nccl-tests times each size twice, out of place and then in place: the same
// collective on the same bytes (only the buffers alias), so the two agree:
// out of place / in place is 0.75-1.43 at every printed size of the 14 files
// in tests/calibrate/fixtures/nccl-tests/ (278 sizes) but one, 5.04 (the DGX
// H100 sample's 32 B: 68.1 us out of place, 13.5 us in place, 13.0-14.9 us
// around it). Where the out-of-place time is more than this many times the
// in-place one, the out-of-place run was disturbed (a host or fabric hiccup
// only ever adds time; an average of 20 iterations at 13 us rises to 68 us
// with one 1 ms stall), and the in-place time is the one compared (calibrate
// net-check, which marks every such size in its report) and fitted (calibrate
// import, the protocol fit).
constexpr double kDisturbedRatio = 2.0;

// Whether `p`'s out-of-place time is more than kDisturbedRatio x its in-place
// time (false when no in-place time was printed).
bool out_of_place_disturbed(const NcclTestsPoint& p);

// The time a size is compared and fitted at: the out-of-place time, or the
// in-place time where the out-of-place one was disturbed.
double undisturbed_time_us(const NcclTestsPoint& p);

// "all_reduce_perf", "allreduce", "AllReduce", "all_reduce_perf_mpi" -> "all_reduce";
// "" for anything else.
std::string canonical_nccl_op(std::string_view name);

// The GPU model a Rank line's device or a profile's name names ("NVIDIA H100
// 80GB HBM3", "H100-SXM5-80GB" -> "H100"; also A100, H200, B200, V100, L40),
// or "" when it names none (a CPU profile, an unnamed device): measurements of
// one model compared with or added to another's profile are refused.
std::string gpu_model(const std::string& name);

// nccl-tests' busbw / algbw (src/<op>.cu, doc/PERFORMANCE.md): all_reduce
// 2(n-1)/n; all_gather, reduce_scatter, alltoall (n-1)/n; sendrecv, broadcast,
// reduce 1. Throws std::invalid_argument for an unknown op or ranks < 1.
double nccl_busbw_factor(const std::string& op, int ranks);

// Exactly one run; throws ImportError "FILE:LINE: reason" on anything it cannot
// read (including a text holding several runs: use parse_nccl_tests_runs).
NcclTestsRun parse_nccl_tests(std::string_view text, const std::string& source,
                              std::string op_hint = "");

// Every run in the text, in order (at least one).
std::vector<NcclTestsRun> parse_nccl_tests_runs(std::string_view text, const std::string& source,
                                                std::string op_hint = "");

// Reads `path` (source = path) and parses exactly one run.
NcclTestsRun read_nccl_tests_file(const std::string& path, std::string op_hint = "");

}  // namespace megascale::calibrate
