// sim/heatmap.h: per-rank x step heat-map of forward and backward time, as an
// SVG a person can read (stragglers stand out in red), drawn through base/svg.h.
//
// defines: HeatmapInput, heatmap_input, heatmap_svg, write_heatmap_svg
//
// Layout: two panels side by side, forward time and backward time; one row per
// TP group, i.e. one pipeline stage of one DP replica, labelled by what it is
// ("stage 3, DP replica 0 (GPUs 24-31)"), stages in order and the replicas
// within each; one column per step; under them the step time of every step as
// bars on an axis from zero seconds. A cell's colour is its time relative to
// the median of its stage (over replicas and steps), so the heavier head
// stages do not drown the stragglers: white at the median, shading to dark red
// at the largest ratio of the panel (at least +5%), to blue below; the legend
// of each panel gives the scale in percent of the stage median, and a cell's
// tooltip its time in ms. With more than kMaxHeatmapRows groups, neighbouring
// replicas of one stage share a row ("stage 5, DP replicas 96-101 (slowest)")
// that shows its slowest member relative to the stage (a straggler is never
// averaged away); only with more stages than rows do stages share one. With
// more than kMaxHeatmapColumns steps, consecutive steps are merged the same way.
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
  std::vector<std::string> rows;                   // labels: "stage 3, DP replica 0 (GPUs 24-31)"
  std::string rows_note;                           // what a row is, e.g. "row: one TP group of 8 GPUs"
  std::vector<std::vector<HeatmapCell>> forward;   // [column][row]
  std::vector<std::vector<HeatmapCell>> backward;
  std::vector<double> step_time_s;                 // [column]
};

// From a job's per-step, per-group busy times (merging rows/steps as above).
HeatmapInput heatmap_input(const JobResult& r);

std::string heatmap_svg(const HeatmapInput& in);
void write_heatmap_svg(const std::string& path, const JobResult& r);

}  // namespace megascale::sim
