// engine/cuda/comm_nccl.cc: NcclComm — NCCL collectives and p2p on their own
// streams, ordered against the CudaDevice's compute stream with events.
#include "engine/cuda/comm_nccl.h"

#include <cuda_runtime.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/cuda/cuda_check.h"

namespace megascale::engine {
namespace {

bool host_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return attr.type == cudaMemoryTypeUnregistered || attr.type == cudaMemoryTypeHost;
}


// A p2p transfer: an event recorded on its stream after the operation.
class NcclRequest final : public Request {
 public:
  NcclRequest(cudaEvent_t done, cudaStream_t compute) : event_(done), compute_(compute) {}
  ~NcclRequest() override {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  // The compute stream waits for the transfer; the host does not.
  void wait() override {
    if (!waited_) CUDA_CHECK(cudaStreamWaitEvent(compute_, event_, 0));
    waited_ = true;
  }
  bool done() const override { return cudaEventQuery(event_) == cudaSuccess; }

 private:
  cudaEvent_t event_;
  cudaStream_t compute_;
  bool waited_ = false;
};

}  // namespace

NcclComm::NcclComm(CudaDevice& device, ncclComm_t comm) : device_(device), comm_(comm) {
  CUDA_CHECK(cudaSetDevice(device_.ordinal()));
  NCCL_CHECK(comm_, ncclCommCount(comm_, &size_));
  NCCL_CHECK(comm_, ncclCommUserRank(comm_, &rank_));
  // Duplicates for the two p2p directions (collective over comm_, like every split).
  NCCL_CHECK(comm_, ncclCommSplit(comm_, 0, rank_, &ascending_, nullptr));
  NCCL_CHECK(comm_, ncclCommSplit(comm_, 0, rank_, &descending_, nullptr));
  NCCL_CHECK(comm_, ncclCommSplit(comm_, 0, rank_, &exchange_, nullptr));
  CUDA_CHECK(cudaStreamCreateWithFlags(&coll_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&asc_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&desc_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaStreamCreateWithFlags(&exchange_stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&enter_event_, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventCreateWithFlags(&leave_event_, cudaEventDisableTiming));
}

std::unique_ptr<NcclComm> NcclComm::create(CudaDevice& device, Comm& over) {
  CUDA_CHECK(cudaSetDevice(device.ordinal()));
  static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0, "ncclUniqueId travels as floats");
  ncclUniqueId id{};
  if (over.rank() == 0) NCCL_CHECK(nullptr, ncclGetUniqueId(&id));
  float buf[sizeof(ncclUniqueId) / sizeof(float)];
  std::memcpy(buf, &id, sizeof id);
  over.broadcast(buf, sizeof buf / sizeof(float), 0);  // a bit copy on every backend
  std::memcpy(&id, buf, sizeof id);
  ncclComm_t comm = nullptr;
  NCCL_CHECK(nullptr, ncclCommInitRank(&comm, over.size(), id, over.rank()));
  return std::unique_ptr<NcclComm>(new NcclComm(device, comm));
}

NcclComm::~NcclComm() {
  for (cudaStream_t s : {coll_stream_, asc_stream_, desc_stream_, exchange_stream_}) {
    if (s != nullptr) (void)cudaStreamSynchronize(s);
  }
  if (staging_ != nullptr) (void)cudaFree(staging_);
  for (ncclComm_t c : {exchange_, ascending_, descending_, comm_}) {
    if (c != nullptr) (void)ncclCommDestroy(c);
  }
  for (cudaEvent_t e : {enter_event_, leave_event_}) {
    if (e != nullptr) (void)cudaEventDestroy(e);
  }
  for (cudaStream_t s : {coll_stream_, asc_stream_, desc_stream_, exchange_stream_}) {
    if (s != nullptr) (void)cudaStreamDestroy(s);
  }
}

void NcclComm::enter(cudaStream_t stream, cudaEvent_t event) {
  CUDA_CHECK(cudaEventRecord(event, device_.stream()));
  CUDA_CHECK(cudaStreamWaitEvent(stream, event, 0));
}

void NcclComm::leave(cudaStream_t stream, cudaEvent_t event) {
  CUDA_CHECK(cudaEventRecord(event, stream));
  CUDA_CHECK(cudaStreamWaitEvent(device_.stream(), event, 0));
}

float* NcclComm::staging(size_t floats) {
  if (staging_floats_ < floats) {
    device_.synchronize();  // the old staging buffer may still be in use
    if (staging_ != nullptr) CUDA_CHECK(cudaFree(staging_));
    CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&staging_), floats * sizeof(float)));
    staging_floats_ = floats;
  }
  return staging_;
}

