// network/flow_solver.cc: progressive filling, component split, canonical
// memoisation and the event-driven completion simulation (see flow_solver.h).
#include "network/flow_solver.h"

#include "base/splitmix64.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <queue>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

namespace megascale::network {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBitsPerByte = 8.0;
constexpr double kBitsPerGbit = 1e9;
constexpr std::uint32_t kAbsent = std::numeric_limits<std::uint32_t>::max();
// Rates this close (relative) to a finishing flow's rate count as tied with
// it in the partial re-solve of Simulator::run.
constexpr double kLevelRelTol = 1e-9;

double transfer_time_s(double bytes, double rate_gbps) {
  return bytes * kBitsPerByte / (rate_gbps * kBitsPerGbit);
}
double bytes_moved(double rate_gbps, double dt_s) {
  return rate_gbps * kBitsPerGbit * dt_s / kBitsPerByte;
}

// ---------------------------------------------------------------------------
// A connected component in canonical local numbering: links 0.. in order of
// first appearance along the flows, flows in input order.
struct Component {
  std::vector<double> capacity_gbps;  // (local links)
  std::vector<std::uint32_t> offset;  // (flows + 1)
  std::vector<std::uint32_t> links;   // (path entries): local link ids
  std::vector<double> cap_gbps;       // (flows)
  std::vector<double> bytes;          // (flows)
  std::vector<double> rel_start_s;    // (flows): start - t0_s
  std::vector<std::size_t> global_flow;  // (flows)
  std::vector<LinkId> global_link;       // (local links)
  double t0_s = 0.0;

  std::size_t num_flows() const { return cap_gbps.size(); }
  std::size_t num_links() const { return capacity_gbps.size(); }
  std::span<const std::uint32_t> path(std::size_t f) const {
    return {links.data() + offset[f], offset[f + 1] - offset[f]};
  }
  void clear() {
    capacity_gbps.clear();
    offset.assign(1, 0);
    links.clear();
    cap_gbps.clear();
    bytes.clear();
    rel_start_s.clear();
    global_flow.clear();
    global_link.clear();
    t0_s = 0.0;
  }
};

// ---------------------------------------------------------------------------
// Indexed binary min-heap of items 0..n-1 keyed by an external array; ties go
// to the smaller index so that results are deterministic.
class ShareHeap {
 public:
  void build(std::size_t n, const double* key) {
    key_ = key;
    heap_.resize(n);
    pos_.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) heap_[i] = pos_[i] = i;
    for (std::size_t i = n / 2; i-- > 0;) sift_down(i);
  }
  bool empty() const { return heap_.empty(); }
  std::uint32_t top() const { return heap_[0]; }
  void remove(std::uint32_t item) {
    const std::uint32_t p = pos_[item];
    if (p == kAbsent) return;
    pos_[item] = kAbsent;
    const std::uint32_t last = heap_.back();
    heap_.pop_back();
    if (p < heap_.size()) {
      heap_[p] = last;
      pos_[last] = p;
      sift_up(p);
      sift_down(pos_[last]);
    }
  }
  // The key of `item` changed (either direction).
  void update(std::uint32_t item) {
    const std::uint32_t p = pos_[item];
    if (p == kAbsent) return;
    sift_up(p);
    sift_down(pos_[item]);
  }

 private:
  bool less(std::uint32_t a, std::uint32_t b) const {
    return key_[a] < key_[b] || (key_[a] == key_[b] && a < b);
  }
  void place(std::size_t p, std::uint32_t item) {
    heap_[p] = item;
    pos_[item] = static_cast<std::uint32_t>(p);
  }
  void sift_up(std::size_t p) {
    const std::uint32_t item = heap_[p];
    while (p > 0) {
      const std::size_t parent = (p - 1) / 2;
      if (!less(item, heap_[parent])) break;
      place(p, heap_[parent]);
      p = parent;
    }
    place(p, item);
  }
  void sift_down(std::size_t p) {
    const std::uint32_t item = heap_[p];
    const std::size_t n = heap_.size();
    for (;;) {
      std::size_t child = 2 * p + 1;
      if (child >= n) break;
      if (child + 1 < n && less(heap_[child + 1], heap_[child])) ++child;
      if (!less(heap_[child], item)) break;
      place(p, heap_[child]);
      p = child;
    }
    place(p, item);
  }

  const double* key_ = nullptr;
  std::vector<std::uint32_t> heap_;  // heap order of items
  std::vector<std::uint32_t> pos_;   // (items): position in heap_, kAbsent once removed
};

