// engine/microbench.cc: see microbench.h.
#include "engine/microbench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <fmt/format.h>

#include "engine/model_chunk.h"
#include "engine/optimizer.h"
#include "model/engine_ops.h"
#include "model/least_squares.h"
#include "model/profile.h"

namespace megascale::engine {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Timing {
  double median_s = 0;
  double spread = 0;
};

// One warm-up call, then repeats until `repeats` calls and `min_point_s` seconds.
template <class F>
Timing time_point(const MicroPlan& plan, F&& f) {
  f();
  std::vector<double> t;
  double total = 0;
  constexpr size_t kMaxRepeats = 100000;
  while ((static_cast<int>(t.size()) < plan.repeats || total < plan.min_point_s) && t.size() < kMaxRepeats) {
    const double t0 = now_s();
    f();
    const double dt = now_s() - t0;
    t.push_back(dt);
    total += dt;
  }
  std::sort(t.begin(), t.end());
  Timing r;
  r.median_s = t[t.size() / 2];
  r.spread = r.median_s > 0 ? (t.back() - t.front()) / r.median_s : 0.0;
  return r;
}

// Deterministic, well-scaled values (no denormals, no overflow in exp).
void fill(float* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.5f;
  }
}

std::vector<int64_t> axis(int64_t lo, int64_t hi, bool half_octaves) {
  std::vector<int64_t> v;
  for (int64_t a = lo; a <= hi; a *= 2) {
    v.push_back(a);
    if (half_octaves && a * 3 / 2 <= hi) v.push_back(a * 3 / 2);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// A size-1 communicator for the optimizer kernels: no reduction happens, only
// the local loops the trainer runs.
class SelfComm : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void all_reduce_sum(float*, size_t) override {}
  void all_gather(const float* send, size_t count, float* recv) override {
    std::copy(send, send + count, recv);
  }
  void reduce_scatter_sum(const float* send, size_t count, float* recv) override {
    std::copy(send, send + count, recv);
  }
  void broadcast(float*, size_t, int) override {}
  std::unique_ptr<Request> isend(const float*, size_t, int, int) override {
    throw std::logic_error("SelfComm: no p2p");
  }
  std::unique_ptr<Request> irecv(float*, size_t, int, int) override {
    throw std::logic_error("SelfComm: no p2p");
  }
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<SelfComm>(); }
};

// Buffers reused across points (the largest size seen so far).
class Scratch {
 public:
  explicit Scratch(Device& d) : dev_(d) {}
  float* get(int slot, size_t floats) {
    if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(slot + 1);
    DeviceBuffer& b = slots_[slot];
    if (b.bytes() < floats * sizeof(float)) {
      b = DeviceBuffer(dev_, floats * sizeof(float));
      fill(b.floats(), floats, static_cast<uint32_t>(slot + 1));
    }
    return b.floats();
  }

 private:
  Device& dev_;
  std::vector<DeviceBuffer> slots_;
};

// Operands that a training step finds in memory rather than in cache (a
// GEMM's weights or stashed activation and its output; attention's stash)
// rotate through an arena larger than the last-level cache, so every repeat
// reads and writes them cold, as the step does. 128 MiB: four times the L3 of
// this project's machine (32 MiB, sysfs cache/index3). Measured there: a
// 192 x 576 x 192 GEMM takes 180 us on warm operands and 253 us with all three
// from memory; inside a training step it took about 15% more than warm.
class Arena {
 public:
  explicit Arena(Device& d) : buf_(d, kFloats * sizeof(float)) { fill(buf_.floats(), kFloats, 17); }
  // A region of `floats` not used for as long as possible (round robin).
  float* next(size_t floats) {
    const size_t rounded = (floats + 15) / 16 * 16;
    if (rounded > kFloats) throw std::logic_error("microbench: operand larger than the arena");
    if (at_ + rounded > kFloats) at_ = 0;
    float* p = buf_.floats() + at_;
    at_ += rounded;
    return p;
  }

 private:
  static constexpr size_t kFloats = size_t{32} << 20;  // 128 MiB
  DeviceBuffer buf_;
  size_t at_ = 0;
};

constexpr int kRowLength = 512;        // C, OC or F of the row-wise kernels
constexpr int kVocabRow = 1024;        // V of a cross-entropy row
constexpr int kEmbeddingVocab = 1024;  // rows of the embedding table
constexpr size_t kSegment = 65536;     // tensor size the optimizer sweeps over
constexpr int kAttentionHeads = 4;     // heads per attention call

// One kernel of model::kCpuKernels on `elements`, as the engine calls it.
class KernelRunner {
 public:
  KernelRunner(Device& dev, Scratch& s) : dev_(dev), s_(s) {}

