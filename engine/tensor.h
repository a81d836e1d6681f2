// engine/tensor.h: a shaped fp32 array on a Device (row-major, dense).
//
// defines: Shape, shape_numel, shape_string, Tensor.
//
// A Tensor is a view (pointer + shape) that may also own its storage (a
// DeviceBuffer shared by every copy of the Tensor, as a shared_ptr). The model
// layers work on raw pointers with a shape comment (llm.c style, e.g.
// `float* qkv;  // (T, B, 3*C)`); Tensor is the handle the rest of the engine
// uses to name, allocate and inspect those arrays: the named parameter tensors
// of a ModelChunk, the tests' inputs, host round trips.
//
// Thread-safety: copies share storage; concurrent reads are fine, concurrent
// writes to the same storage are the caller's business.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"

namespace megascale::engine {

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for the empty shape).
int64_t shape_numel(const Shape& shape);
// "(2, 32, 64)".
std::string shape_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Owning: allocated on `device`, zero-filled.
  static Tensor zeros(Device& device, Shape shape);
  // Non-owning view of `numel(shape)` floats at `data` (device memory).
  static Tensor view(float* data, Shape shape);
  // Owning copy of host values. REQUIRES: values.size() == numel(shape).
  static Tensor from_host(Device& device, Shape shape, const std::vector<float>& values);

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // REQUIRES: 0 <= i < rank(); negative i counts from the end.
  int64_t dim(int i) const;
  int64_t numel() const { return shape_numel(shape_); }
  size_t bytes() const { return static_cast<size_t>(numel()) * sizeof(float); }
  bool defined() const { return data_ != nullptr || shape_numel(shape_) == 0; }
  bool owns_storage() const { return storage_ != nullptr; }
  Device* device() const { return device_; }

  // Same storage, new shape. REQUIRES: numel(shape) == numel().
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the leading dimension, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;

  // Host round trips through `device`.
  std::vector<float> to_host(Device& device) const;
  void copy_from_host(Device& device, const std::vector<float>& values);

 private:
  std::shared_ptr<DeviceBuffer> storage_;
  Device* device_ = nullptr;
  float* data_ = nullptr;
  Shape shape_;
};

}  // namespace megascale::engine
