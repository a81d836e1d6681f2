// tests/engine_mpi/comm_mpi_test.cc: every MpiComm collective against a
// reference computed locally in rank order; results bitwise equal on all ranks.
// Runs with any number of processes (registered with 2 and 4).
#include "engine/comm_mpi.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace megascale::engine {
namespace {

// Contribution of rank r: magnitudes spread over 7 decades so that summing in
// another order would change the low bits.
float value(int r, size_t i) {
  return static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * r) *
                            std::pow(10.0, static_cast<double>((i + r) % 7) - 3.0));
}

std::vector<float> contribution(int r, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(r, i);
  return v;
}

// ((x_0 + x_1) + x_2) + ... element-wise, as the contract says.
std::vector<float> rank_ordered_sum(int n, size_t count) {
  std::vector<float> s = contribution(0, count);
  for (int r = 1; r < n; ++r)
    for (size_t i = 0; i < count; ++i) s[i] += value(r, i);
  return s;
}

bool bitwise_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

// All ranks hold the same bits in `v`.
void expect_same_on_all_ranks(Comm& c, const std::vector<float>& v) {
  std::vector<float> all(v.size() * c.size());
  c.all_gather(v.data(), v.size(), all.data());
  for (int r = 0; r < c.size(); ++r)
    EXPECT_TRUE(bitwise_equal(all.data() + r * v.size(), v.data(), v.size()))
        << "rank " << r << " differs";
}

TEST(CommMpi, WorldMatchesMpi) {
  auto world = MpiComm::world();
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(world->rank(), rank);
  EXPECT_EQ(world->size(), size);
  EXPECT_GE(size, 2) << "run under mpirun -np >= 2";
  int level = 0;
  MPI_Query_thread(&level);
  EXPECT_GE(level, MPI_THREAD_FUNNELED);
}

TEST(CommMpi, AllReduceIsRankOrderedOnBothPaths) {
  auto world = MpiComm::world();
  const int n = world->size();
  // 1000 floats take the gather path, 40000*n > 2^16 the reduce-scatter path;
  // 7 and 40001 exercise odd sizes (padding of the blocked path).
  for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{40000}, size_t{40001}}) {
    std::vector<float> v = contribution(world->rank(), count);
    world->all_reduce_sum(v.data(), count);
    const std::vector<float> want = rank_ordered_sum(n, count);
    EXPECT_TRUE(bitwise_equal(v.data(), want.data(), count)) << "count " << count;
    expect_same_on_all_ranks(*world, v);
  }
}

TEST(CommMpi, AllGather) {
  auto world = MpiComm::world();
  const int n = world->size(), me = world->rank();
  const size_t count = 333;
  const std::vector<float> mine = contribution(me, count);
  std::vector<float> out(count * n, -1.0f);
  world->all_gather(mine.data(), count, out.data());
  for (int r = 0; r < n; ++r) {
    const std::vector<float> want = contribution(r, count);
    EXPECT_TRUE(bitwise_equal(out.data() + r * count, want.data(), count)) << "block " << r;
  }
  // In place: the rank's block already sits in the output.
  std::vector<float> inplace(count * n, 0.0f);
  std::copy(mine.begin(), mine.end(), inplace.begin() + me * count);
  world->all_gather(inplace.data() + me * count, count, inplace.data());
  EXPECT_EQ(inplace, out);
}

TEST(CommMpi, ReduceScatter) {
  auto world = MpiComm::world();
  const int n = world->size(), me = world->rank();
  const size_t count = 1001;
  const std::vector<float> send = contribution(me, count * n);
  std::vector<float> recv(count);
  world->reduce_scatter_sum(send.data(), count, recv.data());
  const std::vector<float> full = rank_ordered_sum(n, count * n);
  EXPECT_TRUE(bitwise_equal(recv.data(), full.data() + me * count, count));
  // In place into the rank's own block (ZeRO's gradient buffer).
  std::vector<float> buf = send;
  world->reduce_scatter_sum(buf.data(), count, buf.data() + me * count);
  EXPECT_TRUE(bitwise_equal(buf.data() + me * count, recv.data(), count));
  // Consistency with all_reduce: the blocks of an all-reduce.
  std::vector<float> ar = send;
  world->all_reduce_sum(ar.data(), ar.size());
  EXPECT_TRUE(bitwise_equal(ar.data() + me * count, recv.data(), count));
}