  std::function<void()> make(const std::string& k, bool backward, size_t e) {
    Device& d = dev_;
    const int row = static_cast<int>(std::min<size_t>(e, kRowLength));
    const int rows = static_cast<int>(std::max<size_t>(1, e / row));
    float* a = s_.get(0, e);
    float* b = s_.get(1, e);
    float* c = s_.get(2, 2 * e);
    float* w = s_.get(3, kRowLength);
    float* bias = s_.get(4, kRowLength);
    float* stats = s_.get(5, 2 * static_cast<size_t>(rows) + 2 * (e / std::min<size_t>(e, kVocabRow) + 1));
    if (k == "layer_norm") {
      if (!backward) return [=, &d] { d.layer_norm_forward(c, stats, stats + rows, a, w, bias, rows, row); };
      return [=, &d] { d.layer_norm_backward(c, w, bias, b, a, w, stats, stats + rows, rows, row); };
    }
    if (k == "add") return [=, &d] { d.add(c, a, b, static_cast<size_t>(rows) * row); };
    if (k == "bias_add") return [=, &d] { d.bias_add(c, bias, rows, row); };
    if (k == "bias_grad") return [=, &d] { d.bias_backward(bias, a, rows, row); };
    if (k == "gelu") {
      if (!backward) return [=, &d] { d.gelu_forward(c, a, e); };
      return [=, &d] { d.gelu_backward(c, a, b, e); };
    }
    if (k == "swiglu") {
      float* in = s_.get(6, 2 * e);
      if (!backward) return [=, &d] { d.swiglu_forward(c, in, rows, row); };
      return [=, &d] { d.swiglu_backward(c, in, b, rows, row); };
    }
    if (k == "cross_entropy") {
      const int v = static_cast<int>(std::min<size_t>(e, kVocabRow));
      const int n = static_cast<int>(std::max<size_t>(1, e / v));
      int32_t* targets = targets_(n, v);
      float* mx = stats;
      float* sum = stats + n;
      float* tgt = stats + 2 * n;
      float* loss = s_.get(7, n);
      float* dl = s_.get(8, n);
      if (!backward) {
        return [=, &d] {
          d.cross_entropy_row_max(mx, a, n, v);
          d.cross_entropy_partials(sum, tgt, a, mx, targets, 0, n, v);
          d.cross_entropy_loss(loss, sum, tgt, n);
        };
      }
      d.cross_entropy_row_max(mx, a, n, v);
      d.cross_entropy_partials(sum, tgt, a, mx, targets, 0, n, v);
      return [=, &d] { d.cross_entropy_backward(c, a, mx, sum, targets, dl, 0, n, v); };
    }
    if (k == "embedding") {
      int32_t* tokens = targets_(rows, kEmbeddingVocab);
      float* table = s_.get(9, static_cast<size_t>(kEmbeddingVocab) * row);
      if (!backward) return [=, &d] { d.embedding_forward(c, tokens, table, 0, rows, kEmbeddingVocab, row); };
      return [=, &d] { d.embedding_backward(table, a, tokens, 0, rows, kEmbeddingVocab, row); };
    }
    if (k == "position_embedding") {
      float* table = s_.get(10, static_cast<size_t>(rows) * row);
      if (!backward) return [=, &d] { d.position_embedding_forward(c, table, 0, rows, 1, row); };
      return [=, &d] { d.position_embedding_backward(table, a, 0, rows, 1, row); };
    }
    if (k == "copy") return [=, &d] { d.copy(c, a, e * sizeof(float)); };
    if (k == "fill_zero") return [=, &d] { d.fill_zero(c, e * sizeof(float)); };
    if (k == "clip_grad" || k == "adamw" || k == "lamb") return optimizer(k, e);
    throw std::logic_error("microbench: no runner for kernel '" + k + "'");
  }

