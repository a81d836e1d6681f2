// Tests of engine/tensor.h: shapes, ownership, views, host round trips.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "engine/device_cpu.h"
#include "engine/tensor.h"

namespace megascale::engine {
namespace {

TEST(TensorTest, ShapeHelpers) {
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({2, 32, 64}), 2 * 32 * 64);
  EXPECT_EQ(shape_numel({3, 0}), 0);
  EXPECT_EQ(shape_string({2, 32, 64}), "(2, 32, 64)");
}

TEST(TensorTest, ZerosOwnsZeroedStorage) {
  CpuDevice dev;
  Tensor t = Tensor::zeros(dev, {4, 8});
  EXPECT_TRUE(t.owns_storage());
  EXPECT_EQ(t.numel(), 32);
  EXPECT_EQ(t.bytes(), 32 * sizeof(float));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.dim(0), 4);
  EXPECT_EQ(t.dim(-1), 8);
  for (float v : t.to_host(dev)) EXPECT_EQ(v, 0.0f);
  EXPECT_THROW(t.dim(2), std::runtime_error);
}

TEST(TensorTest, CopiesShareStorage) {
  CpuDevice dev;
  Tensor a = Tensor::zeros(dev, {3});
  Tensor b = a;
  b.data()[1] = 5.0f;
  EXPECT_EQ(a.data()[1], 5.0f);
}

TEST(TensorTest, HostRoundTripReshapeAndSlice) {
  CpuDevice dev;
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[i] = float(i);
  Tensor t = Tensor::from_host(dev, {4, 3}, v);
  EXPECT_EQ(t.to_host(dev), v);
  Tensor r = t.reshape({2, 6});
  EXPECT_EQ(r.data(), t.data());
  EXPECT_EQ(r.dim(1), 6);
  EXPECT_THROW(t.reshape({5}), std::runtime_error);
  Tensor s = t.slice_rows(1, 3);  // rows 1, 2
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.to_host(dev), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  EXPECT_THROW(t.slice_rows(2, 5), std::runtime_error);
  EXPECT_THROW(t.copy_from_host(dev, {1, 2}), std::runtime_error);
}

TEST(TensorTest, ViewDoesNotOwn) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::view(data, {2, 3});
  EXPECT_FALSE(t.owns_storage());
  EXPECT_EQ(t.data(), data);
  EXPECT_EQ(t.numel(), 6);
}

}  // namespace
}  // namespace megascale::engine
