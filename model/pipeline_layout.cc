// model/pipeline_layout.cc: see pipeline_layout.h.
#include "model/pipeline_layout.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "model/config.h"

namespace megascale::model {

namespace {

std::string str(int v) { return std::to_string(v); }

}  // namespace

std::optional<std::string> pipeline_layout_error(int layers, int pp, int vpp, int first, int last,
                                                 std::string* key, const ChunkLayers& custom) {
  auto blame = [&](const char* k, std::string why) -> std::optional<std::string> {
    if (key != nullptr) *key = k;
    return why;
  };
  if (layers < 1 || pp < 1 || vpp < 1) return blame("parallel.pp", "layers, pp and vpp must be >= 1");
  if (custom != nullptr) {
    if (first > 0 || last > 0) {
      return blame("parallel.pipeline_layout",
                   "give either pipeline_layout or first_stage_layers / last_stage_layers, not both");
    }
    const int64_t stages = static_cast<int64_t>(custom->size());
    if (stages != static_cast<int64_t>(pp) * vpp) {
      return blame(stages % pp == 0 ? "parallel.vpp" : "parallel.pipeline_layout",
                   fmt::format("the layout has {} virtual stages, not pp x vpp ({} x {})", stages, pp, vpp));
    }
    int64_t total = 0;
    for (int r = 0; r < pp; ++r) {
      int64_t held = 0;
      for (int c = 0; c < vpp; ++c) held += (*custom)[static_cast<size_t>(c) * pp + r];
      if (held < 1) {
        return blame("parallel.pipeline_layout",
                     fmt::format("pipeline rank {} holds no transformer layer (its virtual stages {}, {}, ...)", r,
                                 r, r + pp));
      }
      total += held;
    }
    if (total != layers) {
      return blame("parallel.pipeline_layout",
                   fmt::format("the layout holds {} transformer layers, the model {}", total, layers));
    }
    return std::nullopt;
  }
  if (first < 0) return blame("parallel.first_stage_layers", "must be >= 1, got " + str(first));
  if (last < 0) return blame("parallel.last_stage_layers", "must be >= 1, got " + str(last));
  if (first == 0 && last == 0) {
    const int64_t chunks = static_cast<int64_t>(pp) * vpp;
    if (layers % chunks == 0) return std::nullopt;
    return blame(layers % pp == 0 ? "parallel.vpp" : "parallel.pp",
                 "layers (" + str(layers) + ") not divisible by pp*vpp (" + str(pp) + "*" + str(vpp) + "=" +
                     std::to_string(chunks) +
                     "): stages split the layers evenly unless first_stage_layers / last_stage_layers "
                     "(Megatron-Core's --decoder-first-pipeline-num-layers / "
                     "--decoder-last-pipeline-num-layers) or a pipeline_layout string "
                     "(--pipeline-model-parallel-layout) say otherwise");
  }
  const char* set_key = first > 0 ? "parallel.first_stage_layers" : "parallel.last_stage_layers";
  if (pp < 2) return blame(set_key, "an uneven first / last stage needs pp >= 2, got pp = " + str(pp));
  const int ends = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
  const int64_t rest = static_cast<int64_t>(layers) - first - last;
  const int middle_stages = pp - ends;
  if (rest < 0 || (middle_stages == 0 && rest != 0) || (middle_stages > 0 && rest < middle_stages)) {
    return blame(set_key, "first_stage_layers (" + str(first) + ") + last_stage_layers (" + str(last) +
                              ") leave " + std::to_string(rest) + " of the " + str(layers) + " layers for " +
                              str(middle_stages) + " other stage(s); each needs at least one");
  }
  if (middle_stages > 0 && rest % middle_stages != 0) {
    return blame(set_key, "the " + std::to_string(rest) + " layers left after the first / last stage are not "
                          "divisible by the " + str(middle_stages) + " other stages (Megatron-Core requires it)");
  }
  const int middle = middle_stages > 0 ? static_cast<int>(rest / middle_stages) : 0;
  // A given first / last stage may not divide by vpp (Meta's split, pipeline_layout.h).
  if (middle_stages > 0 && middle % vpp != 0) {
    return blame("parallel.vpp", "the stages other than a given first / last one hold " + str(middle) +
                                     " layers each, not divisible by vpp (" + str(vpp) +
                                     "): their model chunks hold the same number of layers (Megatron-Core "
                                     "requires it)");
  }
  return std::nullopt;
}

std::optional<EndStages> trimmed_end_stages(int layers, int pp) {
  if (layers < 1 || pp < 2 || layers % pp == 0) return std::nullopt;
  EndStages e;
  e.middle = (layers + pp - 1) / pp;
  const int64_t rest = static_cast<int64_t>(layers) - static_cast<int64_t>(e.middle) * (pp - 2);
  e.first = static_cast<int>((rest + 1) / 2);
  e.last = static_cast<int>(rest - e.first);
  if (e.last < 1 || e.first > e.middle) return std::nullopt;
  return e;
}

PipelineLayout::PipelineLayout(int layers, int pp, int vpp, int first, int last)
    : layers_(layers), pp_(pp), vpp_(vpp), first_(first), last_(last) {
  if (std::optional<std::string> why = pipeline_layout_error(layers, pp, vpp, first, last)) {
    throw std::invalid_argument("pipeline layout: " + *why);
  }
  const int ends = (first > 0 ? 1 : 0) + (last > 0 ? 1 : 0);
  middle_ = pp - ends > 0 ? (layers - first - last) / (pp - ends) : 0;
}

PipelineLayout::PipelineLayout(int layers, int pp, int vpp, ChunkLayers custom)
    : layers_(layers), pp_(pp), vpp_(vpp), custom_(std::move(custom)) {
  if (std::optional<std::string> why = pipeline_layout_error(layers, pp, vpp, 0, 0, nullptr, custom_)) {
    throw std::invalid_argument("pipeline layout: " + *why);
  }
}

int PipelineLayout::chunk_layers(int pp_rank, int chunk) const {
  if (custom_ != nullptr) return (*custom_)[static_cast<size_t>(chunk) * pp_ + pp_rank];
  const int n = stage_layers(pp_rank);
  const int q = n / vpp_, rem = n % vpp_;
  // The remainder sits away from the embedding (first stage) or the head.
  const bool extra = pp_rank == pp_ - 1 && last_ > 0 ? chunk < rem : chunk >= vpp_ - rem;
  return q + (extra ? 1 : 0);
}

int PipelineLayout::first_layer(int pp_rank, int chunk) const {
  int before = 0;  // the layers of the virtual stages ahead in model order
  for (int c = 0; c <= chunk; ++c) {
    for (int r = 0; r < (c < chunk ? pp_ : pp_rank); ++r) before += chunk_layers(r, c);
  }
  return before;
}

PipelineLayout::PipelineLayout(const ModelConfig& m, const ParallelConfig& p)
    : PipelineLayout(p.pipeline_chunk_layers != nullptr
                         ? PipelineLayout(m.layers, p.pp, p.vpp, p.pipeline_chunk_layers)
                         : PipelineLayout(m.layers, p.pp, p.vpp, p.first_stage_layers, p.last_stage_layers)) {}

std::optional<std::string> pipeline_layout_error(const ModelConfig& m, const ParallelConfig& p, std::string* key) {
  return pipeline_layout_error(m.layers, p.pp, p.vpp, p.first_stage_layers, p.last_stage_layers, key,
                               p.pipeline_chunk_layers);
}

int PipelineLayout::stage_layers(int pp_rank) const {
  if (custom_ != nullptr) {
    int held = 0;
    for (int c = 0; c < vpp_; ++c) held += chunk_layers(pp_rank, c);
    return held;
  }
  if (pp_rank == 0 && first_ > 0) return first_;
  if (pp_rank == pp_ - 1 && last_ > 0) return last_;
  return middle_;
}

int PipelineLayout::max_chunk_layers() const {
  int best = 0;
  if (custom_ != nullptr) {
    for (int v : *custom_) best = std::max(best, v);
    return best;
  }
  for (int r = 0; r < pp_; ++r) best = std::max(best, (stage_layers(r) + vpp_ - 1) / vpp_);
  return best;
}

int PipelineLayout::busiest_stage() const {
  int best = 0;
  for (int r = 1; r < pp_; ++r) {
    if (stage_layers(r) > stage_layers(best)) best = r;
  }
  return best;
}

std::vector<int> rank_layers(const std::vector<int>& chunk_layers, int pp) {
  std::vector<int> out(static_cast<size_t>(std::max(1, pp)), 0);
  for (size_t v = 0; v < chunk_layers.size(); ++v) out[v % out.size()] += chunk_layers[v];
  return out;
}

}  // namespace megascale::model