 private:
  int32_t* targets_(int n, int v) {
    ids_.resize(std::max<size_t>(ids_.size(), static_cast<size_t>(n)));
    uint32_t x = 12345;
    for (int i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      ids_[i] = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(v));
    }
    return ids_.data();
  }

  // PipelineExecutor::clip_and_step on one chunk: the norm and the scale
  // (clip_grad), or ShardedOptimizer::step (adamw / lamb), over `e` elements
  // in tensors of kSegment.
  std::function<void()> optimizer(const std::string& k, size_t e) {
    std::vector<TensorSegment> segs;
    for (size_t at = 0; at < e; at += kSegment) {
      std::string name = "t";
      name.append(std::to_string(at / kSegment));  // (not "t" + ...: g++ 12's -Wrestrict false positive)
      segs.push_back(TensorSegment{name, at, std::min(kSegment, e - at), true, false, false});
    }
    OptimizerOptions oo;
    oo.kind = k == "lamb" ? model::OptimizerKind::kLamb : model::OptimizerKind::kAdam;
    oo.weight_decay = 0.01;
    oo.max_grad_norm = 1.0;
    // In a step the optimizer's parameters, gradients and moments come from
    // memory (last touched a step ago): enough independent copies that their
    // state (16 bytes per element) exceeds the arena, rotated.
    const size_t copies = std::clamp<size_t>((size_t{128} << 20) / (16 * e + 1), 1, 64);
    auto state = std::make_shared<std::vector<Copy>>();
    for (size_t i = 0; i < copies; ++i) {
      Copy c;
      c.opt = std::make_shared<ShardedOptimizer>(oo, segs, ShardRange{0, e}, OptimizerComms{});
      c.params.assign(e, 0.01f);
      c.grads.resize(e);
      fill(c.grads.data(), e, static_cast<uint32_t>(i + 3));
      state->push_back(std::move(c));
    }
    auto next = std::make_shared<size_t>(0);
    if (k == "clip_grad") {
      // The norm, then one scaling pass (alternately by c and 1/c, which keeps
      // the values in range), as clip_and_step does.
      auto flip = std::make_shared<bool>(false);
      return [state, next, flip, e] {
        Copy& c = (*state)[(*next)++ % state->size()];
        const double norm = c.opt->global_grad_norm(c.grads.data());
        const float coef = static_cast<float>(*flip ? norm + 1e-6 : 1.0 / (norm + 1e-6));
        *flip = !*flip;
        for (size_t i = 0; i < e; ++i) c.grads[i] *= coef;
      };
    }
    return [state, next] {
      Copy& c = (*state)[(*next)++ % state->size()];
      c.opt->step(c.params.data(), c.grads.data(), 1e-6);
    };
  }

  struct Copy {
    std::shared_ptr<ShardedOptimizer> opt;
    std::vector<float> params, grads;
  };

  Device& dev_;
  Scratch& s_;
  std::vector<int32_t> ids_;
};

// Sums the duration of every compute op by (name, pass).
class RecordingObserver : public OpObserver {
 public:
  void op_begin(const OpEvent&) override { t0_ = now_s(); }
  void op_end(const OpEvent& e) override {
    if (!recording || e.kind != model::LayerStepKind::kCompute) return;
    auto& [seconds, count] = totals[{e.name, e.backward}];
    const double d = now_s() - t0_;
    seconds += d;
    ++count;
    event_s += d;
    ++events;
  }
  bool recording = false;
  std::map<std::pair<std::string, bool>, std::pair<double, int>> totals;
  double event_s = 0;  // every recorded event's time
  int events = 0;

 private:
  double t0_ = 0;
};

// One in-situ pass: warm-up, then `iterations` of F/B per micro-batch.
std::vector<InsituObservation> run_insitu(Device& device, const InsituModel& im, int iterations, int ranks) {
  RecordingObserver obs;
  ModelChunk chunk(ChunkConfig::whole_model(im.model, im.micro_batch), device, nullptr, &obs);
  const size_t tokens = static_cast<size_t>(im.micro_batch) * im.model.seq_len;
  std::vector<int32_t> ids(tokens), labels(tokens);
  uint32_t x = 99;
  for (size_t i = 0; i < tokens; ++i) {
    x = x * 1664525u + 1013904223u;
    ids[i] = static_cast<int32_t>((x >> 8) % static_cast<uint32_t>(im.model.vocab));
    labels[i] = static_cast<int32_t>((x >> 4) % static_cast<uint32_t>(im.model.vocab));
  }
  MicroBatchData data{ids.data(), labels.data()};
  double wall_s = 0;
  for (int it = 0; it <= iterations; ++it) {
    obs.recording = it > 0;
    chunk.zero_grad();
    for (int mb = 0; mb < im.microbatches; ++mb) {
      const double t0 = now_s();
      chunk.forward(mb, nullptr, data, nullptr);
      chunk.backward(mb, nullptr, nullptr, 1.0f / static_cast<float>(im.microbatches));
      if (it > 0) wall_s += now_s() - t0;
    }
  }
  std::vector<InsituObservation> out;
  for (const auto& [key, v] : obs.totals) {
    out.push_back({ranks, im.name, key.first, key.second, v.second, v.first});
  }
  // The time inside forward / backward outside every op (the host's work
  // between ops), as a pseudo-op "(between ops)" with the event count.
  out.push_back({ranks, im.name, "(between ops)", false, obs.events, std::max(0.0, wall_s - obs.event_s)});
  return out;
}

// Median over ranks of the per-rank medians (all ranks time their own copy).
double across_ranks(Comm& world, double own_s, std::vector<float>* scratch) {
  scratch->assign(world.size(), 0.0f);
  const float mine = static_cast<float>(own_s);
  world.all_gather(&mine, 1, scratch->data());
  double sum = 0;
  for (float v : *scratch) sum += v;
  return sum / world.size();
}


