// calibrate/import.h: `megascale calibrate import`: a hardware profile from
// measurements users already have (nccl-tests output, GEMM sweep CSVs) on top
// of a base profile (a shipped one or a file).
//
// defines: ImportOptions, ImportedRun, ImportReport, import_measurements
//
// What each input becomes (model/profile_tables.h):
//   nccl-tests output (calibrate/nccl_tests.h): every out-of-place row a
//     measured collective point (op, scope, ranks, bytes = nccl-tests' size,
//     seconds), so the profile reproduces the curve at the measured rank
//     count; and NCCL protocol curves (calibrate/protocol_fit.h: latency and
//     bus bandwidth per protocol, refined into size ranges where three lines
//     miss 5% / 20%), which carry the curve to other rank counts. Scope:
//     "inter" when the Rank lines name more than one host, "intra" for one,
//     else --scope.
//   GEMM sweep CSVs (calibrate/gemm_sweep.h): GEMM points (layout from the
//     file or "any"); the profile then times GEMMs from them instead of its
//     roofline.
// Provenance: the points are `measured` (ref: the files, host: the device and
// hosts the output names, date: the import date, since nccl-tests prints
// none); the protocol curves are `fitted` on those files, with the
// leave-one-point-out error of the curve fit. The base profile's other values
// keep their own provenance. Tables the base already has are kept; imported
// points are added to them.
//
// Thread-safety: reads files; pure otherwise.
#pragma once

#include <string>
#include <vector>

#include "model/hardware.h"

namespace megascale::calibrate {

struct ImportOptions {
  std::string base = "A100-SXM4-80GB";  // a shipped profile's name or a profile file
  std::string name;                     // the new profile's name ("" = the base's + "-imported")
  std::string scope;                    // "intra" | "inter" | "" (from the Rank lines)
  std::string date;                     // the import date (YYYY-MM-DD; "" = today, UTC)
  std::vector<std::string> nccl_tests;  // FILE or FILE:op
  std::vector<std::string> gemm_csv;
};

struct ImportedRun {
  std::string file, op, scope, device;
  int ranks = 0, nodes = 0, points = 0;
  int disturbed = 0;  // sizes taken at their in-place time (calibrate/nccl_tests.h kDisturbedRatio)
  double curve_max_error_large = 0, curve_max_error_small = 0;  // of the stored curves on the file's points
  double loo_error = 0;                                          // leave-one-point-out, mean |error|
};

struct ImportReport {
  model::GpuProfile profile;
  std::vector<ImportedRun> runs;
  int gemm_points = 0;
};

// Throws ImportError (FILE:LINE: reason) for a malformed input, model::ScenarioError
// for a bad base profile, std::invalid_argument for bad options.
ImportReport import_measurements(const ImportOptions& o);

}  // namespace megascale::calibrate
