// sim/event_engine.cc: see event_engine.h.
#include "sim/event_engine.h"

#include <simgrid/Exception.hpp>

#include <simgrid/s4u.hpp>
#include <simgrid/simix.hpp>  // simcall_answered: several s4u calls in one simcall

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/sanitizer.h"

namespace megascale::sim {
namespace {

namespace sg = simgrid::s4u;
using model::Op;
using model::OpKind;
using model::Stream;

constexpr int kStreams = static_cast<int>(Stream::kDpComm) + 1;

std::string describe(const model::Schedule& s, int replica, int rank, int index) {
  const Op& op = s.ranks[rank].ops[index];
  return "replica " + std::to_string(replica) + " pp rank " + std::to_string(rank) + " op " +
         std::to_string(index) + " (" + model::to_string(op.kind) + " mb " +
         std::to_string(op.microbatch) + " chunk " + std::to_string(op.chunk) + ")";
}

// Rendezvous of one DP op (rank, index) across replicas.
struct Rendezvous {
  int arrived = 0;
  bool done = false;
  std::vector<int> waiters;  // actor ids
};

// Everything the actors of one run share. Ops are numbered
// id = replica * ops_per_replica + rank_offset[rank] + index.
class Run {
 public:
  // `tx[replica * ranks + rank]` / `rx[...]`: the sending and receiving sides of
  // that rank's NICs, or empty when NICs are not shared.
  // `inline_recv_streams`: resolve the receives of kPpRecv streams that hold
  // nothing else in the actors that need them, instead of giving those
  // streams actors of their own (see resolve_recv).
  Run(const model::Schedule& s, int replicas, std::vector<double> duration_s, std::vector<sg::Host*> tx,
      std::vector<sg::Host*> rx, bool inline_recv_streams)
      : s_(s), replicas_(replicas), duration_s_(std::move(duration_s)), tx_(std::move(tx)), rx_(std::move(rx)) {
    const int ranks = static_cast<int>(s.ranks.size());
    rank_offset_.assign(ranks + 1, 0);
    for (int r = 0; r < ranks; ++r)
      rank_offset_[r + 1] = rank_offset_[r] + static_cast<int64_t>(s.ranks[r].ops.size());
    per_replica_ = rank_offset_[ranks];
    inline_stream_.assign(ranks, false);
    slot_rank_.assign(per_replica_, 0);
    prev_in_stream_.assign(per_replica_, -1);
    inline_recv_.assign(per_replica_, 0);
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Op>& ops = s.ranks[r].ops;
      std::array<int, kStreams> last;
      last.fill(-1);
      bool recv_stream_only_recvs = true;
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        const int st = static_cast<int>(ops[i].stream);
        slot_rank_[rank_offset_[r] + i] = r;
        prev_in_stream_[rank_offset_[r] + i] = last[st];
        last[st] = i;
        if (ops[i].stream == Stream::kPpRecv && !model::is_recv(ops[i].kind)) recv_stream_only_recvs = false;
      }
      inline_stream_[r] = inline_recv_streams && recv_stream_only_recvs;
      if (inline_stream_[r])
        for (int i = 0; i < static_cast<int>(ops.size()); ++i)
          if (ops[i].stream == Stream::kPpRecv) inline_recv_[rank_offset_[r] + i] = 1;
    }
    const int64_t total = per_replica_ * replicas;
    start_s_.assign(total, 0.0);
    end_s_.assign(total, 0.0);
    done_.assign(total, 0);
    started_.assign(total, 0);
    waiters_.resize(total);
    rendezvous_.resize(per_replica_);
  }

  int64_t id(int replica, int rank, int index) const {
    return replica * per_replica_ + rank_offset_[rank] + index;
  }
  double start_s(int64_t id) const { return start_s_[id]; }
  double end_s(int64_t id) const { return end_s_[id]; }
  OpState state(int64_t id) const {
    return done_[id] ? OpState::kEnded : started_[id] ? OpState::kStarted : OpState::kNotStarted;
  }
  bool all_done() const {
    for (uint8_t d : done_)
      if (!d) return false;
    return true;
  }
  int64_t activities() const { return activities_; }
  // Whether rank `rank`'s kPpRecv stream is resolved inline (it gets no actor).
  bool recv_stream_inline(int rank) const { return inline_stream_[rank]; }