// The in-situ fit (model/profile_tables.h InsituTable): per busy rank count,
// every (model, op, pass) of the in-situ passes is a row: its measured seconds
// against its table times by class (gemm, attention, kernel) and its event
// count (the per-op gap); non-negative least squares, leave-one-out over the
// models.
void fit_insitu(const MicroResult& r, const MicroPlan& plan, model::GpuProfile* p, model::ProfileTables* tables) {
  std::vector<model::InsituPoint> points;
  std::vector<std::string> runs;
  double loo = 0;
  std::set<int> rank_counts;
  for (const InsituObservation& o : r.insitu) rank_counts.insert(o.ranks);
  for (int ranks : rank_counts) {
    model::GpuProfile prof = *p;
    prof.busy_ranks = ranks;
    std::vector<std::vector<double>> rows;
    std::vector<double> b, w;
    std::vector<std::string> groups;
    double between_s = 0;
    int events = 0;
    for (const InsituModel& im : plan.insitu) {
      model::Scenario s;
      s.model = im.model;
      s.parallel.micro_batch = im.micro_batch;
      s.parallel.global_batch = im.micro_batch * im.microbatches;
      s.hardware.gpu = "cpu";
      s.cluster.gpus = 1;
      prof.cold_fraction = model::cold_fraction(s, prof);
      std::vector<model::OperatorCost> ops = model::job_layer_operators(s, prof);
      for (auto&& extra : {model::job_embedding_operators(s, prof), model::job_output_operators(s, prof)}) {
        ops.insert(ops.end(), extra.begin(), extra.end());
      }
      for (const InsituObservation& o : r.insitu) {
        if (o.ranks != ranks || o.model != im.name) continue;
        if (o.op == "(between ops)") {
          between_s += o.seconds;
          events += o.events;
          continue;
        }
        const int i = model::find_operator(ops, o.op);
        if (i < 0) continue;
        // Events per op occurrence: the engine splits some ops into two
        // scopes (cross-entropy, embedding); an op runs once per layer.
        const int per_layer = o.op == "embedding" || o.op == "final_ln" || o.op == "logits" || o.op == "cross_entropy"
                                  ? 1
                                  : im.model.layers;
        const double occurrences = static_cast<double>(per_layer) * im.microbatches * plan.insitu_iterations;
        const model::CallClassTimes c =
            model::call_class_times(o.backward ? ops[i].bwd_calls : ops[i].fwd_calls, prof);
        rows.push_back({occurrences * c.gemm_s, occurrences * c.attention_s, occurrences * c.kernel_s});
        b.push_back(o.seconds);
        w.push_back(o.seconds > 0 ? 1.0 / o.seconds : 0.0);  // every op counts by its relative error
        groups.push_back(im.name);
      }
      if (ranks == *rank_counts.begin()) runs.push_back(im.name);
    }
    if (rows.empty()) continue;
    const std::vector<double> x = model::weighted_nnls(rows, b, w);
    const model::LeaveOneOut l = model::leave_one_out(rows, b, groups, w);
    loo = std::max(loo, l.mean_abs_error);
    points.push_back({ranks, "gemm", x[0]});
    points.push_back({ranks, "attention", x[1]});
    points.push_back({ranks, "kernel", x[2]});
    // Measured, not fitted: the host's time between ops per op.
    points.push_back({ranks, "gap_us", events > 0 ? between_s / events * 1e6 : 0.0});
  }
  if (points.empty()) return;
  tables->insitu = model::InsituTable(points);
  p->provenance["tables.insitu"] = model::Provenance{
      "fitted",
      "non-negative least squares of each op's in-situ time (ModelChunk forward/backward, timed by OpObserver) on "
      "its table times by class and its count; leave-one-out over the models, the worse rank count",
      "", "", runs, loo};
}

// The machine's last-level cache: the highest level under
// /sys/devices/system/cpu/cpu*/cache/index*, one size per distinct
// shared_cpu_list (0 when sysfs does not say).
double last_level_cache_bytes() {
  auto read = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    if (f == nullptr) return std::string();
    char buf[256] = {0};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    std::string s(buf, n);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  };
  int top = 0;
  std::map<std::string, double> instances;  // shared_cpu_list -> bytes, at the top level
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int cpu = 0; cpu < cores; ++cpu) {
    for (int i = 0; i < 8; ++i) {
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index" + std::to_string(i);
      const std::string level = read(dir + "/level"), size = read(dir + "/size");
      if (level.empty() || size.empty()) continue;
      const int l = std::atoi(level.c_str());
      double bytes = std::atof(size.c_str());
      if (size.back() == 'K') bytes *= 1024;
      if (size.back() == 'M') bytes *= 1024 * 1024;
      if (l > top) {
        top = l;
        instances.clear();
      }
      if (l == top) instances[read(dir + "/shared_cpu_list")] = bytes;
    }
  }
  double total = 0;
  for (const auto& [cpus, bytes] : instances) total += bytes;
  return total;
}

}  // namespace