// ---------------------------------------------------------------------------
// Progressive filling over a subset of a component's flows. Scratch space is
// kept between calls; per call only the links the subset touches are reset.
class Filler {
 public:
  // Writes rate_gbps[f] and bottleneck[f] (a local link id of `c`, or a
  // sentinel) for every f in `subset`. `used_gbps` (local link id -> Gb/s,
  // may be null) is capacity already taken by flows outside the subset whose
  // rates stay fixed.
  void fill(const Component& c, std::span<const std::uint32_t> subset, double* rate_gbps,
            LinkId* bottleneck, const double* used_gbps = nullptr) {
    const std::size_t n = subset.size();
    next_epoch(c.num_links());
    touched_.clear();
    count_.clear();
    cpath_off_.assign(1, 0);
    cpath_.clear();
    // Compact the links this subset uses; each path in compact ids.
    for (std::size_t i = 0; i < n; ++i) {
      for (std::uint32_t l : c.path(subset[i])) {
        if (mark_[l] != epoch_) {
          mark_[l] = epoch_;
          compact_[l] = static_cast<std::uint32_t>(touched_.size());
          touched_.push_back(l);
          count_.push_back(0);
        }
        const std::uint32_t k = compact_[l];
        ++count_[k];
        cpath_.push_back(k);
      }
      cpath_off_.push_back(static_cast<std::uint32_t>(cpath_.size()));
    }
    const std::size_t num_touched = touched_.size();
    // Link -> subset-flow adjacency (counting sort).
    adj_start_.assign(num_touched + 1, 0);
    for (std::size_t k = 0; k < num_touched; ++k) adj_start_[k + 1] = adj_start_[k] + count_[k];
    adj_.resize(cpath_.size());
    cursor_.assign(adj_start_.begin(), adj_start_.end() - 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::uint32_t j = cpath_off_[i]; j < cpath_off_[i + 1]; ++j)
        adj_[cursor_[cpath_[j]]++] = static_cast<std::uint32_t>(i);
    rem_.resize(num_touched);
    share_.resize(num_touched);
    dirty_mark_.assign(num_touched, 0);
    for (std::size_t k = 0; k < num_touched; ++k) {
      rem_[k] = c.capacity_gbps[touched_[k]];
      if (used_gbps != nullptr) rem_[k] = std::max(rem_[k] - used_gbps[touched_[k]], 0.0);
      share_[k] = rem_[k] / count_[k];
    }
    frozen_.assign(n, 0);
    capped_.clear();
    std::size_t unfrozen = n;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t f = subset[i];
      if (c.cap_gbps[f] < kInf) {
        capped_.push_back(static_cast<std::uint32_t>(i));
      } else if (cpath_off_[i] == cpath_off_[i + 1]) {
        rate_gbps[f] = kInf;
        bottleneck[f] = kUnlimited;
        frozen_[i] = 1;
        --unfrozen;
      }
    }
    std::sort(capped_.begin(), capped_.end(), [&](std::uint32_t a, std::uint32_t b) {
      const double ca = c.cap_gbps[subset[a]], cb = c.cap_gbps[subset[b]];
      return ca < cb || (ca == cb && a < b);
    });
    heap_.build(num_touched, share_.data());

    std::size_t next_cap = 0;
    std::uint32_t step = 0;
    while (unfrozen > 0) {
      while (next_cap < capped_.size() && frozen_[capped_[next_cap]]) ++next_cap;
      const double cap_val = next_cap < capped_.size() ? c.cap_gbps[subset[capped_[next_cap]]] : kInf;
      const double link_share = heap_.empty() ? kInf : share_[heap_.top()];
      if (cap_val <= link_share) {
        if (cap_val == kInf) break;  // defensive: nothing can bound the rest
        const std::uint32_t i = capped_[next_cap];
        freeze(subset, i, cap_val, kLimitedByRateCap, rate_gbps, bottleneck);
        --unfrozen;
        for (std::uint32_t j = cpath_off_[i]; j < cpath_off_[i + 1]; ++j) refresh(cpath_[j]);
        continue;
      }
      // The link with the least fair share is the bottleneck of all of its
      // unfrozen flows.
      const std::uint32_t k = heap_.top();
      heap_.remove(k);
      ++step;
      dirty_.clear();
      const LinkId local_link = static_cast<LinkId>(touched_[k]);
      for (std::uint32_t a = adj_start_[k]; a < adj_start_[k + 1]; ++a) {
        const std::uint32_t i = adj_[a];
        if (frozen_[i]) continue;
        freeze(subset, i, link_share, local_link, rate_gbps, bottleneck);
        --unfrozen;
        for (std::uint32_t j = cpath_off_[i]; j < cpath_off_[i + 1]; ++j) {
          const std::uint32_t kk = cpath_[j];
          if (dirty_mark_[kk] != step) {
            dirty_mark_[kk] = step;
            dirty_.push_back(kk);
          }
        }
      }
      for (std::uint32_t kk : dirty_) refresh(kk);
    }
  }

 private:
  void next_epoch(std::size_t num_links) {
    if (mark_.size() < num_links) {
      mark_.resize(num_links, 0);
      compact_.resize(num_links, 0);
    }
    if (++epoch_ == 0) {  // wrapped: forget every old mark
      std::fill(mark_.begin(), mark_.end(), 0);
      epoch_ = 1;
    }
  }
  // Freezes subset flow i at `rate`; charges the links on its path.
  void freeze(std::span<const std::uint32_t> subset, std::uint32_t i, double rate, LinkId why,
              double* rate_gbps, LinkId* bottleneck) {
    const std::uint32_t f = subset[i];
    frozen_[i] = 1;
    rate_gbps[f] = rate;
    bottleneck[f] = why;
    for (std::uint32_t j = cpath_off_[i]; j < cpath_off_[i + 1]; ++j) {
      const std::uint32_t k = cpath_[j];
      rem_[k] -= rate;
      --count_[k];
    }
  }
  // Recomputes link k's fair share after its counters changed.
  void refresh(std::uint32_t k) {
    if (count_[k] == 0) {
      heap_.remove(k);
      return;
    }
    share_[k] = std::max(rem_[k], 0.0) / count_[k];
    heap_.update(k);
  }

  // Indexed by the component's local link id.
  std::vector<std::uint32_t> mark_;
  std::vector<std::uint32_t> compact_;
  std::uint32_t epoch_ = 0;
  // Indexed by compact link id (links this subset touches).
  std::vector<std::uint32_t> touched_;  // compact -> local link id
  std::vector<std::uint32_t> count_;    // unfrozen flows crossing the link
  std::vector<double> rem_;             // capacity not yet given to frozen flows, Gb/s
  std::vector<double> share_;           // rem_ / count_, Gb/s
  std::vector<std::uint32_t> adj_start_, adj_, cursor_;
  std::vector<std::uint32_t> dirty_mark_;
  std::vector<std::uint32_t> dirty_;
  // Indexed by subset position.
  std::vector<std::uint32_t> cpath_off_, cpath_;
  std::vector<std::uint8_t> frozen_;
  std::vector<std::uint32_t> capped_;
  ShareHeap heap_;
};

