// robust/monitored_comm.cc: see monitored_comm.h.
#include "robust/monitored_comm.h"

#include <time.h>

#include <chrono>

namespace megascale::robust {
double thread_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Times a point-to-point wait and records it as the rank's current operation.
class MonitoredRequest final : public engine::Request {
 public:
  MonitoredRequest(std::unique_ptr<engine::Request> inner, std::shared_ptr<RankMonitor> monitor, const char* op,
                   std::string group, int peer, uint64_t sent, uint64_t recv)
      : inner_(std::move(inner)), monitor_(std::move(monitor)), op_(op), group_(std::move(group)), peer_(peer),
        sent_(sent), recv_(recv) {}
  void wait() override {
    if (waited_) return;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_s();
    monitor_->enter(op_, group_, 0, peer_);
    monitor_->posted();
    inner_->wait();
    monitor_->done(since(t0), thread_cpu_s() - c0, sent_, recv_);
    waited_ = true;
  }
  bool done() const override { return inner_->done(); }

 private:
  std::unique_ptr<engine::Request> inner_;
  std::shared_ptr<RankMonitor> monitor_;
  const char* op_;
  std::string group_;
  int peer_;
  uint64_t sent_, recv_;
  bool waited_ = false;
};

}  // namespace

RankMonitor::Snapshot RankMonitor::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return s_;
}

std::string RankMonitor::next_group_name(const std::vector<int>& members) {
  std::string name = "c";
  name += std::to_string(groups_made_++);
  name += "[";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0) name += ",";
    name += std::to_string(members[i]);
  }
  return name + "]";
}

void RankMonitor::enter(const std::string& op, const std::string& group, int64_t seq, int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.current = {op, group, seq, "entered", peer};
  if (seq > 0) s_.seq_by_group[group] = seq;
}

void RankMonitor::posted() {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.current.state = "posted";
}

void RankMonitor::done(double seconds, double cpu_seconds, uint64_t sent, uint64_t recv) {
  std::lock_guard<std::mutex> lock(mutex_);
  s_.current = CollectiveState{};
  s_.comm_s += seconds;
  s_.comm_cpu_s += cpu_seconds;
  s_.bytes_sent += sent;
  s_.bytes_recv += recv;
}

MonitoredComm::MonitoredComm(engine::Comm& inner, std::shared_ptr<RankMonitor> monitor, std::vector<int> members)
    : inner_(&inner), monitor_(std::move(monitor)), members_(std::move(members)) {
  group_ = monitor_->next_group_name(members_);
}

MonitoredComm::MonitoredComm(std::unique_ptr<engine::Comm> inner, std::shared_ptr<RankMonitor> monitor,
                             std::vector<int> members)
    : owned_(std::move(inner)), inner_(owned_.get()), monitor_(std::move(monitor)), members_(std::move(members)) {
  group_ = monitor_->next_group_name(members_);
}

template <typename F>
void MonitoredComm::collective(const char* op, uint64_t sent, uint64_t recv, F&& fn) {
  if (monitor_->before_enter) monitor_->before_enter();
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = thread_cpu_s();
  monitor_->enter(op, group_, ++seq_, -1);
  if (monitor_->after_enter) monitor_->after_enter();
  monitor_->posted();
  fn();
  monitor_->done(since(t0), thread_cpu_s() - c0, sent, recv);
}

void MonitoredComm::all_reduce_sum(float* data, size_t count) {
  const uint64_t bytes = count * sizeof(float);
  collective("all_reduce", bytes, bytes, [&] { inner_->all_reduce_sum(data, count); });
}

void MonitoredComm::all_gather(const float* send, size_t count, float* recv) {
  const uint64_t bytes = count * sizeof(float);
  collective("all_gather", bytes, bytes * static_cast<uint64_t>(size()), [&] { inner_->all_gather(send, count, recv); });
}

void MonitoredComm::reduce_scatter_sum(const float* send, size_t count, float* recv) {
  const uint64_t bytes = count * sizeof(float);
  collective("reduce_scatter", bytes * static_cast<uint64_t>(size()), bytes,
             [&] { inner_->reduce_scatter_sum(send, count, recv); });
}

void MonitoredComm::broadcast(float* data, size_t count, int root) {
  const uint64_t bytes = count * sizeof(float);
  const bool is_root = rank() == root;
  collective("broadcast", is_root ? bytes : 0, is_root ? 0 : bytes, [&] { inner_->broadcast(data, count, root); });
}

std::unique_ptr<engine::Request> MonitoredComm::isend(const float* data, size_t count, int peer, int tag) {
  return std::make_unique<MonitoredRequest>(inner_->isend(data, count, peer, tag), monitor_, "wait_send", group_,
                                            members_.at(static_cast<size_t>(peer)), count * sizeof(float), 0);
}

std::unique_ptr<engine::Request> MonitoredComm::irecv(float* data, size_t count, int peer, int tag) {
  return std::make_unique<MonitoredRequest>(inner_->irecv(data, count, peer, tag), monitor_, "wait_recv", group_,
                                            members_.at(static_cast<size_t>(peer)), 0, count * sizeof(float));
}

void MonitoredComm::barrier() {
  collective("barrier", 0, 0, [&] { inner_->barrier(); });
}

std::unique_ptr<engine::Comm> MonitoredComm::split(int color, int key) {
  std::unique_ptr<engine::Comm> child = inner_->split(color, key);
  if (!child) {
    monitor_->next_group_name({});  // keep the creation count equal on every rank
    return nullptr;
  }
  // The members' world ranks, through the child itself (collective over it).
  const float mine = static_cast<float>(monitor_->world_rank());
  std::vector<float> all(static_cast<size_t>(child->size()));
  child->all_gather(&mine, 1, all.data());
  std::vector<int> members;
  for (float f : all) members.push_back(static_cast<int>(f));
  return std::make_unique<MonitoredComm>(std::move(child), monitor_, std::move(members));
}

}  // namespace megascale::robust