MicroPlan default_micro_plan(bool quick) {
  MicroPlan p;
  p.label = quick ? "quick" : "default";
  const std::vector<int64_t> ax = quick ? axis(16, 2048, false) : axis(16, 4096, true);
  const double cap = quick ? std::pow(2.0, 30) : std::pow(2.0, 31);
  for (const char* layout : {"nt", "tn", "nn"}) {
    for (int64_t m : ax) {
      for (int64_t n : ax) {
        for (int64_t k : ax) {
          if (2.0 * m * n * k <= cap) p.gemms.push_back({layout, m, n, k});
        }
      }
    }
  }
  for (int64_t s : quick ? axis(16, 1024, false) : axis(16, 2048, true)) p.attention_seqs.push_back(static_cast<int>(s));
  p.attention_head_dims = quick ? std::vector<int>{16, 32, 64, 128} : std::vector<int>{16, 32, 64, 128, 256};
  for (int64_t e : axis(256, 1 << 24, !quick)) p.kernel_elements.push_back(static_cast<double>(e));
  for (int64_t b : axis(4, 64 << 20, !quick)) p.collective_bytes.push_back(static_cast<double>(b));
  // In-situ models: small to medium, GeLU and SwiGLU, sequential and parallel
  // blocks, MHA and GQA, with and without a window.
  auto gpt = [](const char* name, int layers, int hidden, int heads, int kv, int seq, int vocab, int mb,
                model::MlpKind mlp, model::BlockKind block, int window) {
    InsituModel m;
    m.name = name;
    m.model.name = name;
    m.model.layers = layers;
    m.model.hidden = hidden;
    m.model.heads = heads;
    m.model.kv_heads = kv;
    m.model.seq_len = seq;
    m.model.vocab = vocab;
    m.model.ffn_hidden = 4 * hidden;
    m.model.mlp = mlp;
    m.model.block = block;
    m.model.attention_window = window;
    m.micro_batch = mb;
    m.microbatches = 2;
    return m;
  };
  using model::BlockKind;
  using model::MlpKind;
  p.insitu.push_back(gpt("insitu-h128-s64-b4", 2, 128, 4, 4, 64, 512, 4, MlpKind::kGelu, BlockKind::kSequential, 0));
  p.insitu.push_back(gpt("insitu-h512-s128-b2", 2, 512, 8, 8, 128, 1024, 2, MlpKind::kGelu, BlockKind::kSequential, 0));
  if (!quick) {
    p.insitu.push_back(gpt("insitu-h256-s256-b1", 2, 256, 4, 4, 256, 512, 1, MlpKind::kGelu, BlockKind::kSequential, 0));
    p.insitu.push_back(gpt("insitu-h384-s128-b2-swiglu-gqa-parallel-w32", 2, 384, 6, 2, 128, 768, 2, MlpKind::kSwiGlu,
                           BlockKind::kParallel, 32));
  }
  if (quick) {
    p.repeats = 3;
    p.min_point_s = 1e-3;
    p.insitu_iterations = 2;
  }
  return p;
}

void add_scenario_shapes(const model::Scenario& s, MicroPlan* plan) {
  model::GpuProfile shape_only;  // the engine's calls need only the kind
  shape_only.kind = "cpu";
  std::set<GemmShape> gemms(plan->gemms.begin(), plan->gemms.end());
  std::set<int> seqs(plan->attention_seqs.begin(), plan->attention_seqs.end());
  std::set<int> hds(plan->attention_head_dims.begin(), plan->attention_head_dims.end());
  std::set<double> elems(plan->kernel_elements.begin(), plan->kernel_elements.end());
  auto visit = [&](const std::vector<model::OperatorCost>& ops) {
    for (const model::OperatorCost& op : ops) {
      for (const auto* calls : {&op.fwd_calls, &op.bwd_calls}) {
        for (const model::KernelCall& c : *calls) {
          if (c.kind == model::CallKind::kGemm) {
            for (const char* layout : {"nt", "tn", "nn"}) {
              // A shape appears in one layout; its transposed roles in the others.
              gemms.insert({layout, c.m, c.n, c.k});
            }
          } else if (c.kind == model::CallKind::kAttention) {
            seqs.insert(c.seq);
            hds.insert(c.head_dim);
          } else if (c.count > 0) {  // (a layer-less chunk's calls have nothing to time)
            elems.insert(c.count);
          }
        }
      }
    }
  };
  visit(model::job_layer_operators(s, shape_only));
  visit(model::job_embedding_operators(s, shape_only));
  visit(model::job_output_operators(s, shape_only));
  for (int r = 0; r < s.parallel.pp; ++r) {
    // A chunk with no layers, embedding or head (a Megatron-Core layout's
    // empty virtual stage) steps no parameters: nothing to time.
    for (const model::KernelCall& c : model::engine_rank_step_calls(s, r)) {
      if (c.count > 0) elems.insert(c.count);
    }
  }
  plan->gemms.assign(gemms.begin(), gemms.end());
  plan->attention_seqs.assign(seqs.begin(), seqs.end());
  plan->attention_head_dims.assign(hds.begin(), hds.end());
  plan->kernel_elements.assign(elems.begin(), elems.end());
}