// ---------------------------------------------------------------------------
// Event-driven completion of one component (times relative to its t0_s).
struct SimOutput {
  std::vector<double> completion_rel_s;  // (flows)
  std::vector<LinkId> bottleneck;        // (flows): local link id or sentinel
  std::vector<double> link_bytes;        // (local links)
  std::vector<double> link_peak_utilisation;  // (local links)
  std::size_t events = 0;
};

class Simulator {
 public:
  void run(const Component& c, double rel_tol, Filler& filler, SimOutput& out) {
    const std::size_t F = c.num_flows();
    const std::size_t L = c.num_links();
    // Static link -> flow adjacency of the whole component.
    ls_start_.assign(L + 1, 0);
    for (std::uint32_t l : c.links) ++ls_start_[l + 1];
    for (std::size_t l = 0; l < L; ++l) ls_start_[l + 1] += ls_start_[l];
    ls_flows_.resize(c.links.size());
    cursor_.assign(ls_start_.begin(), ls_start_.end() - 1);
    for (std::uint32_t f = 0; f < F; ++f)
      for (std::uint32_t l : c.path(f)) ls_flows_[cursor_[l]++] = f;

    order_.resize(F);
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return c.rel_start_s[a] < c.rel_start_s[b];
    });

    active_.assign(F, 0);
    remaining_.assign(F, 0.0);
    last_t_.assign(F, 0.0);
    rate_.assign(F, 0.0);
    new_bneck_.assign(F, kUnlimited);
    cur_bneck_.assign(F, kUnlimited);
    cur_bytes_.assign(F, 0.0);
    best_bytes_.assign(F, -1.0);
    best_bneck_.assign(F, kUnlimited);
    version_.assign(F, 0);
    flow_mark_.assign(F, 0);
    link_mark_.assign(L, 0);
    load_.assign(L, 0.0);
    out.completion_rel_s.assign(F, kInf);
    out.bottleneck.assign(F, kUnlimited);
    out.link_bytes.assign(L, 0.0);
    out.link_peak_utilisation.assign(L, 0.0);
    out.events = 0;
    finish_ = {};
    std::uint32_t epoch = 0;
    std::size_t next_start = 0;

    for (;;) {
      while (!finish_.empty() && finish_.top().version != version_[finish_.top().flow]) finish_.pop();
      const double t_finish = finish_.empty() ? kInf : finish_.top().t_s;
      const double t_start = next_start < F ? c.rel_start_s[order_[next_start]] : kInf;
      const double t = std::min(t_finish, t_start);
      if (t == kInf) break;
      const double horizon = t + rel_tol * std::abs(t);

      seed_links_.clear();
      started_.clear();
      double finished_min_rate = kInf;
      // Completions at (about) t.
      while (!finish_.empty()) {
        const FinishEvent e = finish_.top();
        if (e.version != version_[e.flow]) {
          finish_.pop();
          continue;
        }
        if (e.t_s > horizon) break;
        finish_.pop();
        const std::uint32_t f = e.flow;
        finished_min_rate = std::min(finished_min_rate, rate_[f]);
        cur_bytes_[f] += remaining_[f];
        close_interval(f);
        remaining_[f] = 0.0;
        out.completion_rel_s[f] = e.t_s;
        out.bottleneck[f] = best_bneck_[f];
        active_[f] = 0;
        ++version_[f];
        for (std::uint32_t l : c.path(f)) {
          if (rate_[f] < kInf) load_[l] -= rate_[f];
          seed_links_.push_back(l);
        }
      }
      // Starts at (about) t.
      while (next_start < F && c.rel_start_s[order_[next_start]] <= horizon) {
        const std::uint32_t f = order_[next_start++];
        if (c.bytes[f] <= 0.0) {
          out.completion_rel_s[f] = c.rel_start_s[f];
          continue;
        }
        active_[f] = 1;
        remaining_[f] = c.bytes[f];
        last_t_[f] = t;
        rate_[f] = 0.0;
        started_.push_back(f);
      }
      if (seed_links_.empty() && started_.empty()) continue;

      // Progressive filling freezes flows in increasing order of rate, and no
      // link on a flow's path saturates below that flow's rate. So when flows
      // of rate >= r finish (and none starts), every flow slower than r was
      // frozen by the same events as before: it keeps its rate and only
      // flows at >= r (within rounding) need re-solving, on the capacity the
      // slower ones leave. A start can lower anyone's rate: re-solve all.
      const double level = started_.empty() ? finished_min_rate * (1.0 - kLevelRelTol) : 0.0;
      // The flows whose rate may change: active flows reachable from the
      // changed flows' links through shared links.
      if (++epoch == 0) {
        std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
        std::fill(link_mark_.begin(), link_mark_.end(), 0);
        epoch = 1;
      }
      affected_.clear();
      queue_.clear();
      auto visit_link = [&](std::uint32_t l) {
        if (link_mark_[l] != epoch) {
          link_mark_[l] = epoch;
          queue_.push_back(l);
        }
      };
      for (std::uint32_t f : started_) {
        flow_mark_[f] = epoch;
        affected_.push_back(f);
        for (std::uint32_t l : c.path(f)) visit_link(l);
      }
      for (std::uint32_t l : seed_links_) visit_link(l);
      for (std::size_t q = 0; q < queue_.size(); ++q) {
        const std::uint32_t l = queue_[q];
        for (std::uint32_t a = ls_start_[l]; a < ls_start_[l + 1]; ++a) {
          const std::uint32_t f = ls_flows_[a];
          if (!active_[f] || flow_mark_[f] == epoch || rate_[f] < level) continue;
          flow_mark_[f] = epoch;
          affected_.push_back(f);
          for (std::uint32_t l2 : c.path(f)) visit_link(l2);
        }
      }

      // Settle progress up to t, take the old rates off the links.
      for (std::uint32_t f : affected_) {
        if (last_t_[f] < t && rate_[f] > 0.0) {
          const double moved =
              rate_[f] == kInf ? remaining_[f] : std::min(remaining_[f], bytes_moved(rate_[f], t - last_t_[f]));
          remaining_[f] -= moved;
          cur_bytes_[f] += moved;
        }
        last_t_[f] = t;
        if (rate_[f] > 0.0 && rate_[f] < kInf)
          for (std::uint32_t l : c.path(f)) load_[l] -= rate_[f];
      }

      if (affected_.empty()) continue;  // the last flows of a group finished
      // load_ now holds only the fixed flows' rates.
      filler.fill(c, affected_, rate_.data(), new_bneck_.data(), load_.data());
      ++out.events;

      for (std::uint32_t f : affected_) {
        if (new_bneck_[f] != cur_bneck_[f]) {
          close_interval(f);
          cur_bneck_[f] = new_bneck_[f];
        }
        const double r = rate_[f];
        if (r > 0.0 && r < kInf) {
          for (std::uint32_t l : c.path(f)) {
            load_[l] += r;
            if (c.capacity_gbps[l] > 0.0)
              out.link_peak_utilisation[l] =
                  std::max(out.link_peak_utilisation[l], load_[l] / c.capacity_gbps[l]);
          }
        }
        ++version_[f];
        if (r == kInf) {
          finish_.push({t, f, version_[f]});
        } else if (r > 0.0) {
          finish_.push({t + transfer_time_s(remaining_[f], r), f, version_[f]});
        }
      }
    }

    // Flows still active never finish (their rate is 0); credit what moved.
    for (std::uint32_t f = 0; f < F; ++f) {
      double moved = c.bytes[f];
      if (active_[f]) {
        moved = c.bytes[f] - remaining_[f];
        close_interval(f);
        out.bottleneck[f] = best_bneck_[f];
      }
      if (moved > 0.0)
        for (std::uint32_t l : c.path(f)) out.link_bytes[l] += moved;
    }
  }

 private:
  struct FinishEvent {
    double t_s;
    std::uint32_t flow;
    std::uint32_t version;
    bool operator>(const FinishEvent& o) const {
      return t_s > o.t_s || (t_s == o.t_s && flow > o.flow);
    }
  };
  // Ends the flow's current stretch under one limit; keeps the limit of the
  // stretch that moved the most bytes.
  // (kUnlimited marks the time before the flow's first solve.)
  void close_interval(std::uint32_t f) {
    if (cur_bneck_[f] != kUnlimited && cur_bytes_[f] > best_bytes_[f]) {
      best_bytes_[f] = cur_bytes_[f];
      best_bneck_[f] = cur_bneck_[f];
    }
    cur_bytes_[f] = 0.0;
  }

  std::vector<std::uint32_t> ls_start_, ls_flows_, cursor_, order_;
  std::vector<std::uint8_t> active_;
  std::vector<double> remaining_, last_t_, rate_, cur_bytes_, best_bytes_, load_;
  std::vector<LinkId> new_bneck_, cur_bneck_, best_bneck_;
  std::vector<std::uint32_t> version_, flow_mark_, link_mark_;
  std::vector<std::uint32_t> seed_links_, started_, affected_, queue_;
  std::priority_queue<FinishEvent, std::vector<FinishEvent>, std::greater<>> finish_;
};

