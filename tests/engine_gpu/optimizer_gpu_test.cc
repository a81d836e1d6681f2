// tests/engine_gpu/optimizer_gpu_test.cc: the multi-tensor optimizer kernels
// of CudaDevice against CpuDevice — directly on a shard with gaps, an empty
// piece and pieces larger than one thread block's chunk — and through
// ShardedOptimizer (AdamW and LAMB, several steps, clipping, weight decay).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/cuda/device_cuda.h"
#include "engine/device_cpu.h"
#include "engine/optimizer.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using gpu_test::close;
using gpu_test::Mirror;
using gpu_test::random_values;

class CudaOptimizer : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA();
    gpu_ = std::make_unique<CudaDevice>();
  }
  CpuDevice cpu_;
  std::unique_ptr<CudaDevice> gpu_;
};

// A shard of 10000 elements: pieces with gaps between them (padding that must
// stay untouched), an empty piece, and one spanning several 2048-element chunks.
std::vector<Device::ShardPiece> pieces(float c0, float c1, float c2) {
  return {{0, 1, c0}, {3, 0, c1}, {5, 4099, c1}, {4200, 5000, c2}, {9300, 700, c0}};
}

Device::AdamConstants constants() {
  Device::AdamConstants k;
  k.clip = 0.5f;
  k.step_size = 1e-3f / (1.0f - 0.9f);
  k.bc2_sqrt = std::sqrt(1.0f - 0.999f);
  k.bc1 = 1.0f - 0.9f;
  k.bc2 = 1.0f - 0.999f;
  return k;
}

TEST_F(CudaOptimizer, KernelsMatchCpu) {
  const size_t n = 10000;
  const auto p0 = random_values(n, 1), g = random_values(n, 2), m0 = random_values(n, 3, 0, 0.1f);
  const auto v0 = random_values(n, 4, 0, 0.01f);
  // scale
  std::vector<float> s = g;
  cpu_.scale(s.data(), 0.25f, n);
  Mirror gs(*gpu_, g);
  gpu_->scale(gs.f(), 0.25f, n);
  EXPECT_TRUE(close(s, gs.host(), 0, 0));
  // sum of squares per piece (incl. the empty one)
  const auto pc = pieces(0, 0, 0);
  std::vector<double> want(pc.size()), got(pc.size());
  cpu_.sum_squares(want.data(), g.data(), pc.data(), static_cast<int>(pc.size()));
  Mirror gg(*gpu_, g);
  gpu_->sum_squares(got.data(), gg.f(), pc.data(), static_cast<int>(pc.size()));
  for (size_t i = 0; i < pc.size(); ++i) EXPECT_NEAR(want[i], got[i], 1e-9 * (1 + want[i])) << "piece " << i;
  // AdamW
  {
    const auto ap = pieces(0.99f, 1.0f, 0.98f);
    std::vector<float> p = p0, m = m0, v = v0;
    cpu_.adamw_step(p.data(), m.data(), v.data(), g.data(), ap.data(), static_cast<int>(ap.size()), constants());
    Mirror gp(*gpu_, p0), gm(*gpu_, m0), gv(*gpu_, v0);
    gpu_->adamw_step(gp.f(), gm.f(), gv.f(), gg.f(), ap.data(), static_cast<int>(ap.size()), constants());
    EXPECT_TRUE(close(p, gp.host(), 1e-6, 1e-7));
    EXPECT_TRUE(close(m, gm.host(), 1e-6, 1e-8));
    EXPECT_TRUE(close(v, gv.host(), 1e-6, 1e-9));
  }
  // LAMB direction + apply
  {
    const auto dp = pieces(0.01f, 0.0f, 0.1f);
    std::vector<float> p = p0, m = m0, v = v0, u(n, 0.0f);
    std::vector<double> sums(2 * dp.size()), gsums(2 * dp.size());
    cpu_.lamb_direction(u.data(), m.data(), v.data(), p.data(), g.data(), dp.data(), static_cast<int>(dp.size()),
                        constants(), sums.data());
    Mirror gp(*gpu_, p0), gm(*gpu_, m0), gv(*gpu_, v0), gu(*gpu_, std::vector<float>(n, 0.0f));
    gpu_->lamb_direction(gu.f(), gm.f(), gv.f(), gp.f(), gg.f(), dp.data(), static_cast<int>(dp.size()),
                         constants(), gsums.data());
    EXPECT_TRUE(close(u, gu.host(), 1e-5, 1e-6));
    for (size_t i = 0; i < sums.size(); ++i) EXPECT_NEAR(sums[i], gsums[i], 1e-5 * (1 + sums[i])) << i;
    const auto lp = pieces(0.003f, 0.002f, 0.001f);
    cpu_.lamb_apply(p.data(), u.data(), lp.data(), static_cast<int>(lp.size()));
    gpu_->lamb_apply(gp.f(), gu.f(), lp.data(), static_cast<int>(lp.size()));
    EXPECT_TRUE(close(p, gp.host(), 1e-5, 1e-6));
  }
}

TEST_F(CudaOptimizer, ShardedOptimizerStepsMatchCpu) {
  const std::vector<TensorSegment> segments = {
      {"w", 0, 3000, true, true}, {"b", 3000, 17, false, false}, {"ln", 3017, 2100, false, false}};
  const size_t total = 5117;
  for (model::OptimizerKind kind : {model::OptimizerKind::kAdam, model::OptimizerKind::kLamb}) {
    OptimizerOptions o;
    o.kind = kind;
    o.weight_decay = 0.1;
    o.max_grad_norm = 0.5;
    const ShardRange shard{0, total};
    ShardedOptimizer on_cpu(o, segments, shard, {}, &cpu_);
    ShardedOptimizer on_gpu(o, segments, shard, {}, gpu_.get());
    std::vector<float> p = random_values(total, 9);
    Mirror gp(*gpu_, p);
    for (int step = 0; step < 5; ++step) {
      const auto g = random_values(total, 100 + step, -3, 3);
      Mirror gg(*gpu_, g);
      const StepStats a = on_cpu.step(p.data(), g.data(), 1e-2);
      const StepStats b = on_gpu.step(gp.f(), gg.f(), 1e-2);
      EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-5 * a.grad_norm);
      EXPECT_NEAR(a.clip_coef, b.clip_coef, 1e-5);
    }
    EXPECT_TRUE(close(p, gp.host(), 1e-4, 1e-6));
    EXPECT_TRUE(close(on_cpu.exp_avg(), on_gpu.exp_avg(), 1e-4, 1e-7));
    EXPECT_TRUE(close(on_cpu.exp_avg_sq(), on_gpu.exp_avg_sq(), 1e-4, 1e-9));
    for (size_t i = 0; i < segments.size(); ++i) {
      EXPECT_NEAR(on_cpu.last_trust_ratios()[i], on_gpu.last_trust_ratios()[i], 1e-4);
    }
  }
}

}  // namespace
}  // namespace megascale::engine