MicroResult run_microbenchmarks(Device& device, Comm& world, const MicroPlan& plan,
                                const MicroProgress& progress) {
  const double t_start = now_s();
  MicroResult out;
  out.ranks = world.size();
  const bool lead = world.rank() == 0;
  auto say = [&](const std::string& line) {
    if (lead && progress) progress(line);
  };
  Scratch scratch(device);
  KernelRunner kernels(device, scratch);
  Arena cold(device);
  std::vector<float> gather;

  // Passes: rank 0 alone (ranks = 1), then every rank at once.
  std::vector<int> passes = {1};
  if (plan.concurrent && world.size() > 1) passes.push_back(world.size());

  for (int busy : passes) {
    const bool mine = busy > 1 || lead;
    // Runs `f` on the busy ranks and returns the time rank 0 reports.
    auto measure = [&](auto&& f) -> Timing {
      world.barrier();
      Timing t;
      if (mine) t = time_point(plan, f);
      if (busy > 1) t.median_s = across_ranks(world, t.median_s, &gather);
      return t;
    };

    // ---- GEMMs ----
    const size_t total = plan.gemms.size();
    for (size_t i = 0; i < total; ++i) {
      const GemmShape& g = plan.gemms[i];
      // A (the activation or gradient just produced) warm; B (weights or the
      // stashed input) and C (the output or the weight gradient) cold.
      float* A = scratch.get(20, static_cast<size_t>(g.m * g.k));
      const size_t b_floats = static_cast<size_t>(g.k * g.n), c_floats = static_cast<size_t>(g.m * g.n);
      const bool ta = g.layout == "tn", tb = g.layout == "nt";
      const float beta = g.layout == "tn" ? 1.0f : 0.0f;
      const Timing t = measure([&] { device.matmul(cold.next(c_floats), A, cold.next(b_floats), static_cast<int>(g.m),
                                                   static_cast<int>(g.n), static_cast<int>(g.k), ta, tb, beta); });
      if (lead) out.gemm.push_back({busy, g.layout, g.m, g.n, g.k, t.median_s, t.spread, false});
      // Octave shapes also warm (every operand reused in cache), for jobs
      // whose working set fits the cache (GemmTable blends the two).
      const auto octave = [](int64_t v) { return (v & (v - 1)) == 0; };
      if (octave(g.m) && octave(g.n) && octave(g.k)) {
        float* B = scratch.get(21, b_floats);
        float* C = scratch.get(22, c_floats);
        const Timing w = measure([&] { device.matmul(C, A, B, static_cast<int>(g.m), static_cast<int>(g.n),
                                                     static_cast<int>(g.k), ta, tb, beta); });
        if (beta != 0.0f) fill(C, c_floats, 7);  // keep the accumulator bounded
        if (lead) out.gemm.push_back({busy, g.layout, g.m, g.n, g.k, w.median_s, w.spread, true});
      }
      if (i % 250 == 0 || i + 1 == total) {
        say("gemm (" + std::to_string(busy) + " busy) " + std::to_string(i + 1) + "/" + std::to_string(total) +
            "  " + g.layout + " " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k) +
            fmt::format(": {:.1f} GFLOP/s", 2.0 * g.m * g.n * g.k / t.median_s / 1e9));
      }
    }

    // ---- attention ----
    for (int hd : plan.attention_head_dims) {
      for (int T : plan.attention_seqs) {
        const int nh = kAttentionHeads;
        const size_t width = static_cast<size_t>(3 * nh) * hd;
        // Forward: qkv just produced (warm), output and probabilities written
        // cold; backward: the stashed qkv and probabilities read cold, the
        // incoming gradient warm, dqkv written cold.
        const size_t qkv_floats = static_cast<size_t>(T) * width, att_floats = static_cast<size_t>(T) * nh * hd;
        const size_t probs_floats = static_cast<size_t>(nh) * T * T;
        float* qkv = scratch.get(30, qkv_floats);
        float* dout = scratch.get(34, att_floats);
        std::vector<int> windows = {0};
        if (T / 8 >= 1 && T / 8 < T - 1) windows.push_back(T / 8);
        for (int w : windows) {
          const Timing f = measure([&] {
            device.attention_forward(cold.next(att_floats), cold.next(probs_floats), qkv, T, 1, nh, nh, hd, w);
          });
          const Timing b = measure([&] {
            device.attention_backward(cold.next(qkv_floats), dout, cold.next(qkv_floats), cold.next(probs_floats), T, 1,
                                      nh, nh, hd);
          });
          // Warm: every buffer reused in cache.
          float* att = scratch.get(31, att_floats);
          float* probs = scratch.get(32, probs_floats);
          float* dqkv = scratch.get(33, qkv_floats);
          const Timing fw = measure([&] { device.attention_forward(att, probs, qkv, T, 1, nh, nh, hd, w); });
          const Timing bw = measure([&] { device.attention_backward(dqkv, dout, qkv, probs, T, 1, nh, nh, hd); });
          if (lead) {
            out.attention.push_back({busy, T, hd, w, false, f.median_s / nh, f.spread, false});
            out.attention.push_back({busy, T, hd, w, true, b.median_s / nh, b.spread, false});
            out.attention.push_back({busy, T, hd, w, false, fw.median_s / nh, fw.spread, true});
            out.attention.push_back({busy, T, hd, w, true, bw.median_s / nh, bw.spread, true});
          }
        }
      }
      say("attention (" + std::to_string(busy) + " busy) head dim " + std::to_string(hd) + " done");
    }

    // ---- kernels ----
    for (const std::string& k : model::kCpuKernels) {
      const bool has_bwd = k == "layer_norm" || k == "gelu" || k == "swiglu" || k == "cross_entropy" ||
                           k == "embedding" || k == "position_embedding";
      for (bool bwd : {false, true}) {
        if (bwd && !has_bwd) continue;
        for (double e : plan.kernel_elements) {
          const auto f = kernels.make(k, bwd, static_cast<size_t>(e));
          const Timing t = measure(f);
          if (lead) out.kernels.push_back({busy, k, bwd, e, t.median_s, t.spread});
        }
      }
      say("kernels (" + std::to_string(busy) + " busy) " + k + " done");
    }

    // ---- whole models in situ ----
    for (const InsituModel& im : plan.insitu) {
      world.barrier();
      if (mine) {
        std::vector<InsituObservation> obs = run_insitu(device, im, plan.insitu_iterations, busy);
        if (lead) out.insitu.insert(out.insitu.end(), obs.begin(), obs.end());
      }
      say("in situ (" + std::to_string(busy) + " busy) " + im.name + " done");
    }
  }

  // ---- collectives: groups of 2, 4, ... and the whole world ----
  std::vector<int> groups;
  for (int n = 2; n <= world.size(); n *= 2) groups.push_back(n);
  if (world.size() > 1 && (groups.empty() || groups.back() != world.size())) groups.push_back(world.size());
  for (int n : groups) {
    const bool member = world.rank() < n;
    std::unique_ptr<Comm> g = world.split(member ? 0 : 1, world.rank());
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"}) {
      for (double bytes : plan.collective_bytes) {
        const size_t floats = static_cast<size_t>(bytes / 4);
        const std::string o = op;
        size_t count = floats;
        if (o == "all_gather" || o == "reduce_scatter") count = floats / n;
        if (count == 0 || (o == "sendrecv" && n != 2)) continue;
        // Warm: the same buffers every repeat (activations just produced);
        // cold: send and receive buffers rotated through the arena (a step's
        // gradient and parameter buffers come from memory).
        for (bool is_cold : {false, true}) {
          float* send = scratch.get(40, floats);
          float* recv = scratch.get(41, floats);
          auto run = [&] {
            if (is_cold) {
              send = cold.next(floats);
              recv = cold.next(floats);
            }
            if (o == "all_reduce") g->all_reduce_sum(send, count);
            if (o == "all_gather") g->all_gather(send, count, recv);
            if (o == "reduce_scatter") g->reduce_scatter_sum(send, count, recv);
            if (o == "sendrecv") {
              auto r = g->rank() == 0 ? g->isend(send, count, 1, 7) : g->irecv(recv, count, 0, 7);
              r->wait();
            }
          };
          // Each repeat starts together (a barrier) and takes the slowest rank.
          Timing t;
          world.barrier();
          if (member) {
            std::vector<double> ts;
            // Warm up, then agree on the repeat count (every rank must make the
            // same calls): enough for min_point_s at the slowest rank's pace.
            g->barrier();
            const double w0 = now_s();
            run();
            std::vector<float> warm(n);
            const float mine_warm = static_cast<float>(now_s() - w0);
            g->all_gather(&mine_warm, 1, warm.data());
            const double slowest = std::max(1e-7, static_cast<double>(*std::max_element(warm.begin(), warm.end())));
            const int reps = std::clamp(static_cast<int>(std::ceil(plan.min_point_s / slowest)),
                                        std::max(plan.repeats, 5), 2000);
            for (int i = 0; i < reps; ++i) {
              g->barrier();
              const double t0 = now_s();
              run();
              ts.push_back(now_s() - t0);
            }
            std::sort(ts.begin(), ts.end());
            t.median_s = ts[ts.size() / 2];
            t.spread = (ts.back() - ts.front()) / t.median_s;
            // The collective's time is its slowest rank's.
            std::vector<float> all(n);
            const float mine = static_cast<float>(t.median_s);
            g->all_gather(&mine, 1, all.data());
            t.median_s = *std::max_element(all.begin(), all.end());
          }
          if (lead) {
            out.collectives.push_back({o, "intra", n, o == "all_reduce" || o == "sendrecv" ? floats * 4.0 : count * 4.0 * n,
                                       t.median_s, t.spread, is_cold});
          }
        }
      }
      say("collectives over " + std::to_string(n) + " ranks: " + op + " done");
    }
  }
  world.barrier();
  out.seconds = now_s() - t_start;
  return out;
}