TEST(CommMpi, BroadcastFromEveryRoot) {
  auto world = MpiComm::world();
  for (int root = 0; root < world->size(); ++root) {
    std::vector<float> v = contribution(world->rank(), 500);
    world->broadcast(v.data(), v.size(), root);
    const std::vector<float> want = contribution(root, 500);
    EXPECT_TRUE(bitwise_equal(v.data(), want.data(), v.size())) << "root " << root;
  }
  float x = 0;
  EXPECT_THROW(world->broadcast(&x, 1, world->size()), std::invalid_argument);
}

TEST(CommMpi, NonBlockingRingWithTags) {
  auto world = MpiComm::world();
  const int n = world->size(), me = world->rank();
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  // Two messages per pair with different tags, received in the opposite order
  // of sending: tags must route them.
  std::vector<float> a = contribution(me, 100), b = contribution(me + 10, 50);
  std::vector<float> ra(100), rb(50);
  auto rb_req = world->irecv(rb.data(), rb.size(), prev, 8);
  auto ra_req = world->irecv(ra.data(), ra.size(), prev, 7);
  auto sa = world->isend(a.data(), a.size(), next, 7);
  auto sb = world->isend(b.data(), b.size(), next, 8);
  rb_req->wait();
  ra_req->wait();
  sa->wait();
  sb->wait();
  sb->wait();  // idempotent
  EXPECT_TRUE(ra_req->done());
  EXPECT_EQ(ra, contribution(prev, 100));
  EXPECT_EQ(rb, contribution(prev + 10, 50));
  EXPECT_THROW(world->isend(a.data(), 1, n, 0), std::invalid_argument);
  EXPECT_THROW(world->irecv(a.data(), 1, 0, -1), std::invalid_argument);
}

TEST(CommMpi, ShortMessageIsAnErrorAtWait) {
  auto world = MpiComm::world();
  const int n = world->size(), me = world->rank();
  std::vector<float> buf(10, 1.0f);
  auto r = world->irecv(buf.data(), 10, (me + n - 1) % n, 3);
  auto s = world->isend(buf.data(), 4, (me + 1) % n, 3);
  s->wait();
  EXPECT_THROW(r->wait(), std::runtime_error);
}

TEST(CommMpi, SplitEvenOddAndUndefined) {
  auto world = MpiComm::world();
  const int n = world->size(), me = world->rank();
  // Reverse order inside each group via the key.
  auto half = world->split(me % 2, n - me);
  const int members = (n - me % 2 + 1) / 2;
  EXPECT_EQ(half->size(), members);
  const float id = static_cast<float>(me);
  std::vector<float> ids(half->size());
  half->all_gather(&id, 1, ids.data());
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_GT(ids[i - 1], ids[i]);
  float s = 1.0f;
  half->all_reduce_sum(&s, 1);
  EXPECT_EQ(s, static_cast<float>(members));
  // Negative color = MPI_UNDEFINED: nullptr for that rank.
  auto some = world->split(me == 0 ? -1 : 0, me);
  if (me == 0) {
    EXPECT_EQ(some, nullptr);
  } else {
    ASSERT_NE(some, nullptr);
    EXPECT_EQ(some->size(), n - 1);
  }
  // One machine: the shared-memory split holds everyone.
  auto node = world->split_shared();
  EXPECT_EQ(node->size(), n);
  EXPECT_EQ(node->rank(), me);
  world->barrier();
}

}  // namespace
}  // namespace megascale::engine