// ---------------------------------------------------------------------------
// Canonical key of a component and its hash.
enum class KeyKind : std::uint64_t { kRates = 1, kCompletion = 2 };

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

void build_key(const Component& c, KeyKind kind, std::vector<std::uint64_t>& key) {
  key.clear();
  key.reserve(3 + c.num_links() + c.links.size() + c.num_flows() * 4);
  key.push_back(static_cast<std::uint64_t>(kind));
  key.push_back(c.num_flows());
  key.push_back(c.num_links());
  for (double cap : c.capacity_gbps) key.push_back(bits(cap));
  for (std::size_t f = 0; f < c.num_flows(); ++f) {
    const auto p = c.path(f);
    key.push_back(p.size());
    key.insert(key.end(), p.begin(), p.end());
    key.push_back(bits(c.cap_gbps[f]));
    if (kind == KeyKind::kCompletion) {
      key.push_back(bits(c.bytes[f]));
      key.push_back(bits(c.rel_start_s[f]));
    }
  }
}

std::uint64_t hash_key(const std::vector<std::uint64_t>& key) {
  std::uint64_t h = 0x243F6A8885A308D3ull ^ key.size();
  for (std::uint64_t w : key) {
    h = (std::rotl(h, 5) ^ w) * 0x9E3779B97F4A7C15ull;
  }
  return base::splitmix64_mix(h);
}

