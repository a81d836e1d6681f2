// calibrate/protocol_fit.h: NCCL protocol latency / bandwidth curves fitted to a
// measured nccl-tests curve (calibrate/nccl_tests.h), and the time model built
// on them.
//
// Model. NCCL's tuner (src/graph/tuning.cc, ncclTopoGetAlgoTime) predicts, per
// algorithm and protocol, time = latency + bytes / (1000 * bw) and runs the
// fastest. A measured t(S) is therefore roughly a few straight lines, one per
// protocol: LL (lowest latency, lowest bandwidth), LL128, Simple (highest of
// both). Here a line is written in bus-bandwidth terms,
//     t_p(S) = latency_p + S * f(op, n) / busbw_p      (S bytes, t us, busbw GB/s)
// with f the nccl-tests busbw factor (nccl_busbw_factor), so busbw_p does not
// depend on the rank count and a curve fitted on n ranks can be evaluated at m.
//
// Fit (fit_protocol_model). Out-of-place points with size > 0 (duplicate sizes
// averaged; more than FitOptions::max_points are merged into quarter-octave
// bins), sorted by size, are split into up to three contiguous segments; each
// segment gets a line by weighted least squares on relative error (weights
// 1/t^2, latency >= 0, 1/bandwidth >= 0); the split points minimise the largest
// error normalised by its tolerance (5% at S >= 64 MiB, 20% below; ties: the
// sum of squares), subject to the protocol order (latency and busbw both
// non-decreasing from one segment to the next). The fewest segments that meet
// the tolerance win. Names are positional (NCCL's protocols in message-size
// order): 1 segment "Simple"; 2 "LL" (if it starts below 1 MiB, else "LL128")
// and "Simple"; 3 "LL", "LL128", "Simple". The fit does not know which protocol
// NCCL really ran (NCCL_PROTO is not in the output).
//
// Why a fourth segment (ProtocolFit::segments). On real curves the three ordered
// lines do not always meet 5% / 20%: the bandwidth of one protocol keeps rising
// over decades of sizes (channels and pipelining filling up, NVLS on H100),
// NCCL switches algorithm (Tree -> Ring, NVLS) inside the Simple range, P2P
// chunking makes sendrecv flat from 64 to 256 MiB, and small multi-node sizes
// are noisy. None of that is a protocol, and a measured curve is NCCL's pick
// per size, not the lower envelope of straight lines (the tuner's model can be
// wrong), so it can be non-concave. Where a protocol line misses the tolerance
// inside its own range, that range is split into up to max_parts_per_protocol
// sub-segments (unordered lines, >= 2 points each, same protocol name).
//
// Which is used for what:
//  - protocols (fit_protocol_curves): the NCCL cost-model parameters a hardware
//    profile stores (latency, busbw per protocol); extrapolation beyond the
//    measured sizes; other rank counts (busbw is rank-normalised; latency is
//    taken as measured, which underestimates ring latency growth with ranks).
//  - segments: prediction at the measured rank count inside the measured size
//    range; equal to protocols when those already meet the tolerance. This is
//    what reproduces every fixture within 5% / 20% (tests/calibrate).
//  - interpolate_time_us: log-log interpolation of the measured points, for
//    curves so noisy that even the segments miss the tolerance
//    (segment_errors.within_tolerance == false), and as a reference.
//
// Evaluation (envelope_time_us): each curve owns the size range it was fitted
// on ([min_bytes, max_bytes], "where it wins on the data"); between two ranges
// the time is interpolated log-log from one curve's end to the next one's
// start; below the first range the first curve, above the last the last. The
// curves are not minimised across ranges (see above: real curves are not
// always a lower envelope).
//
// Errors: rel_error = model busbw / measured busbw - 1 = measured time / model
// time - 1, with the measured busbw computed from the printed time (the printed
// busbw column is rounded to 0.01 GB/s, i.e. 0.00 for tiny messages).
//
// defines: kLargeMessageBytes, ProtocolCurve, FitPointError, FitErrors,
//          FitOptions, ProtocolFit, fit_protocol_model, fit_protocol_curves,
//          envelope_time_us, curve_errors, interpolate_time_us
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calibrate/nccl_tests.h"

namespace megascale::calibrate {

// "64 MB" of the accuracy bounds: nccl-tests' 64M, 64 MiB.
inline constexpr double kLargeMessageBytes = 64.0 * 1024 * 1024;

struct ProtocolCurve {
  std::string protocol;     // "LL", "LL128", "Simple" (positional, see above)
  double latency_us = 0;    // t at 0 bytes
  double busbw_gbs = 0;     // bus bandwidth, GB/s = 1e9 B/s (infinite for a flat segment)
  double min_bytes = 0;     // smallest measured size fitted by this curve
  double max_bytes = 0;     // largest
};

struct FitPointError {
  int64_t bytes = 0;
  double measured_time_us = 0;
  double model_time_us = 0;
  double measured_busbw_gbs = 0;  // from the measured time
  double model_busbw_gbs = 0;
  double rel_error = 0;           // model busbw / measured busbw - 1
  double tolerance = 0;           // 0.05 or 0.20 (FitOptions)
};

struct FitErrors {
  double max_rel_error_large = 0;  // max |rel_error| at sizes >= large_bytes (0 if none)
  double max_rel_error_small = 0;  // max |rel_error| below
  double median_rel_error = 0;     // median |rel_error| over all points
  int large_points = 0;
  int small_points = 0;
  bool within_tolerance = true;
  std::vector<FitPointError> points;
};

struct FitOptions {
  double tolerance_large = 0.05;          // at sizes >= large_bytes
  double tolerance_small = 0.20;          // below
  double large_bytes = kLargeMessageBytes;
  int min_points_per_curve = 2;
  int max_parts_per_protocol = 6;         // sub-segments a protocol range may be split into
  int max_points = 96;                    // more are merged into quarter-octave bins
};

struct ProtocolFit {
  std::string op;
  int ranks = 0;
  std::vector<ProtocolCurve> protocols;   // <= 3, ordered (see the header)
  FitErrors protocol_errors;
  std::vector<ProtocolCurve> segments;    // protocols, refined where they miss the tolerance
  FitErrors segment_errors;
  bool refined = false;                   // segments != protocols
};

// Throws ImportError ("SOURCE:LINE: ...") when the run has no point with
// size > 0 and time > 0.
ProtocolFit fit_protocol_model(const NcclTestsRun& run, const FitOptions& options = {});

// The (<= 3, ordered) protocol curves of fit_protocol_model.
std::vector<ProtocolCurve> fit_protocol_curves(const NcclTestsRun& run);

// Time of `op` on `ranks` ranks for a `bytes` message (nccl-tests' size S) from
// fitted curves (see the header). Throws std::invalid_argument for no curves,
// an unknown op or ranks < 1.
double envelope_time_us(const std::vector<ProtocolCurve>& curves, const std::string& op, int ranks,
                        double bytes);

// Errors of `curves` on the run's out-of-place points (duplicates averaged).
FitErrors curve_errors(const std::vector<ProtocolCurve>& curves, const NcclTestsRun& run,
                       const FitOptions& options = {});

// Log-log interpolation of the measured out-of-place times (duplicates
// averaged); below the smallest size its time, above the largest the last
// point's bandwidth. Throws std::invalid_argument when no point has size > 0.
double interpolate_time_us(const std::vector<NcclTestsPoint>& points, double bytes);

}  // namespace megascale::calibrate
