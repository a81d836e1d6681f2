// engine/process_groups.h: Megatron-LM's rank layout and its communicators.
//
// Layout (REFERENCE.md, "Megatron-LM behaviour"; megatron/core/parallel_state.py
// with order tp-cp-dp-pp and no context parallelism): TP fastest, then DP, then PP,
//   world rank = tp + dp*TP + pp*TP*DP.
// So a TP group is TP consecutive ranks (one node's NVLink domain in practice),
// a DP group strides by TP, a pipeline strides by TP*DP.
//
// Construction (collective over `world`) splits the world communicator, in this
// order, and synchronises once, at the end (MegaScale section 3.5 / REFERENCE.md
// "Operations": ordered initialisation without O(n^2) global barriers):
//   TP group:  color = dp + pp*DP, key = tp
//   PP group:  color = tp + dp*TP, key = pp
//   DP group:  color = tp + pp*TP, key = dp
//   embedding: the first and last pipeline stage of each (tp, dp) pipeline
//              (tied input/output embedding), other ranks alone
//   world.barrier()
// Within a group, the group rank equals the coordinate (tp_rank in the TP group,
// ...), because the keys are the coordinates.
//
// Thread-safety: construct and use from the rank's own thread.
#pragma once

#include <memory>
#include <vector>

#include "engine/comm.h"

namespace megascale::engine {

struct RankCoord {
  int tp = 0;
  int pp = 0;
  int dp = 0;
  bool operator==(const RankCoord&) const = default;
};

struct GridShape {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  // false: Megatron's default order (tp-dp-pp); true: Megatron-Core's
  // --use-tp-pp-dp-mapping (tp-pp-dp), `[parallel] rank_order = "tp-cp-pp-dp"`.
  bool pp_before_dp = false;
  int world() const { return tp * pp * dp; }
};

// world rank = tp + dp*TP + pp*TP*DP (pp_before_dp: tp + pp*TP + dp*TP*PP), and
// its inverse. Throw std::invalid_argument when out of range.
int world_rank_of(const GridShape& g, const RankCoord& c);
RankCoord coord_of(const GridShape& g, int world_rank);

class ProcessGroups {
 public:
  // Collective over `world`. REQUIRES: world.size() == tp*pp*dp, all >= 1
  // (throws std::invalid_argument otherwise, on every rank, before any split).
  // `world` must outlive this object.
  ProcessGroups(Comm& world, int tp, int pp, int dp, bool pp_before_dp = false);

  const GridShape& shape() const { return shape_; }
  const RankCoord& coord() const { return coord_; }
  int world_rank() const { return world_->rank(); }
  int tp_rank() const { return coord_.tp; }
  int pp_rank() const { return coord_.pp; }
  int dp_rank() const { return coord_.dp; }
  bool is_first_stage() const { return coord_.pp == 0; }
  bool is_last_stage() const { return coord_.pp == shape_.pp - 1; }

  Comm& world() { return *world_; }
  Comm& tp() { return *tp_; }
  Comm& pp() { return *pp_; }
  Comm& dp() { return *dp_; }
  // First + last stage of this pipeline (size 2 when PP > 1 and this rank is one
  // of them; size 1 otherwise: PP == 1, or a middle stage alone).
  Comm& embedding() { return *embedding_; }

  // World ranks of this rank's groups, indexed by group rank.
  std::vector<int> tp_peers() const;
  std::vector<int> pp_peers() const;
  std::vector<int> dp_peers() const;

  // Pipeline neighbours (wrapping around, as Megatron's ring for interleaving):
  // as ranks of the PP group and as world ranks.
  int next_pp_rank() const { return (coord_.pp + 1) % shape_.pp; }
  int prev_pp_rank() const { return (coord_.pp + shape_.pp - 1) % shape_.pp; }
  int next_pp_world_rank() const;
  int prev_pp_world_rank() const;

 private:
  Comm* world_;
  GridShape shape_;
  RankCoord coord_;
  std::unique_ptr<Comm> tp_, pp_, dp_, embedding_;
};

}  // namespace megascale::engine