  // After the engine has run: the inline receives nobody waited for (their
  // consumers are all done, or they have none), in list order, so that each
  // finds its stream predecessor resolved. Nothing blocks: every send has ended.
  void resolve_remaining_recvs() {
    for (int64_t op = 0; op < per_replica_ * replicas_; ++op)
      if (inline_recv_[op % per_replica_] && !done_[op]) resolve_recv(-1, op);
  }
  sg::Host* tx_host(size_t index) const { return tx_.empty() ? nullptr : tx_[index]; }
  sg::Host* rx_host(size_t index) const { return rx_.empty() ? nullptr : rx_[index]; }

  // Times are reported relative to the clock when this is called.
  void set_origin() { origin_s_ = sg::Engine::get_clock(); }

  // Registers one actor (its wake-up semaphore); returns its id.
  int add_actor() {
    wake_.push_back(nullptr);  // set by the actor itself the first time it waits
    return static_cast<int>(wake_.size()) - 1;
  }

  // The body of the actor of (replica, rank, stream): its ops in list order.
  void execute(int actor, int replica, int rank, const std::vector<int>& ops) {
    for (int index : ops) {
      const Op& op = s_.ranks[rank].ops[index];
      const int64_t me = id(replica, rank, index);
      for (int dep : op.deps) wait_for(actor, id(replica, rank, dep));
      start_s_[me] = now_s();
      started_[me] = 1;
      if (model::is_recv(op.kind)) {
        wait_for(actor, id(replica, op.peer, op.match));
      } else if (model::is_dp_collective(op.kind) && replicas_ > 1) {
        Rendezvous& rdv = rendezvous_[rank_offset_[rank] + index];
        if (++rdv.arrived < replicas_) {
          while (!rdv.done) {
            rdv.waiters.push_back(actor);
            suspend(actor);
          }
        } else {
          transfer(replica, rank, rank, duration_s_[me]);
          rdv.done = true;
          for (int w : rdv.waiters) wake_[w]->resume();
          rdv.waiters.clear();
        }
      } else if (model::is_dp_collective(op.kind)) {
        transfer(replica, rank, rank, duration_s_[me]);  // a ring: sends and receives on its own NICs
      } else if (model::is_send(op.kind)) {
        transfer(replica, rank, op.peer, duration_s_[me]);
      } else {
        sleep(duration_s_[me]);
      }
      finish(me);
    }
  }

 private:
  double now_s() const { return sg::Engine::get_clock() - origin_s_; }

  void sleep(double d) {
    if (d > 0) {
      ++activities_;
      sg::this_actor::sleep_for(d);
    }
  }

  // A Send or DP collective: exclusive-NIC time `d`, shared with whatever else
  // runs on the same NICs when NICs are shared: the sending side of `rank`'s
  // NICs and the receiving side of `to`'s (a DP collective's ring: its own),
  // both loaded at once; the transfer ends when both sides have moved it. NICs
  // are full duplex, so a rank's sends and receives do not compete; two
  // transfers into one rank (a pipeline receive under a DP collective, two
  // senders) do.
  void transfer(int replica, int rank, int to, double d) {
    if (tx_.empty() || d <= 0) {
      sleep(d);
      return;
    }
    ++activities_;
    const size_t base = static_cast<size_t>(replica) * s_.ranks.size();
    const double work = d * kNicWorkPerS;
    sg::Host* const from_host = tx_[base + rank];
    sg::Host* const to_host = rx_[base + to];
    // Created here, so that they belong to this actor (SimGrid cancels an
    // actor's executions when it dies), and set up and started in one simcall:
    // in maestro context the s4u calls run directly, where from an actor
    // set_flops_amount, set_host and start are each a simcall of their own (a
    // switch to maestro and back). Same executions, started at the same time;
    // this actor then blocks until they end, so the actors running at this
    // simulated time still run in the same order (unlike batching resumes,
    // see finish()).
    sg::ExecPtr out = sg::Exec::init();
    sg::ExecPtr in = sg::Exec::init();
    try {
      simgrid::kernel::actor::simcall_answered([&] {
        out->set_flops_amount(work);
        out->set_host(from_host);
        in->set_flops_amount(work);
        in->set_host(to_host);
        out->start();
        in->start();
      });
      // Activity::wait on a running execution also starts a "synchro" (an
      // infinite sleep of the waiting actor's host, another CPU action, so that
      // a failure of that host ends the wait); wait_any with no timeout only
      // registers the waiter. This actor's host failing kills this actor anyway
      // (Host::turn_off), and the executions fail as before when their NIC
      // hosts go down. Same completion, same times, one action fewer per wait.
      wait_one(out);
      wait_one(in);
    } catch (const simgrid::HostFailureException&) {
      // The receiver's host failed (an injected failure, sim/failure_sim.h): the
      // transfer never completes and this stream hangs, as an RDMA write to a
      // dead node does, until the step is declared stuck.
      sg::Semaphore::create(0)->acquire();
    }
  }

