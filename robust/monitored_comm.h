// robust/monitored_comm.h: a Comm (engine/comm.h) that records, for the rank's
// heartbeat, which collective the rank is in and how far each of its groups
// got, and where the rank-side faults (robust/fault_injection.h) take effect.
//
// defines: CollectiveState, RankMonitor, MonitoredComm
//
// Every communicator the trainer makes from the world (split) is monitored
// too. A group is named "c<k>[r0,r1,...]": k counts the communicators this
// rank made in creation order (the same on every rank: splits are
// collective), then the world ranks of its members. For each collective the
// monitor records, in order: entered (op, group, sequence number = how many
// collectives this rank has entered on that group), posted (handed to MPI),
// done. A rank waiting in collective s of group G whose peer has entered fewer
// than s collectives of G, or entered s but not posted it, waits on that peer:
// the wait-for edges robust/diagnosis.h follows. Point-to-point waits record
// the peer's world rank. Traffic counters count the payload bytes handed to the
// transport (not wire bytes, which depend on MPI's algorithm).
//
// Thread-safety: the monitor is read by the heartbeat thread under its mutex;
// a MonitoredComm is used by the rank's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/comm.h"

namespace megascale::robust {

struct CollectiveState {
  std::string op;       // "all_reduce", "all_gather", ..., "wait_recv", "wait_send"; "" when idle
  std::string group;    // "c0[0,1]"
  int64_t seq = 0;      // sequence number on that group (1-based)
  std::string state = "idle";  // idle | entered | posted
  int peer = -1;        // point-to-point: the peer's world rank
};

// Shared by every MonitoredComm of one rank.
class RankMonitor {
 public:
  explicit RankMonitor(int world_rank) : world_rank_(world_rank) {}

  int world_rank() const { return world_rank_; }
  // Hooks (set before training; called on the rank's thread): before a
  // collective is entered, and after it is entered but before it is posted.
  // They may block forever or end the process (faults).
  std::function<void()> before_enter, after_enter;

  struct Snapshot {
    CollectiveState current;
    std::map<std::string, int64_t> seq_by_group;
    double comm_s = 0;
    double comm_cpu_s = 0;  // the rank thread's CPU time inside communication
    uint64_t bytes_sent = 0, bytes_recv = 0;
  };
  Snapshot snapshot() const;

  // Used by MonitoredComm.
  std::string next_group_name(const std::vector<int>& members);
  void enter(const std::string& op, const std::string& group, int64_t seq, int peer);
  void posted();
  void done(double seconds, double cpu_seconds, uint64_t sent, uint64_t recv);

 private:
  int world_rank_;
  int groups_made_ = 0;
  mutable std::mutex mutex_;
  Snapshot s_;
};

// CPU time of the calling thread, seconds (CLOCK_THREAD_CPUTIME_ID).
double thread_cpu_s();

class MonitoredComm final : public engine::Comm {
 public:
  // `members`: the world rank of each rank of `inner`, in its rank order.
  MonitoredComm(engine::Comm& inner, std::shared_ptr<RankMonitor> monitor, std::vector<int> members);
  MonitoredComm(std::unique_ptr<engine::Comm> inner, std::shared_ptr<RankMonitor> monitor,
                std::vector<int> members);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void all_reduce_sum(float* data, size_t count) override;
  void all_gather(const float* send, size_t count, float* recv) override;
  void reduce_scatter_sum(const float* send, size_t count, float* recv) override;
  void broadcast(float* data, size_t count, int root) override;
  std::unique_ptr<engine::Request> isend(const float* data, size_t count, int peer, int tag) override;
  std::unique_ptr<engine::Request> irecv(float* data, size_t count, int peer, int tag) override;
  void barrier() override;
  std::unique_ptr<engine::Comm> split(int color, int key) override;

  const std::string& group() const { return group_; }

 private:
  template <typename F>
  void collective(const char* op, uint64_t sent, uint64_t recv, F&& fn);

  std::unique_ptr<engine::Comm> owned_;
  engine::Comm* inner_;
  std::shared_ptr<RankMonitor> monitor_;
  std::vector<int> members_;
  std::string group_;
  int64_t seq_ = 0;
};

}  // namespace megascale::robust
