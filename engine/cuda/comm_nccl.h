// engine/cuda/comm_nccl.h: the Comm interface (engine/comm.h) on NCCL, for a
// CudaDevice's memory.
//
// defines: NcclComm.
//
// Creation: NcclComm::create(device, over) is collective over an existing Comm
// (MpiComm in megascale-train): rank 0 makes the NCCL unique id, `over`
// broadcasts its 128 bytes (as 32 floats: a bit copy), every rank calls
// ncclCommInitRank. Sub-groups come from split() = ncclCommSplit (NCCL >= 2.18),
// so ProcessGroups builds TP -> PP -> DP exactly as on MPI, without another id
// exchange.
//
// Streams. Collectives run on the communicator's own stream; p2p transfers on
// two more, one per direction (see below). Each operation is ordered after the
// work already queued on the device's compute stream (an event the comm stream
// waits for) and before whatever the compute stream does next (an event the
// compute stream waits for): correct stream order without the host waiting.
// isend / irecv return at once; Request::wait() makes the compute stream wait
// for the transfer (the host does not block); done() queries its event. The
// non-blocking collectives (iall_reduce_sum, iall_gather, ireduce_scatter_sum:
// the DP overlap of the Schedule IR) work the same way on the collective
// stream: the compute stream goes on with the next backward while the
// chunk's reduce-scatter runs, and waits only where the result is used.
// Host pointers (the engine's few host scalars: the loss, norms, agreement
// flags) are staged through a device buffer and synchronised, so every Comm
// call of the engine works unchanged; p2p needs device pointers.
//
// Point-to-point: NCCL has no tags; messages between two ranks match in the
// order they are posted, which the Schedule IR makes the same on both ends.
// A send blocks its stream until the peer's receive is running, so ascending
// messages (to a higher rank) and descending ones use separate duplicated
// communicators with separate streams: a rank's send to a higher stage can
// never sit in front of its receive from that stage. `tag` is ignored. A
// ring step (isendrecv: the fused TP all-gather / reduce-scatter of
// engine/layers.h) issues its send and receive in one NCCL group on a third
// duplicate and stream, so every rank's pair runs at once; as two calls the
// step would pass down the ring one rank at a time.
//
// Determinism: NCCL's sums are not rank-ordered (ring / tree reductions in an
// order set by the algorithm and channel count), so NcclComm does not keep
// engine/comm.h's bit-for-bit promise. A fixed NCCL version, topology,
// NCCL_ALGO and NCCL_PROTO give run-to-run identical bits; the GPU tests
// compare results with the CPU engine to a stated tolerance instead of bits.
//
// Errors throw std::runtime_error with NCCL's error string and
// ncclGetLastError's detail (engine/cuda/cuda_check.h).
//
// Thread-safety: one thread at a time (the rank's thread), like every Comm.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <memory>

#include "engine/comm.h"
#include "engine/cuda/device_cuda.h"

namespace megascale::engine {

class NcclComm final : public Comm {
 public:
  // Collective over `over` (see the header comment).
  static std::unique_ptr<NcclComm> create(CudaDevice& device, Comm& over);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  CudaDevice& device() const { return device_; }

  void all_reduce_sum(float* data, size_t count) override;
  void all_gather(const float* send, size_t count, float* recv) override;
  void reduce_scatter_sum(const float* send, size_t count, float* recv) override;
  void broadcast(float* data, size_t count, int root) override;
  std::unique_ptr<Request> isend(const float* data, size_t count, int peer, int tag) override;
  std::unique_ptr<Request> irecv(float* data, size_t count, int peer, int tag) override;
  // The send and the receive in one NCCL group on a third duplicated
  // communicator and its own stream (ring steps of the fused TP overlap):
  // every rank's pair runs at once. Both requests complete together.
  Exchange isendrecv(const float* send, size_t send_count, int send_peer, float* recv, size_t recv_count,
                     int recv_peer, int tag) override;
  // Queued on the collective stream after the compute stream's queued work;
  // the compute stream waits only at Request::wait(). Device pointers only
  // (host buffers run the blocking form).
  std::unique_ptr<Request> iall_reduce_sum(float* data, size_t count) override;
  std::unique_ptr<Request> iall_gather(const float* send, size_t count, float* recv) override;
  std::unique_ptr<Request> ireduce_scatter_sum(const float* send, size_t count, float* recv) override;
  void barrier() override;
  // ncclCommSplit; REQUIRES: color >= 0.
  std::unique_ptr<Comm> split(int color, int key) override;

 private:
  NcclComm(CudaDevice& device, ncclComm_t comm);
  // Orders `stream` after the compute stream's queued work / the compute
  // stream after `stream`'s.
  void enter(cudaStream_t stream, cudaEvent_t event);
  void leave(cudaStream_t stream, cudaEvent_t event);
  float* staging(size_t floats);
  std::unique_ptr<Request> p2p(float* data, size_t count, int peer, bool send);
  void check_peer(int peer, const char* what) const;
  // An event recorded on `stream` now, as the request the compute stream waits for.
  std::unique_ptr<Request> request_after(cudaStream_t stream);

  CudaDevice& device_;
  ncclComm_t comm_ = nullptr;
  ncclComm_t ascending_ = nullptr, descending_ = nullptr;  // p2p by message direction
  ncclComm_t exchange_ = nullptr;                           // grouped send + receive pairs
  int rank_ = 0, size_ = 1;
  cudaStream_t coll_stream_ = nullptr, asc_stream_ = nullptr, desc_stream_ = nullptr;
  cudaStream_t exchange_stream_ = nullptr;
  cudaEvent_t enter_event_ = nullptr, leave_event_ = nullptr;
  float* staging_ = nullptr;
  size_t staging_floats_ = 0;
};

}  // namespace megascale::engine
