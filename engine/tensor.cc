// engine/tensor.cc: Tensor allocation, views and host round trips.
#include "engine/tensor.h"

namespace megascale::engine {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + ")";
}

Tensor Tensor::zeros(Device& device, Shape shape) {
  for (int64_t d : shape) ENGINE_CHECK(d >= 0, "negative dimension in " + shape_string(shape));
  Tensor t;
  t.storage_ = std::make_shared<DeviceBuffer>(
      device, static_cast<size_t>(shape_numel(shape)) * sizeof(float));
  t.device_ = &device;
  t.data_ = t.storage_->floats();
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view(float* data, Shape shape) {
  for (int64_t d : shape) ENGINE_CHECK(d >= 0, "negative dimension in " + shape_string(shape));
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::from_host(Device& device, Shape shape, const std::vector<float>& values) {
  Tensor t = zeros(device, std::move(shape));
  t.copy_from_host(device, values);
  return t;
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  ENGINE_CHECK(i >= 0 && i < r, "dimension " + std::to_string(i) + " of " + shape_string(shape_));
  return shape_[static_cast<size_t>(i)];
}

Tensor Tensor::reshape(Shape shape) const {
  ENGINE_CHECK(shape_numel(shape) == numel(),
               "reshape " + shape_string(shape_) + " -> " + shape_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  ENGINE_CHECK(rank() >= 1, "slice_rows of a scalar");
  ENGINE_CHECK(0 <= begin && begin <= end && end <= shape_[0],
               "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                   shape_string(shape_));
  Tensor t = *this;
  const int64_t row = shape_numel(shape_) / (shape_[0] == 0 ? 1 : shape_[0]);
  t.data_ = data_ + begin * row;
  t.shape_[0] = end - begin;
  return t;
}

std::vector<float> Tensor::to_host(Device& device) const {
  std::vector<float> out(static_cast<size_t>(numel()));
  if (!out.empty()) device.copy_to_host(out.data(), data_, bytes());
  return out;
}

void Tensor::copy_from_host(Device& device, const std::vector<float>& values) {
  ENGINE_CHECK(static_cast<int64_t>(values.size()) == numel(),
               std::to_string(values.size()) + " values for " + shape_string(shape_));
  if (!values.empty()) device.copy_to_device(data_, values.data(), bytes());
}

}  // namespace megascale::engine
