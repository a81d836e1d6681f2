// tests/engine_gpu/model_gpu_test.cc: whole models on CudaDevice against the
// CPU engine.
//  - A 2-layer model (ModelChunk, forward + backward of two micro-batches):
//    loss and every gradient in fp32 mode against CpuDevice, for the GeLU /
//    sequential block / MHA model and the SwiGLU / parallel block / GQA /
//    sliding-window one.
//  - The Trainer (single GPU, NcclComm of one rank): fp32 losses of 5 steps
//    against the CPU Trainer; a bf16 run of 50 steps whose every loss is within
//    1% of the fp32 run's (Megatron-style mixed precision does not change the
//    curve at this scale).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/comm_threads.h"
#include "engine/cuda/comm_nccl.h"
#include "engine/cuda/device_cuda.h"
#include "engine/device_cpu.h"
#include "engine/model_chunk.h"
#include "engine/trainer.h"
#include "tests/engine_gpu/gpu_test_util.h"

namespace megascale::engine {
namespace {

using gpu_test::close;

model::ModelConfig two_layers(bool swiglu) {
  model::ModelConfig m;
  m.name = swiglu ? "tiny-swiglu" : "tiny-gelu";
  m.layers = 2;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = swiglu ? 2 : 4;
  m.seq_len = 24;
  m.vocab = 97;
  m.ffn_hidden = swiglu ? 96 : 256;
  if (swiglu) {
    m.mlp = model::MlpKind::kSwiGlu;
    m.block = model::BlockKind::kParallel;
    m.attention_window = 7;
  }
  return m;
}

struct Grads {
  std::vector<float> loss, params, grads;
};

Grads run_chunk(Device& device, const model::ModelConfig& m) {
  const int B = 3, T = m.seq_len;
  ModelChunk chunk(ChunkConfig::whole_model(m, B, 1, false, 11), device, nullptr);
  Grads out;
  chunk.zero_grad();
  for (int mb = 0; mb < 2; ++mb) {
    std::vector<int32_t> tokens(size_t(B) * T), labels(size_t(B) * T);
    for (size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = static_cast<int32_t>((i * 13 + mb * 5) % m.vocab);
      labels[i] = static_cast<int32_t>((i * 29 + 3 + mb) % m.vocab);
    }
    MicroBatchData data{tokens.data(), labels.data()};
    out.loss.push_back(chunk.forward(mb, nullptr, data, nullptr));
  }
  for (int mb = 1; mb >= 0; --mb) chunk.backward(mb, nullptr, nullptr, 0.5f);
  out.params.resize(chunk.num_params());
  out.grads.resize(chunk.num_params());
  device.copy_to_host(out.params.data(), chunk.params(), out.params.size() * sizeof(float));
  device.copy_to_host(out.grads.data(), chunk.grads(), out.grads.size() * sizeof(float));
  return out;
}

TEST(CudaModel, TwoLayerLossAndGradientsMatchCpuInFp32) {
  REQUIRE_CUDA();
  for (bool swiglu : {false, true}) {
    SCOPED_TRACE(swiglu ? "swiglu / parallel / GQA / window" : "gelu / sequential / MHA");
    const model::ModelConfig m = two_layers(swiglu);
    CpuDevice cpu;
    CudaDevice gpu;
    const Grads want = run_chunk(cpu, m), got = run_chunk(gpu, m);
    EXPECT_EQ(want.params, got.params);  // the same initialisation, bit for bit
    EXPECT_TRUE(close(want.loss, got.loss, 1e-5, 0));
    float scale = 0;
    for (float g : want.grads) scale = std::max(scale, std::fabs(g));
    // Gradients: relative 1e-3, absolute 1e-4 of the largest (tiny gradients
    // are sums of cancelling terms; their absolute error is what matters).
    EXPECT_TRUE(close(want.grads, got.grads, 1e-3, 1e-4 * scale));
  }
}

model::Scenario trainer_scenario(const std::string& gpu) {
  model::Scenario s;
  s.name = "gpu-trainer-test";
  s.model = two_layers(false);
  s.model.seq_len = 32;
  s.model.vocab = 64;
  s.parallel.micro_batch = 4;
  s.parallel.global_batch = 8;
  s.parallel.zero_stage = 1;
  s.hardware.gpu = gpu;
  s.cluster.gpus = 1;
  s.optimizations.optimizer = model::OptimizerKind::kAdam;
  return s;
}

class CudaTrainer : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_CUDA();
    std::string tmpl = (std::filesystem::temp_directory_path() / "megascale-gpu-trainer-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TrainOptions options(int steps, const std::string& device, const std::string& precision) const {
    TrainOptions o;
    o.steps = steps;
    o.learning_rate = 3e-3;
    o.seed = 5;
    o.work_dir = dir_ + "/work";
    o.job_name = "gpu-trainer-test-" + std::to_string(getpid());
    o.optimizer.max_grad_norm = 1.0;
    o.device.name = device;
    o.device.precision = precision;
    return o;
  }
  std::vector<double> losses(const model::Scenario& s, const TrainOptions& o) {
    auto world = make_thread_comms(1);
    auto node = make_thread_comms(1);
    std::unique_ptr<Device> device = make_device(o.device);
    std::unique_ptr<Comm> device_world = make_device_comm(*device, *world[0]);
    Comm& w = device_world ? *device_world : *world[0];
    Trainer trainer(s, o, w, *node[0], device.get());
    std::vector<double> out;
    trainer.run([&](const StepReport& r) { out.push_back(r.loss); });
    return out;
  }
  std::string dir_;
};

TEST_F(CudaTrainer, Fp32LossesMatchTheCpuTrainer) {
  const std::vector<double> cpu = losses(trainer_scenario("cpu"), options(5, "cpu", "fp32"));
  const std::vector<double> gpu = losses(trainer_scenario("H200-SXM-141GB"), options(5, "cuda", "fp32"));
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(cpu[i], gpu[i], 1e-4 * cpu[i]) << "step " << i + 1;
}

TEST_F(CudaTrainer, Bf16LossCurveOf50StepsWithinOnePercentOfFp32) {
  const model::Scenario s = trainer_scenario("H200-SXM-141GB");
  const std::vector<double> fp32 = losses(s, options(50, "cuda", "fp32"));
  const std::vector<double> bf16 = losses(s, options(50, "cuda", "bf16"));
  ASSERT_EQ(fp32.size(), 50u);
  ASSERT_EQ(bf16.size(), 50u);
  for (size_t i = 0; i < fp32.size(); ++i) {
    EXPECT_LE(std::fabs(bf16[i] - fp32[i]), 0.01 * fp32[i]) << "step " << i + 1;
  }
  EXPECT_LT(fp32.back(), fp32.front());  // it learns
}

}  // namespace
}  // namespace megascale::engine
