// engine/comm.h: the communication interface of the training engine.
//
// Every collective and point-to-point transfer of the engine goes through a
// Comm: one communicator = one group of ranks (a TP, PP or DP group, or the
// world). Backends: MPI (Open MPI, engine/comm_mpi.h) for real multi-process
// runs on CPU, an in-process threads backend (engine/comm_threads.h) for unit
// tests, NCCL on GPU (engine/cuda/comm_nccl.h). The model, optimizer and schedule executor are
// written once above this interface (DESIGN.md, "Engine notes").
//
// Determinism: reductions are rank-ordered — every rank obtains bit-identical
// results, and the result does not depend on message arrival order (the sum is
// computed as ((x_0 + x_1) + x_2) + ... in rank order). Parallel runs therefore
// reproduce each other exactly and the single-process reference to within
// floating-point reassociation.
//
// Thread-safety: a Comm is used by one thread at a time (the rank's own thread);
// different Comm objects of the same rank may be used from different threads
// only if the backend says so (MPI backend: no; threads backend: yes).
#pragma once

#include <cstddef>
#include <memory>

namespace megascale::engine {

// A pending non-blocking transfer; wait() completes it (idempotent).
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  virtual bool done() const = 0;
};

// A request that was complete when it was made (a collective a backend ran at
// the call).
class CompletedRequest final : public Request {
 public:
  void wait() override {}
  bool done() const override { return true; }
};

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;  // 0..size()-1 within this communicator
  virtual int size() const = 0;

  // In place: data (count floats) <- sum over ranks, rank-ordered.
  virtual void all_reduce_sum(float* data, size_t count) = 0;
  // send: count floats; recv: size()*count floats, rank r's block at r*count.
  virtual void all_gather(const float* send, size_t count, float* recv) = 0;
  // send: size()*count floats; recv: count floats = block rank() of the rank-ordered sum.
  virtual void reduce_scatter_sum(const float* send, size_t count, float* recv) = 0;
  virtual void broadcast(float* data, size_t count, int root) = 0;
  // Point-to-point within this communicator; `tag` distinguishes concurrent
  // transfers between the same pair (e.g. micro-batch and chunk).
  virtual std::unique_ptr<Request> isend(const float* data, size_t count, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(float* data, size_t count, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // One step of a ring (or any pairwise exchange every rank makes at the same
  // step): send `send_count` floats to `send_peer` and receive `recv_count`
  // floats from `recv_peer`, both posted at once. Both buffers stay untouched
  // until their request's wait(). By default an irecv then an isend (the CPU
  // backends: both non-blocking). NcclComm issues the pair in one NCCL group:
  // as separate ncclSend / ncclRecv calls, each blocking its stream until the
  // peer's matching call runs, a ring's step would pass from rank to rank
  // instead of moving all at once.
  struct Exchange {
    std::unique_ptr<Request> send, recv;
  };
  virtual Exchange isendrecv(const float* send, size_t send_count, int send_peer, float* recv,
                             size_t recv_count, int recv_peer, int tag) {
    Exchange x;
    x.recv = irecv(recv, recv_count, recv_peer, tag);
    x.send = isend(send, send_count, send_peer, tag);
    return x;
  }

  // Non-blocking forms of the data-parallel collectives, with the blocking
  // forms' arguments and results. The buffers must stay untouched until the
  // request's wait(). The engine posts them when DP communication overlaps
  // compute (dp_overlap: a chunk's gradient reduce-scatter right after its
  // last backward, its parameter all-gather before its first forward) and
  // waits where the result is used. By default they run at the call and return
  // a CompletedRequest. The CPU backends (MPI, threads) do so and keep their
  // rank-ordered sums. NcclComm queues them on its collective stream without
  // making the compute stream wait, which is where the overlap comes from
  // (engine/cuda/comm_nccl.h).
  virtual std::unique_ptr<Request> iall_reduce_sum(float* data, size_t count) {
    all_reduce_sum(data, count);
    return std::make_unique<CompletedRequest>();
  }
  virtual std::unique_ptr<Request> iall_gather(const float* send, size_t count, float* recv) {
    all_gather(send, count, recv);
    return std::make_unique<CompletedRequest>();
  }
  virtual std::unique_ptr<Request> ireduce_scatter_sum(const float* send, size_t count, float* recv) {
    reduce_scatter_sum(send, count, recv);
    return std::make_unique<CompletedRequest>();
  }

  // A new communicator of the ranks that pass the same `color`, ordered by
  // `key` (MPI_Comm_split semantics). Collective over this communicator.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
};

}  // namespace megascale::engine
