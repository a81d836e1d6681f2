// engine/comm_mpi.cc: Open MPI backend of Comm with rank-ordered reductions.
#include "engine/comm_mpi.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::engine {
namespace {

[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw std::runtime_error(std::string("MPI error in ") + call + " at " + file + ":" +
                           std::to_string(line) + ": " + std::string(text, len));
}

#define MPI_CHECK(call)                                         \
  do {                                                          \
    const int mpi_check_rc_ = (call);                           \
    if (mpi_check_rc_ != MPI_SUCCESS)                           \
      mpi_fail(mpi_check_rc_, #call, __FILE__, __LINE__);       \
  } while (0)

int as_int(size_t count, const char* what) {
  if (count > static_cast<size_t>(INT_MAX))
    throw std::length_error(std::string("MpiComm::") + what + ": " + std::to_string(count) +
                            " floats exceed MPI's int count limit");
  return static_cast<int>(count);
}

// dst[i] = src_0[i] + src_1[i] + ... in rank order; blocks are `stride` apart.
void ordered_sum(const float* blocks, int n, size_t count, size_t stride, float* dst) {
  std::copy(blocks, blocks + count, dst);
  for (int r = 1; r < n; ++r) {
    const float* b = blocks + static_cast<size_t>(r) * stride;
    for (size_t i = 0; i < count; ++i) dst[i] += b[i];
  }
}

class MpiRequest final : public Request {
 public:
  MpiRequest(MPI_Request req, int expected_count, bool is_recv, int peer, int tag)
      : req_(req), expected_(expected_count), is_recv_(is_recv), peer_(peer), tag_(tag) {}
  // A request must be waited; destroying a pending one waits for it (never
  // abandons a transfer whose buffer may go away).
  ~MpiRequest() override {
    if (!done_ && MpiEnvironment::active()) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    if (done_) return;
    MPI_Status st;
    MPI_CHECK(MPI_Wait(&req_, &st));
    finish(st);
  }
  bool done() const override {
    if (done_) return true;
    int flag = 0;
    MPI_Status st;
    MPI_CHECK(MPI_Test(&req_, &flag, &st));
    if (flag) finish(st);
    return done_;
  }

 private:
  void finish(const MPI_Status& st) const {
    done_ = true;
    if (!is_recv_) return;
    int got = 0;
    MPI_CHECK(MPI_Get_count(&st, MPI_FLOAT, &got));
    if (got != expected_)
      throw std::runtime_error("MpiComm::irecv from peer " + std::to_string(peer_) + " tag " +
                               std::to_string(tag_) + ": received " + std::to_string(got) +
                               " floats, expected " + std::to_string(expected_));
  }
  mutable MPI_Request req_;
  int expected_;
  bool is_recv_;
  int peer_, tag_;
  mutable bool done_ = false;
};

}  // namespace

// ---- environment ----

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  if (!initialized) {
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &thread_level_));
    owns_ = true;
  } else {
    MPI_CHECK(MPI_Query_thread(&thread_level_));
  }
}

MpiEnvironment::~MpiEnvironment() {
  if (owns_ && active()) MPI_Finalize();
}

bool MpiEnvironment::active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

// ---- communicator ----

std::unique_ptr<MpiComm> MpiComm::world() {
  MPI_Comm dup;
  MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  return std::make_unique<MpiComm>(dup);
}

MpiComm::MpiComm(MPI_Comm comm) : comm_(comm) {
  if (comm == MPI_COMM_NULL || comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF)
    throw std::invalid_argument("MpiComm: needs an owned communicator (dup or split)");
  MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_, &size_));
  void* attr = nullptr;
  int flag = 0;
  MPI_CHECK(MPI_Comm_get_attr(comm_, MPI_TAG_UB, &attr, &flag));
  if (flag && attr) tag_ub_ = *static_cast<int*>(attr);
}

MpiComm::~MpiComm() {
  if (comm_ != MPI_COMM_NULL && MpiEnvironment::active()) MPI_Comm_free(&comm_);
}

float* MpiComm::scratch(int slot, size_t floats) {
  std::vector<float>& v = scratch_[slot];
  if (v.size() < floats) v.resize(floats);
  return v.data();
}

void MpiComm::gather_sum(float* data, size_t count) {
  float* all = scratch(0, count * static_cast<size_t>(size_));
  const int c = as_int(count, "all_reduce_sum");
  MPI_CHECK(MPI_Allgather(data, c, MPI_FLOAT, all, c, MPI_FLOAT, comm_));
  ordered_sum(all, size_, count, count, data);
}

