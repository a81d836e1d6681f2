// engine/comm_threads.cc: shared-memory rendezvous collectives and mailboxes.
#include "engine/comm_threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>

namespace megascale::engine {
namespace {

using Clock = std::chrono::steady_clock;

// State shared by every group of one world: the abort flag and the timeout.
struct World {
  std::atomic<bool> aborted{false};
  double timeout_s = 120.0;
};

enum class OpId : int { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kBarrier, kSplit };

const char* op_name(OpId op) {
  switch (op) {
    case OpId::kAllReduce: return "all_reduce_sum";
    case OpId::kAllGather: return "all_gather";
    case OpId::kReduceScatter: return "reduce_scatter_sum";
    case OpId::kBroadcast: return "broadcast";
    case OpId::kBarrier: return "barrier";
    case OpId::kSplit: return "split";
  }
  return "?";
}

// One point-to-point channel (source, destination, tag): messages numbered in
// send order, receives numbered in posting order; receive k takes message k.
struct Channel {
  uint64_t sent = 0;
  uint64_t posted = 0;
  std::map<uint64_t, std::vector<float>> messages;
};

// The state of one communicator, shared by its members.
struct Group {
  Group(std::shared_ptr<World> w, int n)
      : world(std::move(w)), size(n), ptrs(n), counts(n), ops(n), colors(n), keys(n),
        created(n) {}

  std::shared_ptr<World> world;
  const int size;

  std::mutex mu;
  std::condition_variable cv;
  // Barrier: `arrived` ranks of generation `generation`.
  int arrived = 0;
  uint64_t generation = 0;
  // Rendezvous slots, one per rank.
  std::vector<const float*> ptrs;
  std::vector<size_t> counts;
  std::vector<OpId> ops;
  std::vector<int> colors, keys;
  std::vector<std::shared_ptr<Group>> created;  // split: new group by leader rank
  // Point-to-point.
  std::map<std::tuple<int, int, int>, Channel> channels;

  // Waits under `lk` until pred() holds; throws on abort or timeout.
  template <typename Pred>
  void wait(std::unique_lock<std::mutex>& lk, Pred pred, const char* what, int rank) {
    const auto deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(world->timeout_s));
    while (!pred()) {
      if (world->aborted.load()) {
        throw CommAborted(std::string("threads comm: ") + what + " on rank " +
                          std::to_string(rank) + " aborted: another rank failed");
      }
      if (Clock::now() > deadline) {
        throw std::runtime_error(std::string("threads comm: ") + what + " on rank " +
                                 std::to_string(rank) + " timed out after " +
                                 std::to_string(world->timeout_s) + " s (deadlock?)");
      }
      cv.wait_for(lk, std::chrono::milliseconds(20));
    }
  }

  void barrier(int rank, const char* what) {
    std::unique_lock<std::mutex> lk(mu);
    const uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    wait(lk, [&] { return generation != gen; }, what, rank);
  }

  // Posts this rank's buffer and waits for all; checks every rank called the
  // same operation with the same count.
  void post(int rank, OpId op, const float* ptr, size_t count) {
    {
      std::lock_guard<std::mutex> lk(mu);
      ptrs[rank] = ptr;
      counts[rank] = count;
      ops[rank] = op;
    }
    barrier(rank, op_name(op));
    std::lock_guard<std::mutex> lk(mu);
    for (int r = 0; r < size; ++r) {
      if (ops[r] != op || counts[r] != count) {
        throw std::runtime_error(
            std::string("threads comm: mismatched collectives: rank ") + std::to_string(rank) +
            " called " + op_name(op) + "(" + std::to_string(count) + ") but rank " +
            std::to_string(r) + " called " + op_name(ops[r]) + "(" + std::to_string(counts[r]) +
            ")");
      }
    }
  }
};

class ThreadRequest final : public Request {
 public:
  // A completed request (sends are buffered).
  ThreadRequest() : done_(true) {}
  ThreadRequest(std::shared_ptr<Group> g, std::tuple<int, int, int> key, uint64_t ticket,
                float* data, size_t count, int rank)
      : group_(std::move(g)), key_(key), ticket_(ticket), data_(data), count_(count),
        rank_(rank) {}

  void wait() override {
    if (done_) return;
    std::unique_lock<std::mutex> lk(group_->mu);
    Channel& ch = group_->channels[key_];
    group_->wait(lk, [&] { return ch.messages.count(ticket_) > 0; }, "irecv wait", rank_);
    auto it = ch.messages.find(ticket_);
    if (it->second.size() != count_) {
      const size_t got = it->second.size();
      ch.messages.erase(it);
      done_ = true;
      throw std::runtime_error("threads comm: irecv of " + std::to_string(count_) +
                               " floats from rank " + std::to_string(std::get<0>(key_)) +
                               " tag " + std::to_string(std::get<2>(key_)) + " got " +
                               std::to_string(got));
    }
    if (count_ > 0) std::memcpy(data_, it->second.data(), count_ * sizeof(float));
    ch.messages.erase(it);
    done_ = true;
  }

  bool done() const override {
    if (done_) return true;
    std::lock_guard<std::mutex> lk(group_->mu);
    auto it = group_->channels.find(key_);
    return it != group_->channels.end() && it->second.messages.count(ticket_) > 0;
  }

 private:
  std::shared_ptr<Group> group_;
  std::tuple<int, int, int> key_{};
  uint64_t ticket_ = 0;
  float* data_ = nullptr;
  size_t count_ = 0;
  int rank_ = 0;
  bool done_ = false;
};

class ThreadComm final : public Comm {
 public:
  ThreadComm(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return g_->size; }