// Max-min fair rates of one component (local numbering).
struct RateOutput {
  std::vector<double> rate_gbps;   // (component flows)
  std::vector<LinkId> bottleneck;  // (component flows): local link id or sentinel
};

// A memoised result and the canonical key it was computed for (the hash map
// is keyed by the key's hash; a hit compares the whole key).
template <class Out>
struct CacheEntry {
  std::vector<std::uint64_t> key;
  Out out;
};

LinkId to_global(const Component& c, LinkId local) {
  return local >= 0 ? c.global_link[static_cast<std::size_t>(local)] : local;
}

// Flows grouped by component: members of component k are
// flows_[start_[k], start_[k+1]), in input order. Flows with an empty path
// are listed apart in trivial_.
struct Grouping {
  std::vector<std::size_t> start;
  std::vector<std::size_t> flows;
  std::vector<std::size_t> trivial;
  std::size_t num_components() const { return start.empty() ? 0 : start.size() - 1; }
};

}  // namespace

// ---------------------------------------------------------------------------
// FlowSet

std::size_t FlowSet::add(std::span<const LinkId> path, double bytes, double rate_cap_gbps,
                         double start_s) {
  if (!(bytes >= 0.0) || !std::isfinite(bytes))
    throw std::invalid_argument("FlowSet::add: flow " + std::to_string(size()) +
                                ": bytes must be finite and >= 0, got " + std::to_string(bytes));
  if (!(rate_cap_gbps >= 0.0))
    throw std::invalid_argument("FlowSet::add: flow " + std::to_string(size()) +
                                ": rate_cap_gbps must be >= 0 (kNoRateCap for none), got " +
                                std::to_string(rate_cap_gbps));
  if (!std::isfinite(start_s))
    throw std::invalid_argument("FlowSet::add: flow " + std::to_string(size()) +
                                ": start_s must be finite");
  links_.insert(links_.end(), path.begin(), path.end());
  offset_.push_back(links_.size());
  bytes_.push_back(bytes);
  cap_gbps_.push_back(rate_cap_gbps);
  start_s_.push_back(start_s);
  return bytes_.size() - 1;
}

