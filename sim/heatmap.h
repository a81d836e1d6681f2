// sim/heatmap.h: per-rank x step heat-map of forward and backward time, as a
// hand-written SVG a person can read (stragglers stand out in red).
//
// defines: HeatmapInput, heatmap_input, heatmap_svg, write_heatmap_svg
//
// Layout: two panels side by side, forward time and backward time; one row per
// (replica, pipeline rank) TP group - labelled with the global GPU rank of its
// TP rank 0, ordered by that rank - and one column per step; under them the
// step-time series as bars. A cell's colour is its time relative to the
// median of its pipeline rank (over replicas and steps), so the heavier head
// stages do not drown the stragglers: white at the median, shading to dark
// red at the largest ratio of the panel (at least +5%), to blue below. With
// more than kMaxHeatmapRows groups, consecutive rows are merged and a merged
// row shows its slowest member relative to its stage (a straggler is never
// averaged away); with more than kMaxHeatmapColumns steps, consecutive steps
// are merged the same way.
//
// Thread-safety: pure functions; write_heatmap_svg throws std::runtime_error
// naming the file when it cannot be written.
#pragma once

#include <string>
#include <vector>

#include "sim/job_sim.h"

namespace megascale::sim {

inline constexpr int kMaxHeatmapRows = 256;
inline constexpr int kMaxHeatmapColumns = 400;

struct HeatmapCell {
  double seconds = 0;  // forward (or backward) busy time of the step
  double ratio = 1;    // seconds / median of its pipeline rank
};

struct HeatmapInput {
  std::string title;
  std::vector<std::string> rows;                   // labels
  std::vector<std::vector<HeatmapCell>> forward;   // [column][row]
  std::vector<std::vector<HeatmapCell>> backward;
  std::vector<double> step_time_s;                 // [column]
};

// From a job's per-step, per-group busy times (merging rows/steps as above).
HeatmapInput heatmap_input(const JobResult& r);

std::string heatmap_svg(const HeatmapInput& in);
void write_heatmap_svg(const std::string& path, const JobResult& r);

}  // namespace megascale::sim