  void all_reduce_sum(float* data, size_t count) override {
    g_->post(rank_, OpId::kAllReduce, data, count);
    std::vector<float> sum(count);
    sum_blocks(0, count, sum.data());
    g_->barrier(rank_, "all_reduce_sum");
    if (count) std::memcpy(data, sum.data(), count * sizeof(float));
  }

  void all_gather(const float* send, size_t count, float* recv) override {
    g_->post(rank_, OpId::kAllGather, send, count);
    std::vector<float> all(count * g_->size);
    for (int r = 0; r < g_->size; ++r) {
      if (count) std::memcpy(all.data() + r * count, g_->ptrs[r], count * sizeof(float));
    }
    g_->barrier(rank_, "all_gather");
    if (!all.empty()) std::memcpy(recv, all.data(), all.size() * sizeof(float));
  }

  void reduce_scatter_sum(const float* send, size_t count, float* recv) override {
    g_->post(rank_, OpId::kReduceScatter, send, count);
    std::vector<float> block(count);
    sum_blocks(static_cast<size_t>(rank_) * count, count, block.data());
    g_->barrier(rank_, "reduce_scatter_sum");
    if (count) std::memcpy(recv, block.data(), count * sizeof(float));
  }

  void broadcast(float* data, size_t count, int root) override {
    if (root < 0 || root >= g_->size) {
      throw std::runtime_error("threads comm: broadcast root " + std::to_string(root) +
                               " out of range");
    }
    g_->post(rank_, OpId::kBroadcast, data, count);
    if (rank_ != root && count) std::memcpy(data, g_->ptrs[root], count * sizeof(float));
    g_->barrier(rank_, "broadcast");
  }

  std::unique_ptr<Request> isend(const float* data, size_t count, int peer, int tag) override {
    check_peer(peer);
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      Channel& ch = g_->channels[{rank_, peer, tag}];
      ch.messages.emplace(ch.sent++, std::vector<float>(data, data + count));
    }
    g_->cv.notify_all();
    return std::make_unique<ThreadRequest>();
  }

  std::unique_ptr<Request> irecv(float* data, size_t count, int peer, int tag) override {
    check_peer(peer);
    std::lock_guard<std::mutex> lk(g_->mu);
    const std::tuple<int, int, int> key{peer, rank_, tag};
    Channel& ch = g_->channels[key];
    return std::make_unique<ThreadRequest>(g_, key, ch.posted++, data, count, rank_);
  }

  void barrier() override {
    g_->post(rank_, OpId::kBarrier, nullptr, 0);
    g_->barrier(rank_, "barrier");
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      g_->colors[rank_] = color;
      g_->keys[rank_] = key;
    }
    g_->post(rank_, OpId::kSplit, nullptr, 0);
    // Members of my color ordered by (key, old rank); the first one creates the group.
    std::vector<std::pair<int, int>> members;
    {
      std::lock_guard<std::mutex> lk(g_->mu);
      for (int r = 0; r < g_->size; ++r) {
        if (color >= 0 && g_->colors[r] == color) members.emplace_back(g_->keys[r], r);
      }
    }
    std::sort(members.begin(), members.end());
    int new_rank = -1;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i].second == rank_) new_rank = static_cast<int>(i);
    }
    if (new_rank == 0) {
      std::lock_guard<std::mutex> lk(g_->mu);
      g_->created[rank_] = std::make_shared<Group>(g_->world, static_cast<int>(members.size()));
    }
    g_->barrier(rank_, "split");
    std::shared_ptr<Group> mine;
    if (color >= 0) {
      std::lock_guard<std::mutex> lk(g_->mu);
      mine = g_->created[members[0].second];
    }
    g_->barrier(rank_, "split");
    if (new_rank == 0) {
      std::lock_guard<std::mutex> lk(g_->mu);
      g_->created[rank_].reset();
    }
    if (color < 0) return nullptr;
    return std::make_unique<ThreadComm>(std::move(mine), new_rank);
  }

 private:
  void check_peer(int peer) const {
    if (peer < 0 || peer >= g_->size) {
      throw std::runtime_error("threads comm: peer " + std::to_string(peer) +
                               " out of range for size " + std::to_string(g_->size));
    }
  }

  // out[i] = ((x_0 + x_1) + x_2) + ... at offset + i of every rank's posted buffer.
  void sum_blocks(size_t offset, size_t count, float* out) const {
    if (count == 0) return;
    std::memcpy(out, g_->ptrs[0] + offset, count * sizeof(float));
    for (int r = 1; r < g_->size; ++r) {
      const float* x = g_->ptrs[r] + offset;
      for (size_t i = 0; i < count; ++i) out[i] += x[i];
    }
  }

  std::shared_ptr<Group> g_;
  int rank_;
};

// A world of n ranks and its flag.
std::vector<std::unique_ptr<Comm>> make_world(int n, double timeout_s,
                                              std::shared_ptr<World>* world_out) {
  if (n < 1) throw std::invalid_argument("make_thread_comms: n must be >= 1");
  auto world = std::make_shared<World>();
  world->timeout_s = timeout_s;
  auto group = std::make_shared<Group>(world, n);
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(std::make_unique<ThreadComm>(group, r));
  if (world_out != nullptr) *world_out = std::move(world);
  return comms;
}

}  // namespace

std::vector<std::unique_ptr<Comm>> make_thread_comms(int n, double timeout_s) {
  return make_world(n, timeout_s, nullptr);
}

void run_on_threads(int n, const std::function<void(Comm& world)>& fn, double timeout_s) {
  std::shared_ptr<World> world;
  std::vector<std::unique_ptr<Comm>> comms = make_world(n, timeout_s, &world);
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*comms[r]);
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!first) first = std::current_exception();
        world->aborted.store(true);
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace megascale::engine