void MpiComm::blocked_sum(float* data, size_t count) {
  const size_t n = static_cast<size_t>(size_);
  const size_t block = (count + n - 1) / n;
  const int b = as_int(block, "all_reduce_sum");
  float* padded = scratch(0, block * n);
  std::copy(data, data + count, padded);
  std::fill(padded + count, padded + block * n, 0.0f);
  float* blocks = scratch(1, block * n);
  MPI_CHECK(MPI_Alltoall(padded, b, MPI_FLOAT, blocks, b, MPI_FLOAT, comm_));
  float* mine = scratch(2, block);
  ordered_sum(blocks, size_, block, block, mine);
  MPI_CHECK(MPI_Allgather(mine, b, MPI_FLOAT, padded, b, MPI_FLOAT, comm_));
  std::copy(padded, padded + count, data);
}

void MpiComm::all_reduce_sum(float* data, size_t count) {
  if (size_ == 1 || count == 0) return;
  if (count * static_cast<size_t>(size_) <= kSmallAllReduceFloats)
    gather_sum(data, count);
  else
    blocked_sum(data, count);
}

void MpiComm::all_gather(const float* send, size_t count, float* recv) {
  if (count == 0) return;
  const int c = as_int(count, "all_gather");
  const size_t total = count * static_cast<size_t>(size_);
  float* mine = recv + static_cast<size_t>(rank_) * count;
  if (send == mine) {
    MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, MPI_FLOAT, comm_));
    return;
  }
  const auto s0 = reinterpret_cast<uintptr_t>(send), r0 = reinterpret_cast<uintptr_t>(recv);
  const bool overlaps = s0 < r0 + total * sizeof(float) && r0 < s0 + count * sizeof(float);
  if (overlaps) {
    std::vector<float> copy(send, send + count);
    MPI_CHECK(MPI_Allgather(copy.data(), c, MPI_FLOAT, recv, c, MPI_FLOAT, comm_));
  } else {
    MPI_CHECK(MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, comm_));
  }
}

void MpiComm::reduce_scatter_sum(const float* send, size_t count, float* recv) {
  if (count == 0) return;
  if (size_ == 1) {
    if (recv != send) std::memmove(recv, send, count * sizeof(float));
    return;
  }
  const int c = as_int(count, "reduce_scatter_sum");
  float* blocks = scratch(1, count * static_cast<size_t>(size_));
  MPI_CHECK(MPI_Alltoall(send, c, MPI_FLOAT, blocks, c, MPI_FLOAT, comm_));
  ordered_sum(blocks, size_, count, count, recv);
}

void MpiComm::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size_)
    throw std::invalid_argument("MpiComm::broadcast: root " + std::to_string(root) +
                                " outside 0.." + std::to_string(size_ - 1));
  if (count == 0 || size_ == 1) return;
  MPI_CHECK(MPI_Bcast(data, as_int(count, "broadcast"), MPI_FLOAT, root, comm_));
}

std::unique_ptr<Request> MpiComm::isend(const float* data, size_t count, int peer, int tag) {
  if (peer < 0 || peer >= size_ || tag < 0 || tag > tag_ub_)
    throw std::invalid_argument("MpiComm::isend: peer " + std::to_string(peer) + " (size " +
                                std::to_string(size_) + ") or tag " + std::to_string(tag) +
                                " (0.." + std::to_string(tag_ub_) + ") out of range");
  MPI_Request req;
  // MPI_Isend takes a non-const buffer in old bindings; it only reads it.
  MPI_CHECK(MPI_Isend(const_cast<float*>(data), as_int(count, "isend"), MPI_FLOAT, peer, tag,
                      comm_, &req));
  return std::make_unique<MpiRequest>(req, static_cast<int>(count), false, peer, tag);
}

std::unique_ptr<Request> MpiComm::irecv(float* data, size_t count, int peer, int tag) {
  if (peer < 0 || peer >= size_ || tag < 0 || tag > tag_ub_)
    throw std::invalid_argument("MpiComm::irecv: peer " + std::to_string(peer) + " (size " +
                                std::to_string(size_) + ") or tag " + std::to_string(tag) +
                                " (0.." + std::to_string(tag_ub_) + ") out of range");
  MPI_Request req;
  MPI_CHECK(MPI_Irecv(data, as_int(count, "irecv"), MPI_FLOAT, peer, tag, comm_, &req));
  return std::make_unique<MpiRequest>(req, static_cast<int>(count), true, peer, tag);
}

void MpiComm::barrier() { MPI_CHECK(MPI_Barrier(comm_)); }

std::unique_ptr<MpiComm> MpiComm::split_mpi(int color, int key) {
  MPI_Comm out;
  MPI_CHECK(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &out));
  if (out == MPI_COMM_NULL) return nullptr;
  return std::make_unique<MpiComm>(out);
}

std::unique_ptr<Comm> MpiComm::split(int color, int key) { return split_mpi(color, key); }

std::unique_ptr<MpiComm> MpiComm::split_shared() {
  MPI_Comm out;
  MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &out));
  return std::make_unique<MpiComm>(out);
}

}  // namespace megascale::engine
