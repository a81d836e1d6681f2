// model/search_plot.h: the layouts `megascale search --plot FILE.svg`
// evaluated, as a scatter of predicted MFU against memory per GPU.
//
// defines: kMaxScatterPoints, kScatterMemorySpan, search_scatter_svg
//
// One dot per valid layout (SearchResult::points): blue where it fits in
// memory with the requested headroom, grey where it does not; the ranked
// layouts (SearchResult::top) drawn larger in orange, the best `labelled`
// numbered beside their dot and listed under the plot. The GPU's memory
// capacity is a vertical red line (and the limit the headroom leaves, a dashed
// one). Both axes start at zero: MFU in percent of peak, memory in GB (1e9
// bytes). Layouts needing more than kScatterMemorySpan x the capacity are
// drawn on the right edge and counted. Beyond kMaxScatterPoints dots, the
// ranked layouts and an even sample of the rest are drawn, and the picture
// says so. Drawn through base/svg.h: the title is escaped.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "model/search.h"

namespace megascale::model {

// Dots drawn at most: keeps the file under ~1 MB (about 200 bytes per dot).
inline constexpr int kMaxScatterPoints = 4000;
// The memory axis ends at this multiple of the capacity (or at the largest
// layout, when smaller): the layouts that fit keep most of the width.
inline constexpr double kScatterMemorySpan = 2.0;

// `memory_headroom`: the fraction SearchOptions::memory_headroom kept free.
std::string search_scatter_svg(const std::string& title, const SearchResult& r, double memory_headroom,
                               int labelled = 5);

}  // namespace megascale::model
