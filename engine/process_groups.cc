// engine/process_groups.cc: Megatron-LM rank layout and ordered group creation.
#include "engine/process_groups.h"

#include <stdexcept>
#include <string>

namespace megascale::engine {
namespace {

void check_shape(const GridShape& g) {
  if (g.tp < 1 || g.pp < 1 || g.dp < 1)
    throw std::invalid_argument("process groups: tp, pp, dp must be >= 1 (got " +
                                std::to_string(g.tp) + ", " + std::to_string(g.pp) + ", " +
                                std::to_string(g.dp) + ")");
}

}  // namespace

int world_rank_of(const GridShape& g, const RankCoord& c) {
  check_shape(g);
  if (c.tp < 0 || c.tp >= g.tp || c.pp < 0 || c.pp >= g.pp || c.dp < 0 || c.dp >= g.dp)
    throw std::invalid_argument("world_rank_of: coordinate (tp " + std::to_string(c.tp) + ", pp " +
                                std::to_string(c.pp) + ", dp " + std::to_string(c.dp) +
                                ") outside the grid");
  if (g.pp_before_dp) return c.tp + c.pp * g.tp + c.dp * g.tp * g.pp;
  return c.tp + c.dp * g.tp + c.pp * g.tp * g.dp;
}

RankCoord coord_of(const GridShape& g, int world_rank) {
  check_shape(g);
  if (world_rank < 0 || world_rank >= g.world())
    throw std::invalid_argument("coord_of: rank " + std::to_string(world_rank) + " outside 0.." +
                                std::to_string(g.world() - 1));
  RankCoord c;
  c.tp = world_rank % g.tp;
  if (g.pp_before_dp) {
    c.pp = (world_rank / g.tp) % g.pp;
    c.dp = world_rank / (g.tp * g.pp);
    return c;
  }
  c.dp = (world_rank / g.tp) % g.dp;
  c.pp = world_rank / (g.tp * g.dp);
  return c;
}

ProcessGroups::ProcessGroups(Comm& world, int tp, int pp, int dp, bool pp_before_dp)
    : world_(&world), shape_{tp, pp, dp, pp_before_dp} {
  check_shape(shape_);
  if (world.size() != shape_.world())
    throw std::invalid_argument("process groups: world size " + std::to_string(world.size()) +
                                " != tp*pp*dp = " + std::to_string(shape_.world()));
  coord_ = coord_of(shape_, world.rank());
  const RankCoord& c = coord_;
  tp_ = world.split(c.dp + c.pp * dp, c.tp);
  pp_ = world.split(c.tp + c.dp * tp, c.pp);
  dp_ = world.split(c.tp + c.pp * tp, c.dp);
  // Embedding group: color per (tp, dp) pipeline for its end stages; every other
  // rank gets a color of its own (offset past the pipeline colors).
  const bool end_stage = pp > 1 && (c.pp == 0 || c.pp == pp - 1);
  const int pipeline = c.tp + c.dp * tp;
  embedding_ = world.split(end_stage ? pipeline : tp * dp + world.rank(), c.pp);
  world.barrier();
}

std::vector<int> ProcessGroups::tp_peers() const {
  std::vector<int> out;
  for (int t = 0; t < shape_.tp; ++t) out.push_back(world_rank_of(shape_, {t, coord_.pp, coord_.dp}));
  return out;
}

std::vector<int> ProcessGroups::pp_peers() const {
  std::vector<int> out;
  for (int p = 0; p < shape_.pp; ++p) out.push_back(world_rank_of(shape_, {coord_.tp, p, coord_.dp}));
  return out;
}

std::vector<int> ProcessGroups::dp_peers() const {
  std::vector<int> out;
  for (int d = 0; d < shape_.dp; ++d) out.push_back(world_rank_of(shape_, {coord_.tp, coord_.pp, d}));
  return out;
}

int ProcessGroups::next_pp_world_rank() const {
  return world_rank_of(shape_, {coord_.tp, next_pp_rank(), coord_.dp});
}

int ProcessGroups::prev_pp_world_rank() const {
  return world_rank_of(shape_, {coord_.tp, prev_pp_rank(), coord_.dp});
}

}  // namespace megascale::engine