void FlowSet::reserve(std::size_t flows, std::size_t path_entries) {
  offset_.reserve(flows + 1);
  links_.reserve(path_entries);
  bytes_.reserve(flows);
  cap_gbps_.reserve(flows);
  start_s_.reserve(flows);
}

void FlowSet::clear() {
  offset_.assign(1, 0);
  links_.clear();
  bytes_.clear();
  cap_gbps_.clear();
  start_s_.clear();
}

// ---------------------------------------------------------------------------
// FlowSolver

struct FlowSolver::Impl {
  explicit Impl(FlowSolverOptions o) : options(o) {}

  FlowSolverOptions options;
  Filler filler;
  Simulator simulator;
  // Decomposition scratch (indexed by global link id).
  std::vector<LinkId> uf_parent;
  std::vector<std::uint32_t> uf_size;
  std::vector<std::int64_t> comp_of_root;
  std::vector<std::uint32_t> local_stamp, local_id;
  std::uint32_t local_epoch = 0;
  Grouping grouping;
  Component comp;
  std::vector<std::uint64_t> key;
  std::vector<std::uint32_t> all_flows;
  RateOutput rate_scratch;
  SimOutput sim_scratch;
  std::unordered_map<std::uint64_t, CacheEntry<RateOutput>> rate_cache;
  std::unordered_map<std::uint64_t, CacheEntry<SimOutput>> sim_cache;

  static void validate(std::span<const double> capacity_gbps, const FlowSet& flows) {
    for (std::size_t l = 0; l < capacity_gbps.size(); ++l)
      if (!(capacity_gbps[l] >= 0.0) || !std::isfinite(capacity_gbps[l]))
        throw std::invalid_argument("flow solver: link " + std::to_string(l) +
                                    ": capacity_gbps must be finite and >= 0, got " +
                                    std::to_string(capacity_gbps[l]));
    if (capacity_gbps.size() > static_cast<std::size_t>(std::numeric_limits<LinkId>::max()))
      throw std::invalid_argument("flow solver: too many links for LinkId");
    const auto num_links = static_cast<LinkId>(capacity_gbps.size());
    for (std::size_t f = 0; f < flows.size(); ++f)
      for (LinkId l : flows.path(f))
        if (l < 0 || l >= num_links)
          throw std::invalid_argument("flow solver: flow " + std::to_string(f) + ": link id " +
                                      std::to_string(l) + " is not in [0, " +
                                      std::to_string(num_links) + ")");
  }

  LinkId find(LinkId x) {
    while (uf_parent[x] != x) {
      uf_parent[x] = uf_parent[uf_parent[x]];
      x = uf_parent[x];
    }
    return x;
  }
  void unite(LinkId a, LinkId b) {
    a = find(a);
    b = find(b);
    if (a == b) return;
    if (uf_size[a] < uf_size[b]) std::swap(a, b);
    uf_parent[b] = a;
    uf_size[a] += uf_size[b];
  }

  // Splits flows into link-connected components (or one, if disabled).
  void group(std::size_t num_links, const FlowSet& flows) {
    Grouping& g = grouping;
    g.start.clear();
    g.flows.clear();
    g.trivial.clear();
    const std::size_t F = flows.size();
    std::vector<std::size_t> comp_of_flow(F, 0);
    std::size_t num_comps = 0;
    if (options.split_components) {
      uf_parent.resize(num_links);
      uf_size.assign(num_links, 1);
      std::iota(uf_parent.begin(), uf_parent.end(), 0);
      for (std::size_t f = 0; f < F; ++f) {
        const auto p = flows.path(f);
        for (std::size_t j = 1; j < p.size(); ++j) unite(p[0], p[j]);
      }
      comp_of_root.assign(num_links, -1);
      for (std::size_t f = 0; f < F; ++f) {
        const auto p = flows.path(f);
        if (p.empty()) {
          g.trivial.push_back(f);
          comp_of_flow[f] = SIZE_MAX;
          continue;
        }
        const LinkId root = find(p[0]);
        if (comp_of_root[root] < 0) comp_of_root[root] = static_cast<std::int64_t>(num_comps++);
        comp_of_flow[f] = static_cast<std::size_t>(comp_of_root[root]);
      }
    } else {
      for (std::size_t f = 0; f < F; ++f) {
        if (flows.path(f).empty()) {
          g.trivial.push_back(f);
          comp_of_flow[f] = SIZE_MAX;
        }
      }
      num_comps = g.trivial.size() < F ? 1 : 0;
    }
    g.start.assign(num_comps + 1, 0);
    for (std::size_t f = 0; f < F; ++f)
      if (comp_of_flow[f] != SIZE_MAX) ++g.start[comp_of_flow[f] + 1];
    for (std::size_t k = 0; k < num_comps; ++k) g.start[k + 1] += g.start[k];
    g.flows.resize(g.start[num_comps]);
    std::vector<std::size_t> cursor(g.start.begin(), g.start.end() - 1);
    for (std::size_t f = 0; f < F; ++f)
      if (comp_of_flow[f] != SIZE_MAX) g.flows[cursor[comp_of_flow[f]]++] = f;
  }