void NcclComm::all_reduce_sum(float* data, size_t count) {
  if (count == 0) return;
  const bool host = host_pointer(data);
  float* buf = data;
  if (host) {
    buf = staging(count);
    device_.copy_to_device(buf, data, count * sizeof(float));
  }
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm_, coll_stream_));
  leave(coll_stream_, leave_event_);
  if (host) device_.copy_to_host(data, buf, count * sizeof(float));
}

void NcclComm::all_gather(const float* send, size_t count, float* recv) {
  if (count == 0) return;
  const bool host = host_pointer(send) || host_pointer(recv);
  const float* in = send;
  float* out = recv;
  if (host) {
    float* buf = staging(count * (static_cast<size_t>(size_) + 1));
    device_.copy(buf, send, count * sizeof(float));
    in = buf;
    out = buf + count;
  }
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclAllGather(in, out, count, ncclFloat32, comm_, coll_stream_));
  leave(coll_stream_, leave_event_);
  if (host) device_.copy(recv, out, count * size_ * sizeof(float));
  if (host) device_.synchronize();
}

void NcclComm::reduce_scatter_sum(const float* send, size_t count, float* recv) {
  if (count == 0) return;
  const bool host = host_pointer(send) || host_pointer(recv);
  const float* in = send;
  float* out = recv;
  if (host) {
    float* buf = staging(count * (static_cast<size_t>(size_) + 1));
    device_.copy(buf, send, count * size_ * sizeof(float));
    in = buf;
    out = buf + count * size_;
  }
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm_, coll_stream_));
  leave(coll_stream_, leave_event_);
  if (host) device_.copy(recv, out, count * sizeof(float));
  if (host) device_.synchronize();
}

void NcclComm::broadcast(float* data, size_t count, int root) {
  if (count == 0) return;
  if (root < 0 || root >= size_) throw std::invalid_argument("NcclComm::broadcast: root out of range");
  const bool host = host_pointer(data);
  float* buf = data;
  if (host) {
    buf = staging(count);
    device_.copy_to_device(buf, data, count * sizeof(float));
  }
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclBroadcast(buf, buf, count, ncclFloat32, root, comm_, coll_stream_));
  leave(coll_stream_, leave_event_);
  if (host) device_.copy_to_host(data, buf, count * sizeof(float));
}

void NcclComm::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw std::invalid_argument(std::string("NcclComm ") + what + ": peer " + std::to_string(peer) +
                                " invalid for rank " + std::to_string(rank_) + " of " + std::to_string(size_));
  }
}

std::unique_ptr<Request> NcclComm::p2p(float* data, size_t count, int peer, bool send) {
  check_peer(peer, "p2p");
  if (count > 0 && host_pointer(data)) {
    throw std::invalid_argument("NcclComm p2p needs device memory (a CudaDevice allocation)");
  }
  // The message's direction picks the communicator and stream on both ends.
  const bool ascending = send ? peer > rank_ : peer < rank_;
  ncclComm_t comm = ascending ? ascending_ : descending_;
  cudaStream_t stream = ascending ? asc_stream_ : desc_stream_;
  enter(stream, enter_event_);
  NCCL_CHECK(comm, ncclGroupStart());
  if (send) {
    NCCL_CHECK(comm, ncclSend(data, count, ncclFloat32, peer, comm, stream));
  } else {
    NCCL_CHECK(comm, ncclRecv(data, count, ncclFloat32, peer, comm, stream));
  }
  NCCL_CHECK(comm, ncclGroupEnd());
  return request_after(stream);
}

