// tests/engine_gpu/comm_nccl_gpu_test.cc: NcclComm — every collective on
// device and on host buffers with one rank (any GPU), and with two ranks
// (two threads, one GPU each: skipped below two GPUs, since NCCL refuses two
// ranks on one device) against the rank-ordered sums of the threads backend,
// to a tolerance: NCCL's sums are not rank-ordered (comm_nccl.h).
// Also the CUDA-event OpTimer.
#include <gtest/gtest.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "engine/comm_threads.h"
#include "engine/cuda/comm_nccl.h"
#include "engine/cuda/device_cuda.h"
#include "engine/trace.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using gpu_test::close;
using gpu_test::Mirror;
using gpu_test::random_values;

TEST(CudaNccl, OneRankCollectivesOnDeviceAndHostBuffers) {
  REQUIRE_CUDA();
  CudaDevice device;
  auto threads = make_thread_comms(1);
  std::unique_ptr<NcclComm> comm = NcclComm::create(device, *threads[0]);
  ASSERT_EQ(comm->size(), 1);
  ASSERT_EQ(comm->rank(), 0);
  const auto v = random_values(1000, 1);
  Mirror d(device, v), out(device, std::vector<float>(1000));
  comm->all_reduce_sum(d.f(), 1000);
  EXPECT_EQ(d.host(), v);
  comm->all_gather(d.f(), 1000, out.f());
  EXPECT_EQ(out.host(), v);
  comm->reduce_scatter_sum(d.f(), 1000, out.f());
  EXPECT_EQ(out.host(), v);
  comm->broadcast(d.f(), 1000, 0);
  EXPECT_EQ(d.host(), v);
  std::vector<float> host = v, host_out(1000);
  comm->all_reduce_sum(host.data(), 1000);
  EXPECT_EQ(host, v);
  comm->all_gather(host.data(), 1000, host_out.data());
  EXPECT_EQ(host_out, v);
  comm->barrier();
  std::unique_ptr<Comm> sub = comm->split(0, 0);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  sub->all_reduce_sum(d.f(), 1000);
  EXPECT_EQ(d.host(), v);
}

TEST(CudaNccl, TwoRanksMatchTheThreadsBackendToTolerance) {
  REQUIRE_CUDA();
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL runs one rank per GPU), found " << gpus;
  auto threads = make_thread_comms(2);
  const size_t n = 4096 + 3;
  std::vector<std::vector<float>> reduced(2), gathered(2), scattered(2), received(2);
  auto rank_fn = [&](int r) {
    CudaDeviceOptions o;
    o.ordinal = r;
    CudaDevice device(o);
    std::unique_ptr<NcclComm> comm = NcclComm::create(device, *threads[r]);
    const auto mine = random_values(2 * n, 10 + r);
    Mirror a(device, std::vector<float>(mine.begin(), mine.begin() + n)), g(device, std::vector<float>(2 * n));
    comm->all_reduce_sum(a.f(), n);
    reduced[r] = a.host();
    Mirror s(device, std::vector<float>(mine.begin(), mine.begin() + n));
    comm->all_gather(s.f(), n, g.f());
    gathered[r] = g.host();
    Mirror full(device, mine), part(device, std::vector<float>(n));
    comm->reduce_scatter_sum(full.f(), n, part.f());
    scattered[r] = part.host();
    // p2p both ways at once (no deadlock: ascending and descending streams).
    Mirror to_send(device, std::vector<float>(n, static_cast<float>(r + 1))), into(device, std::vector<float>(n));
    auto send = comm->isend(to_send.f(), n, 1 - r, 0);
    auto recv = comm->irecv(into.f(), n, 1 - r, 0);
    send->wait();
    recv->wait();
    received[r] = into.host();
    comm->barrier();
  };
  std::thread t0(rank_fn, 0), t1(rank_fn, 1);
  t0.join();
  t1.join();
  const auto x0 = random_values(2 * n, 10), x1 = random_values(2 * n, 11);
  std::vector<float> sum(n), gather(2 * n);
  for (size_t i = 0; i < n; ++i) sum[i] = x0[i] + x1[i];
  for (size_t i = 0; i < n; ++i) {
    gather[i] = x0[i];
    gather[n + i] = x1[i];
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(close(sum, reduced[r], 1e-6, 1e-6));
    EXPECT_EQ(gathered[r], gather);
    std::vector<float> block(n);
    for (size_t i = 0; i < n; ++i) block[i] = x0[r * n + i] + x1[r * n + i];
    EXPECT_TRUE(close(block, scattered[r], 1e-6, 1e-6));
    EXPECT_EQ(received[r], std::vector<float>(n, static_cast<float>(2 - r)));
  }
}