  // Builds `comp` (canonical local numbering) from the given flows.
  void build_component(std::span<const double> capacity_gbps, const FlowSet& flows,
                       std::span<const std::size_t> members) {
    Component& c = comp;
    c.clear();
    if (local_stamp.size() < capacity_gbps.size()) {
      local_stamp.resize(capacity_gbps.size(), 0);
      local_id.resize(capacity_gbps.size(), 0);
    }
    if (++local_epoch == 0) {
      std::fill(local_stamp.begin(), local_stamp.end(), 0);
      local_epoch = 1;
    }
    double t0 = kInf;
    for (std::size_t f : members) t0 = std::min(t0, flows.start_s(f));
    c.t0_s = members.empty() ? 0.0 : t0;
    for (std::size_t f : members) {
      for (LinkId l : flows.path(f)) {
        if (local_stamp[l] != local_epoch) {
          local_stamp[l] = local_epoch;
          local_id[l] = static_cast<std::uint32_t>(c.global_link.size());
          c.global_link.push_back(l);
          c.capacity_gbps.push_back(capacity_gbps[l]);
        }
        c.links.push_back(local_id[l]);
      }
      if (c.links.size() >= kAbsent)
        throw std::invalid_argument("flow solver: a component has more than 2^32 path entries");
      c.offset.push_back(static_cast<std::uint32_t>(c.links.size()));
      c.cap_gbps.push_back(flows.rate_cap_gbps(f));
      c.bytes.push_back(flows.bytes(f));
      c.rel_start_s.push_back(flows.start_s(f) - c.t0_s);
      c.global_flow.push_back(f);
    }
  }

  void make_room() {
    if (rate_cache.size() + sim_cache.size() >= options.max_cache_entries) {
      rate_cache.clear();
      sim_cache.clear();
    }
  }

  // Each link-connected component of `flows` (after group()), in turn: built in
  // canonical numbering, solved by solve(c, scratch) unless memoised under
  // its canonical key, and its result handed to apply(c, result).
  template <class Out, class Solve, class Apply>
  void for_each_component(std::span<const double> capacity_gbps, const FlowSet& flows, KeyKind kind,
                          std::unordered_map<std::uint64_t, CacheEntry<Out>>& cache, Out& scratch,
                          SolveStats& stats, Solve&& solve, Apply&& apply) {
    stats.components = grouping.num_components();
    for (std::size_t k = 0; k < grouping.num_components(); ++k) {
      const std::span<const std::size_t> members(grouping.flows.data() + grouping.start[k],
                                                 grouping.start[k + 1] - grouping.start[k]);
      build_component(capacity_gbps, flows, members);
      const Component& c = comp;
      const Out* result = nullptr;
      std::uint64_t h = 0;
      if (options.memoise) {
        build_key(c, kind, key);
        h = hash_key(key);
        auto it = cache.find(h);
        if (it != cache.end() && it->second.key == key) result = &it->second.out;
      }
      if (result != nullptr) {
        ++stats.cache_hits;
      } else {
        ++stats.components_solved;
        solve(c, scratch);
        result = &scratch;
        if (options.memoise && options.max_cache_entries > 0) {
          make_room();
          CacheEntry<Out>& e = cache[h];
          e.key = key;
          e.out = scratch;
        }
      }
      apply(c, *result);
    }
  }

  RateSolution solve_rates(std::span<const double> capacity_gbps, const FlowSet& flows) {
    validate(capacity_gbps, flows);
    const std::size_t F = flows.size();
    const std::size_t L = capacity_gbps.size();
    RateSolution out;
    out.rate_gbps.assign(F, 0.0);
    out.bottleneck_link.assign(F, kUnlimited);
    out.link_load_gbps.assign(L, 0.0);
    out.link_utilisation.assign(L, 0.0);

    group(L, flows);
    for (std::size_t f : grouping.trivial) {
      const double cap = flows.rate_cap_gbps(f);
      out.rate_gbps[f] = cap;
      out.bottleneck_link[f] = cap < kInf ? kLimitedByRateCap : kUnlimited;
    }
    for_each_component(
        capacity_gbps, flows, KeyKind::kRates, rate_cache, rate_scratch, out.stats,
        [&](const Component& c, RateOutput& r) {
          const std::size_t n = c.num_flows();
          all_flows.resize(n);
          std::iota(all_flows.begin(), all_flows.end(), 0u);
          r.rate_gbps.assign(n, 0.0);
          r.bottleneck.assign(n, kUnlimited);
          filler.fill(c, all_flows, r.rate_gbps.data(), r.bottleneck.data());
        },
        [&](const Component& c, const RateOutput& r) {
          for (std::size_t i = 0; i < c.num_flows(); ++i) {
            const std::size_t f = c.global_flow[i];
            out.rate_gbps[f] = r.rate_gbps[i];
            out.bottleneck_link[f] = to_global(c, r.bottleneck[i]);
          }
        });
    for (std::size_t f = 0; f < F; ++f) {
      const double r = out.rate_gbps[f];
      if (r > 0.0 && r < kInf)
        for (LinkId l : flows.path(f)) out.link_load_gbps[l] += r;
    }
    for (std::size_t l = 0; l < L; ++l)
      if (capacity_gbps[l] > 0.0) out.link_utilisation[l] = out.link_load_gbps[l] / capacity_gbps[l];
    return out;
  }