std::unique_ptr<Request> NcclComm::request_after(cudaStream_t stream) {
  cudaEvent_t done = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CUDA_CHECK(cudaEventRecord(done, stream));
  return std::make_unique<NcclRequest>(done, device_.stream());
}

std::unique_ptr<Request> NcclComm::iall_reduce_sum(float* data, size_t count) {
  if (count == 0 || host_pointer(data)) return Comm::iall_reduce_sum(data, count);
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_, coll_stream_));
  return request_after(coll_stream_);
}

std::unique_ptr<Request> NcclComm::iall_gather(const float* send, size_t count, float* recv) {
  if (count == 0 || host_pointer(send) || host_pointer(recv)) return Comm::iall_gather(send, count, recv);
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclAllGather(send, recv, count, ncclFloat32, comm_, coll_stream_));
  return request_after(coll_stream_);
}

std::unique_ptr<Request> NcclComm::ireduce_scatter_sum(const float* send, size_t count, float* recv) {
  if (count == 0 || host_pointer(send) || host_pointer(recv)) return Comm::ireduce_scatter_sum(send, count, recv);
  enter(coll_stream_, enter_event_);
  NCCL_CHECK(comm_, ncclReduceScatter(send, recv, count, ncclFloat32, ncclSum, comm_, coll_stream_));
  return request_after(coll_stream_);
}

std::unique_ptr<Request> NcclComm::isend(const float* data, size_t count, int peer, int /*tag*/) {
  return p2p(const_cast<float*>(data), count, peer, true);
}

std::unique_ptr<Request> NcclComm::irecv(float* data, size_t count, int peer, int /*tag*/) {
  return p2p(data, count, peer, false);
}

Comm::Exchange NcclComm::isendrecv(const float* send, size_t send_count, int send_peer, float* recv,
                                   size_t recv_count, int recv_peer, int /*tag*/) {
  check_peer(send_peer, "isendrecv");
  check_peer(recv_peer, "isendrecv");
  if ((send_count > 0 && host_pointer(send)) || (recv_count > 0 && host_pointer(recv))) {
    throw std::invalid_argument("NcclComm isendrecv needs device memory (a CudaDevice allocation)");
  }
  enter(exchange_stream_, enter_event_);
  NCCL_CHECK(exchange_, ncclGroupStart());
  NCCL_CHECK(exchange_, ncclSend(send, send_count, ncclFloat32, send_peer, exchange_, exchange_stream_));
  NCCL_CHECK(exchange_, ncclRecv(recv, recv_count, ncclFloat32, recv_peer, exchange_, exchange_stream_));
  NCCL_CHECK(exchange_, ncclGroupEnd());
  Exchange x;
  x.send = request_after(exchange_stream_);
  x.recv = request_after(exchange_stream_);
  return x;
}

void NcclComm::barrier() {
  float one = 1.0f;
  all_reduce_sum(&one, 1);  // host pointer: staged and synchronised
}

std::unique_ptr<Comm> NcclComm::split(int color, int key) {
  if (color < 0) throw std::invalid_argument("NcclComm::split: negative color (NCCL_SPLIT_NOCOLOR) unsupported");
  device_.synchronize();
  ncclComm_t sub = nullptr;
  NCCL_CHECK(comm_, ncclCommSplit(comm_, color, key, &sub, nullptr));
  return std::unique_ptr<Comm>(new NcclComm(device_, sub));
}

}  // namespace megascale::engine