model::GpuProfile micro_profile(const MicroResult& r, const MicroPlan& plan, const std::string& host,
                                const std::string& date) {
  using model::Provenance;
  model::GpuProfile p;
  p.name = "cpu";
  p.kind = "cpu";
  p.dtype = "fp32";
  p.description = "the engine's CPU device (Eigen " MEGASCALE_CPU_ISA_FLAG ") and Open MPI on " + host;
  const std::string bench = "megascale calibrate micro (" + plan.label + " plan), engine/microbench.cc";
  auto measured = [&](const std::string& what) { return Provenance{"measured", bench + ": " + what, host, date, {}, -1}; };
  auto assumed = [&](const std::string& why) { return Provenance{"assumption", why, "", "", {}, -1}; };

  // Peak: the fastest single-rank GEMM of the sweep.
  double peak = 0;
  for (const model::GemmPoint& g : r.gemm) {
    if (g.ranks == 1) peak = std::max(peak, 2.0 * g.m * g.n * g.k / g.seconds);
  }
  p.peak_tflops = peak / 1e12;
  p.provenance["peak_tflops"] = measured("the fastest single-rank Device::matmul of the GEMM sweep");
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.cores = cores;
  p.provenance["cores"] = measured("std::thread::hardware_concurrency()");
  p.memory_bytes = static_cast<double>(pages) * page / cores;
  p.provenance["memory_bytes"] = measured("physical memory (sysconf) / cores");
  if (const double cache = last_level_cache_bytes(); cache > 0) {
    p.cache_bytes = cache;
    p.provenance["cache_bytes"] =
        measured("the largest cache level in /sys/devices/system/cpu/cpu*/cache, summed over its distinct instances");
  }
  // Memory bandwidth: the copy kernel at its largest size (read + write).
  double copy_gbs = 0, copy_e = 0;
  for (const model::KernelPoint& k : r.kernels) {
    if (k.kernel == "copy" && k.ranks == 1 && k.elements > copy_e) {
      copy_e = k.elements;
      copy_gbs = 2.0 * 4.0 * k.elements / k.seconds / 1e9;
    }
  }
  p.memory_gbs = copy_gbs;
  p.provenance["memory_gbs"] = measured("Device::copy at its largest size, bytes read + written");
  p.memory_efficiency = 1.0;
  p.provenance["memory_efficiency"] = assumed("memory_gbs is itself the measured copy bandwidth");
  p.kernel_launch_us = 0.0;
  p.provenance["kernel_launch_us"] = assumed("a CPU kernel is a function call; the kernel tables carry its fixed cost");
  // Fallback bandwidth of the intra-machine collectives: the largest all-reduce.
  double busbw = 0, biggest = 0;
  for (const model::CollectivePoint& c : r.collectives) {
    if (c.op == "all_reduce" && c.bytes > biggest) {
      biggest = c.bytes;
      busbw = c.bytes * model::busbw_factor("all_reduce", c.ranks) / c.seconds / 1e9;
    }
  }
  if (busbw > 0) {
    p.nvlink_busbw_gbs = busbw;
    p.provenance["nvlink_busbw_gbs"] = measured("busbw of the largest Comm::all_reduce_sum (MPI shared memory)");
  }
  p.activation_bytes = 4;
  p.provenance["activation_bytes"] = Provenance{"spec", "the engine computes in fp32 (engine/device.h)", "", "", {}, -1};
  p.param_gather_bytes = 4;
  p.provenance["param_gather_bytes"] =
      Provenance{"spec", "the engine all-gathers fp32 parameters (engine/pipeline_executor.cc)", "", "", {}, -1};
  p.data_load_s_per_sample = 0;
  p.provenance["data_load_s_per_sample"] = assumed(
      "the node loader prefetches the next batch on a thread and Trainer::run starts the step clock after "
      "loader->next() (engine/data_loader.h, engine/trainer.cc)");
  p.step_overhead_s = 0;
  p.provenance["step_overhead_s"] = assumed("not fitted yet (megascale calibrate fit)");
  p.op_gap_us = 0;
  p.provenance["op_gap_us"] = assumed("not fitted yet (megascale calibrate fit)");

  auto tables = std::make_shared<model::ProfileTables>();
  tables->gemm = model::GemmTable(r.gemm);
  tables->attention = model::AttentionTable(r.attention);
  tables->kernels = model::KernelTable(r.kernels);
  tables->collectives = model::CollectiveTable(r.collectives, {});
  p.tables = tables;
  fit_insitu(r, plan, &p, tables.get());
  p.provenance["tables.gemm"] = measured("Device::matmul, layouts nt (beta 0), tn (beta 1), nn (beta 0), median");
  p.provenance["tables.attention"] =
      measured("Device::attention_forward / attention_backward, 4 heads, seconds per (sequence x head), median");
  p.provenance["tables.kernels"] = measured("the engine's kernels as its layers call them, median");
  if (!r.collectives.empty()) {
    p.provenance["tables.collectives"] =
        measured("Comm (MPI) all_reduce_sum / all_gather / reduce_scatter_sum / isend+irecv, slowest rank, median");
  }
  return p;
}

}  // namespace megascale::engine