// isendrecv (the ring steps of the fused TP overlap, engine/layers.h): every
// rank sends its block to rank + 1 and receives rank - 1's in one NCCL group;
// tp - 1 steps move every block around the ring (the all-gather).
TEST(CudaNccl, RingExchangeStepsGatherEveryBlock) {
  REQUIRE_CUDA();
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL runs one rank per GPU), found " << gpus;
  const int P = std::min(gpus, 4);
  auto threads = make_thread_comms(P);
  const size_t n = 1000 + 7;
  std::vector<std::vector<float>> gathered(P);
  auto rank_fn = [&](int r) {
    CudaDeviceOptions o;
    o.ordinal = r;
    CudaDevice device(o);
    std::unique_ptr<NcclComm> comm = NcclComm::create(device, *threads[r]);
    std::vector<float> init(P * n, -1.0f);
    for (size_t i = 0; i < n; ++i) init[r * n + i] = static_cast<float>(r * 10000 + i);
    Mirror full(device, init);
    const int next = (r + 1) % P, prev = (r + P - 1) % P;
    for (int s = 0; s < P - 1; ++s) {
      const int hold = (r - s + P) % P, incoming = (r - s - 1 + 2 * P) % P;
      Comm::Exchange x = comm->isendrecv(full.f() + hold * n, n, next, full.f() + incoming * n, n, prev, s);
      x.recv->wait();
      x.send->wait();
    }
    gathered[r] = full.host();
    comm->barrier();
  };
  std::vector<std::thread> ts;
  for (int r = 0; r < P; ++r) ts.emplace_back(rank_fn, r);
  for (auto& t : ts) t.join();
  std::vector<float> want(P * n);
  for (int q = 0; q < P; ++q) {
    for (size_t i = 0; i < n; ++i) want[q * n + i] = static_cast<float>(q * 10000 + i);
  }
  for (int r = 0; r < P; ++r) EXPECT_EQ(gathered[r], want) << "rank " << r;
}

// The non-blocking collectives the DP overlap posts (comm_nccl.h): queued on
// the collective stream, the compute stream waits only at Request::wait();
// after it, the results are the blocking forms'. With one rank NCCL's sums
// are copies, so they are compared exactly. A compute-stream kernel queued
// after the wait sees the data (copy back on the compute stream).
TEST(CudaNccl, NonBlockingCollectivesGiveTheBlockingResultsAfterWait) {
  REQUIRE_CUDA();
  CudaDevice device;
  auto threads = make_thread_comms(1);
  std::unique_ptr<NcclComm> comm = NcclComm::create(device, *threads[0]);
  const size_t n = (size_t{1} << 20) + 5;  // 4 MiB: long enough to still run after the call
  const auto v = random_values(n, 3);
  Mirror a(device, v), out(device, std::vector<float>(n)), gathered(device, std::vector<float>(n));
  std::unique_ptr<Request> ar = comm->iall_reduce_sum(a.f(), n);
  ar->wait();
  EXPECT_EQ(a.host(), v);
  std::unique_ptr<Request> rs = comm->ireduce_scatter_sum(a.f(), n, out.f());
  std::unique_ptr<Request> ag = comm->iall_gather(out.f(), n, gathered.f());  // same stream: after rs
  ag->wait();
  rs->wait();
  EXPECT_EQ(out.host(), v);
  EXPECT_EQ(gathered.host(), v);
  device.synchronize();
  EXPECT_TRUE(rs->done());
  EXPECT_TRUE(ag->done());
  // Host buffers fall back to the blocking form: complete at the call.
  std::vector<float> host = v;
  std::unique_ptr<Request> h = comm->iall_reduce_sum(host.data(), n);
  EXPECT_TRUE(h->done());
  EXPECT_EQ(host, v);
}

TEST(CudaEventTimer, StampsResolveInOrderOnTheHostClock) {
  REQUIRE_CUDA();
  CudaDevice device;
  std::unique_ptr<OpTimer> timer = device.make_op_timer();
  ASSERT_NE(timer, nullptr);
  const double before = TraceRecorder::now_us();
  const int a = timer->stamp();
  DeviceBuffer big(device, size_t{64} << 20);
  device.fill_zero(big.get(), big.bytes());
  const int b = timer->stamp();
  const std::vector<double> t = timer->resolve();
  const double after = TraceRecorder::now_us();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_LE(t[a], t[b]);
  EXPECT_GE(t[a], before - 1000);  // offset error of the reference: well under 1 ms
  EXPECT_LE(t[b], after + 1000);
  EXPECT_EQ(timer->resolve().size(), 0u);
}

}  // namespace
}  // namespace megascale::engine
