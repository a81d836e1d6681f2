// engine/comm_threads.h: the in-process threads backend of Comm (engine/comm.h),
// for unit tests — N ranks as N threads of one process.
//
// defines: make_thread_comms, run_on_threads, CommAborted.
//
// Semantics are exactly those of engine/comm.h:
//  - Collectives rendezvous in shared memory: every rank posts its buffer, a
//    barrier, every rank reads what it needs, a second barrier (so buffers stay
//    valid while read). Sums are rank-ordered, ((x_0 + x_1) + x_2) + ..., so all
//    ranks get the same bits regardless of thread timing. In-place and aliasing
//    buffers are allowed. A rank calling a different collective, or the same one
//    with another count, than its peers throws std::runtime_error on every rank.
//  - isend copies the data at once (buffered send: its Request is complete on
//    return); irecv is matched to sends in posting order per (source, tag), like
//    MPI's non-overtaking rule; Request::wait() blocks until its message arrived.
//  - split(color, key): MPI_Comm_split; a negative color returns nullptr
//    (MPI_UNDEFINED).
//  - Every blocking wait gives up after `timeout_s` (a deadlock in a test becomes
//    an exception naming the operation and the rank) and stops at once with
//    CommAborted when another rank of the same world failed (run_on_threads).
//
// Thread-safety: each Comm is meant for its rank's thread; different Comm
// objects may be used from different threads concurrently (one mutex per group).
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "engine/comm.h"

namespace megascale::engine {

// Thrown inside a rank's thread when another rank of its world has failed.
class CommAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `n` world communicators of one in-process world: element r is rank r.
// REQUIRES: n >= 1.
std::vector<std::unique_ptr<Comm>> make_thread_comms(int n, double timeout_s = 120.0);

// Runs fn(world) on `n` threads, rank r with world rank r, and joins them. If any
// rank throws, the world is aborted (blocked peers get CommAborted) and the first
// exception thrown is rethrown here after all threads finished.
void run_on_threads(int n, const std::function<void(Comm& world)>& fn, double timeout_s = 120.0);

}  // namespace megascale::engine