  static void wait_one(const sg::ExecPtr& exec) {
    const std::vector<sg::ActivityPtr> one{exec};
    sg::Activity::wait_any(one);
  }

  void wait_for(int actor, int64_t op) {
    if (!done_[op] && inline_recv_[op % per_replica_]) resolve_recv(actor, op);
    while (!done_[op]) {
      if (actor < 0) throw std::logic_error("run_events: an inline receive waits after the run (internal error)");
      waiters_[op].push_back(actor);
      suspend(actor);
    }
  }

  // A receive of an inline kPpRecv stream, resolved by the actor that needs
  // it, with the times its own actor would have given it: it starts when its
  // stream predecessor and its deps have ended (or at the origin) and ends when
  // its matching send has ended, or at its start if that is later. The actor
  // blocks on what is missing, as it would on the receive. Two actors may
  // resolve the same receive at once; both compute the same times. This saves
  // one actor per rank and one suspension per receive (a third of the
  // suspensions of a pp_overlap schedule): ops, times and NIC sharing are the
  // same (tests/sim/event_engine_test.cc compares both ways).
  void resolve_recv(int actor, int64_t op) {
    const int64_t slot = op % per_replica_;
    const int replica = static_cast<int>(op / per_replica_);
    const int rank = slot_rank_[slot];
    const Op& o = s_.ranks[rank].ops[slot - rank_offset_[rank]];
    double start = 0;
    if (prev_in_stream_[slot] >= 0) {
      const int64_t prev = id(replica, rank, prev_in_stream_[slot]);
      wait_for(actor, prev);
      start = std::max(start, end_s_[prev]);
    }
    for (int dep : o.deps) {
      const int64_t d = id(replica, rank, dep);
      wait_for(actor, d);
      start = std::max(start, end_s_[d]);
    }
    if (done_[op]) return;
    start_s_[op] = start;
    started_[op] = 1;
    const int64_t send = id(replica, o.peer, o.match);
    wait_for(actor, send);
    if (done_[op]) return;
    end_s_[op] = std::max(start, end_s_[send]);
    done_[op] = 1;
  }

  // The calling actor `actor` waits until an op it registered on ends: it
  // suspends itself, and finish() resumes it. Nothing runs between its
  // registering and its suspending (SimGrid schedules actors one at a time and
  // neither call yields), so a resume cannot come first. Suspend/resume is a
  // simcall with no activity; one s4u::Semaphore per actor, used before,
  // cost ~15% more CPU on the 12,288-GPU scenario (sim/README.md).
  void suspend(int actor) {
    if (!wake_[actor]) wake_[actor] = sg::Actor::self();
    sg::this_actor::suspend();
  }

  // One Actor::resume (one simcall) per waiter, deliberately: batching them in
  // one simcall saves switches but changes the order in which actors that
  // wake at the same simulated time run, and with it which replica arrives
  // last at a DP rendezvous when several arrive at once (the one whose NICs
  // the collective loads): measured, 4 NeMo fp8 scenarios moved by <= 0.05%.
  void finish(int64_t op) {
    end_s_[op] = now_s();
    done_[op] = 1;
    for (int w : waiters_[op]) wake_[w]->resume();
    waiters_[op].clear();
  }