  CompletionResult simulate_completion(std::span<const double> capacity_gbps, const FlowSet& flows) {
    validate(capacity_gbps, flows);
    const std::size_t F = flows.size();
    const std::size_t L = capacity_gbps.size();
    CompletionResult out;
    out.completion_s.assign(F, kInf);
    out.bottleneck_link.assign(F, kUnlimited);
    out.link_bytes.assign(L, 0.0);
    out.link_mean_utilisation.assign(L, 0.0);
    out.link_peak_utilisation.assign(L, 0.0);

    group(L, flows);
    for (std::size_t f : grouping.trivial) {
      const double cap = flows.rate_cap_gbps(f);
      const double bytes = flows.bytes(f);
      if (bytes <= 0.0 || cap == kInf) {
        out.completion_s[f] = flows.start_s(f);
      } else if (cap > 0.0) {
        out.completion_s[f] = flows.start_s(f) + transfer_time_s(bytes, cap);
      }
      out.bottleneck_link[f] = cap < kInf ? kLimitedByRateCap : kUnlimited;
    }
    for_each_component(
        capacity_gbps, flows, KeyKind::kCompletion, sim_cache, sim_scratch, out.stats,
        [&](const Component& c, SimOutput& r) { simulator.run(c, options.event_rel_tol, filler, r); },
        [&](const Component& c, const SimOutput& r) {
          out.stats.events += r.events;
          for (std::size_t i = 0; i < c.num_flows(); ++i) {
            const std::size_t f = c.global_flow[i];
            out.completion_s[f] = c.t0_s + r.completion_rel_s[i];
            out.bottleneck_link[f] = to_global(c, r.bottleneck[i]);
          }
          for (std::size_t l = 0; l < c.num_links(); ++l) {
            const LinkId g = c.global_link[l];
            out.link_bytes[g] = r.link_bytes[l];
            out.link_peak_utilisation[g] = r.link_peak_utilisation[l];
          }
        });
    double first = kInf, last = -kInf;
    for (std::size_t f = 0; f < F; ++f) {
      first = std::min(first, flows.start_s(f));
      if (out.completion_s[f] < kInf) last = std::max(last, out.completion_s[f]);
    }
    out.first_start_s = F == 0 ? 0.0 : first;
    out.makespan_s = last == -kInf ? out.first_start_s : last;
    const double window_s = out.makespan_s - out.first_start_s;
    if (window_s > 0.0)
      for (std::size_t l = 0; l < L; ++l)
        if (capacity_gbps[l] > 0.0)
          out.link_mean_utilisation[l] =
              out.link_bytes[l] * kBitsPerByte / (capacity_gbps[l] * kBitsPerGbit * window_s);
    return out;
  }
};

FlowSolver::FlowSolver(FlowSolverOptions options) : impl_(std::make_unique<Impl>(options)) {}
FlowSolver::~FlowSolver() = default;
FlowSolver::FlowSolver(FlowSolver&&) noexcept = default;
FlowSolver& FlowSolver::operator=(FlowSolver&&) noexcept = default;

RateSolution FlowSolver::solve_rates(std::span<const double> capacity_gbps, const FlowSet& flows) {
  return impl_->solve_rates(capacity_gbps, flows);
}

CompletionResult FlowSolver::simulate_completion(std::span<const double> capacity_gbps,
                                                 const FlowSet& flows) {
  return impl_->simulate_completion(capacity_gbps, flows);
}

void FlowSolver::clear_cache() {
  impl_->rate_cache.clear();
  impl_->sim_cache.clear();
}

std::size_t FlowSolver::cache_entries() const {
  return impl_->rate_cache.size() + impl_->sim_cache.size();
}

const FlowSolverOptions& FlowSolver::options() const { return impl_->options; }

RateSolution solve_rates(std::span<const double> capacity_gbps, const FlowSet& flows) {
  FlowSolver solver;
  return solver.solve_rates(capacity_gbps, flows);
}

CompletionResult simulate_completion(std::span<const double> capacity_gbps, const FlowSet& flows) {
  FlowSolver solver;
  return solver.simulate_completion(capacity_gbps, flows);
}

}  // namespace megascale::network