  const model::Schedule& s_;
  int replicas_;
  std::vector<double> duration_s_;
  std::vector<sg::Host*> tx_, rx_;
  std::vector<int64_t> rank_offset_;
  std::vector<int> slot_rank_;         // per op of a replica: its rank
  std::vector<int> prev_in_stream_;    // per op of a replica: the previous op of its stream, or -1
  std::vector<uint8_t> inline_recv_;   // per op of a replica: a receive resolved inline
  std::vector<bool> inline_stream_;    // per rank: its kPpRecv stream is resolved inline
  int64_t per_replica_ = 0;
  std::vector<double> start_s_, end_s_;
  std::vector<uint8_t> done_, started_;
  std::vector<std::vector<int>> waiters_;
  std::vector<Rendezvous> rendezvous_;
  std::vector<sg::ActorPtr> wake_;  // per actor id: the actor, once it has waited
  double origin_s_ = 0;
  int64_t activities_ = 0;
};

// A fresh SimGrid engine for one run (see the header: one at a time per
// process, clock not reset, no hosts added after sealing).
std::unique_ptr<sg::Engine> new_engine() {
  // Only critical messages; the kernel's deadlock report (expected after an
  // injected host failure, and otherwise caught by the all-done check) to /dev/null.
  // The network model is unused here, but SimGrid keeps the configuration of the
  // first Engine of a process: the flags network/simgrid_check.h needs (plain
  // max-min, no cross-traffic) are set now so that a later SimGrid cross-check in
  // a forked child (sim/network_crosscheck.h) gets them.
  std::vector<std::string> args = {"megascale-sim",
                                   "--log=root.thres:critical",
                                   "--log=ker_engine.app:file:/dev/null",
                                   "--cfg=contexts/stack-size:256",
                                   "--cfg=network/model:CM02",
                                   "--cfg=network/crosstraffic:0"};
  // Actors as threads under ASan, which cannot follow raw stack switches (base/sanitizer.h).
  if (base::kAddressSanitizer) args.push_back("--cfg=contexts/factory:thread");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  return std::make_unique<sg::Engine>(&argc, argv.data());
}

// "r<replica>.p<rank>" (+= : GCC 12 warns, a false positive, on "lit" + to_string).
std::string host_name(int replica, int rank) {
  std::string name = "r";
  name += std::to_string(replica);
  name += ".p";
  name += std::to_string(rank);
  return name;
}

std::mutex& engine_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

EventTimeline run_events(const model::Schedule& s, int replicas, const ReplicaDurationFn& duration,
                         const EventOptions& options) {
  if (replicas < 1) throw std::invalid_argument("run_events: replicas must be >= 1");
  if (const std::optional<HostFailure>& f = options.failure) {
    if (f->replica < 0 || f->replica >= replicas || f->rank < 0 || f->rank >= static_cast<int>(s.ranks.size()))
      throw std::invalid_argument("run_events: the failed host (replica " + std::to_string(f->replica) +
                                  ", pp rank " + std::to_string(f->rank) + ") is not simulated");
    if (!(f->at_s >= 0) || !std::isfinite(f->at_s))
      throw std::invalid_argument("run_events: the failure time must be >= 0 and finite");
  }
  // Structure and deadlock check (throws like replay does) before SimGrid runs.
  model::replay(s, [](int, const Op&) { return 0.0; });

  const int ranks = static_cast<int>(s.ranks.size());
  std::vector<double> duration_s;
  for (int rep = 0; rep < replicas; ++rep) {
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Op>& ops = s.ranks[r].ops;
      for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
        const double d = model::is_recv(ops[i].kind) ? 0.0 : duration(rep, r, ops[i]);
        if (!(d >= 0) || !std::isfinite(d))
          throw std::invalid_argument("run_events: duration of " + describe(s, rep, r, i) +
                                      " is negative or not finite");
        duration_s.push_back(d);
      }
    }
  }

  // The ops of each stream of each rank, in list order.
  std::vector<std::array<std::vector<int>, kStreams>> stream_ops(ranks);
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < static_cast<int>(s.ranks[r].ops.size()); ++i)
      stream_ops[r][static_cast<int>(s.ranks[r].ops[i].stream)].push_back(i);

  std::lock_guard<std::mutex> lock(engine_mutex());
  const auto t0 = std::chrono::steady_clock::now();
  EventTimeline out;
  out.replicas = replicas;
  {
    std::unique_ptr<sg::Engine> engine = new_engine();
    sg::NetZone* zone = sg::create_empty_zone("megascale-sim");
    std::vector<sg::Host*> host(static_cast<size_t>(replicas) * ranks);
    std::vector<sg::Host*> tx, rx;
    for (int rep = 0; rep < replicas; ++rep)
      for (int r = 0; r < ranks; ++r)
        host[rep * ranks + r] = zone->create_host(host_name(rep, r), 1.0);
    if (options.share_nic) {
      tx.resize(host.size());
      rx.resize(host.size());
      for (int rep = 0; rep < replicas; ++rep) {
        for (int r = 0; r < ranks; ++r) {
          tx[rep * ranks + r] = zone->create_host(host_name(rep, r) + ".nic-tx", kNicWorkPerS);
          rx[rep * ranks + r] = zone->create_host(host_name(rep, r) + ".nic-rx", kNicWorkPerS);
        }
      }
    }
    sg::Host* injector = options.failure ? zone->create_host("failure-injector", 1.0) : nullptr;
    zone->seal();
    out.stats.hosts = static_cast<int>(host.size() + tx.size() + rx.size());

    // Inline receives need no actor; a failure run keeps them as actors, whose
    // state at the failure (waiting in a receive) the hang analysis reads.
    Run run(s, replicas, std::move(duration_s), std::move(tx), std::move(rx),
            options.inline_recv && !options.failure);
    run.set_origin();
    for (int rep = 0; rep < replicas; ++rep) {
      for (int r = 0; r < ranks; ++r) {
        for (int st = 0; st < kStreams; ++st) {
          const std::vector<int>& ops = stream_ops[r][st];
          if (ops.empty()) continue;
          if (st == static_cast<int>(Stream::kPpRecv) && run.recv_stream_inline(r)) continue;
          const int actor = run.add_actor();
          std::string name = host_name(rep, r);
          name += '.';
          name += model::to_string(static_cast<Stream>(st));
          sg::Actor::create(name, host[rep * ranks + r],
                            [&run, actor, rep, r, &ops] { run.execute(actor, rep, r, ops); });
          ++out.stats.actors;
        }
      }
    }
    double failed_at_s = -1;
    if (const std::optional<HostFailure>& f = options.failure) {
      const size_t victim = static_cast<size_t>(f->replica) * ranks + f->rank;
      sg::Host* tx_host = run.tx_host(victim);
      sg::Host* rx_host = run.rx_host(victim);
      sg::Actor::create("failure-injector", injector, [&run, &failed_at_s, f, h = host[victim], tx_host, rx_host] {
        sg::this_actor::sleep_for(f->at_s);
        if (run.all_done()) return;  // the step ended first
        failed_at_s = f->at_s;
        h->turn_off();
        if (tx_host != nullptr) tx_host->turn_off();
        if (rx_host != nullptr) rx_host->turn_off();
      });
    }
    engine->run();
    if (!options.failure) run.resolve_remaining_recvs();
    out.complete = run.all_done();
    out.failed_at_s = failed_at_s;
    if (!out.complete && !options.failure)
      throw std::logic_error("run_events: SimGrid ended with ops not executed (internal error)");

    out.timing.assign(replicas, std::vector<std::vector<model::OpTiming>>(ranks));
    out.state.assign(replicas, std::vector<std::vector<OpState>>(ranks));
    for (int rep = 0; rep < replicas; ++rep) {
      for (int r = 0; r < ranks; ++r) {
        const int n = static_cast<int>(s.ranks[r].ops.size());
        out.timing[rep][r].resize(n);
        out.state[rep][r].resize(n);
        for (int i = 0; i < n; ++i) {
          const int64_t id = run.id(rep, r, i);
          out.timing[rep][r][i] = model::OpTiming{run.start_s(id), run.end_s(id)};
          out.state[rep][r][i] = run.state(id);
          out.iteration_s = std::max(out.iteration_s, run.end_s(id));
        }
        out.stats.ops += n;
      }
    }
    out.stats.activities = run.activities();
    // Actors hold references into `run` and `stream_ops`; all have ended (or were
    // killed by the failure or SimGrid's deadlock handling) here.
  }
  out.stats.engine_wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace megascale::sim
