// engine/trainer.cc: data + executor + checkpoints + reports for one rank.
#include "engine/trainer.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#include <Eigen/Core>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/checkpoint.h"
#include "engine/data_loader.h"
#include "engine/dataset.h"
#include "engine/device_factory.h"
#include "engine/pipeline_executor.h"
#include "engine/process_groups.h"
#include "engine/trace.h"
#include "model/op_cost.h"
#include "model/profile.h"
#include "model/throughput.h"

namespace megascale::engine {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Tokens of the built-in synthetic corpus: enough for many distinct samples.
constexpr size_t kSyntheticTokens = size_t{1} << 18;

std::string synthetic_corpus_path(const TrainOptions& o, int vocab) {
  return o.work_dir + "/synthetic-v" + std::to_string(vocab) + "-s" + std::to_string(o.seed) + ".msds";
}

// The options and the layout facts the Trainer relies on; throws
// std::invalid_argument naming the first bad field. Every rank checks the same
// values before any collective, so a bad option fails every rank alike.
const TrainOptions& checked(const TrainOptions& o, const model::Scenario& s) {
  auto fail = [](const std::string& field, const std::string& why) {
    throw std::invalid_argument("TrainOptions." + field + ": " + why);
  };
  if (o.steps < 0) fail("steps", "must be >= 0, got " + std::to_string(o.steps));
  if (!std::isfinite(o.learning_rate) || o.learning_rate <= 0) {
    fail("learning_rate", fmt::format("must be a finite number > 0, got {}", o.learning_rate));
  }
  if (o.checkpoint_every < 0) {
    fail("checkpoint_every", "must be >= 0, got " + std::to_string(o.checkpoint_every));
  }
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty()) {
    fail("checkpoint_every", "needs checkpoint_dir");
  }
  if (o.data.empty() && o.work_dir.empty()) {
    fail("work_dir", "needed for the synthetic corpus when data is empty");
  }
  if (!std::isfinite(o.optimizer.weight_decay) || o.optimizer.weight_decay < 0) {
    fail("optimizer.weight_decay", "must be a finite number >= 0");
  }
  if (!std::isfinite(o.optimizer.max_grad_norm) || o.optimizer.max_grad_norm < 0) {
    fail("optimizer.max_grad_norm", "must be a finite number >= 0 (0: no clipping)");
  }
  const model::ParallelConfig& p = s.parallel;
  if (p.micro_batch < 1 || p.dp < 1 || p.global_batch < 1 ||
      p.global_batch % (p.dp * p.micro_batch) != 0) {
    throw std::invalid_argument("parallel.global_batch: " + std::to_string(p.global_batch) +
                                " is not a positive multiple of dp * micro_batch = " +
                                std::to_string(p.dp * p.micro_batch));
  }
  return o;
}

// Runs `fn` on this rank and agrees over `world`: when it throws on any rank,
// every rank throws — the failing rank its own exception, the others
// `peer_error(first failing rank)` — so no rank is left waiting in a later
// collective.
template <typename F, typename PeerError>
void on_every_rank(Comm& world, F fn, PeerError peer_error) {
  std::exception_ptr error;
  try {
    fn();
  } catch (...) {
    error = std::current_exception();
  }
  const float mine = error ? 1.0f : 0.0f;
  std::vector<float> all(static_cast<size_t>(world.size()));
  world.all_gather(&mine, 1, all.data());
  if (error) std::rethrow_exception(error);
  for (int r = 0; r < world.size(); ++r) {
    if (all[r] != 0.0f) peer_error(r);
  }
}

}  // namespace

double peak_flops_of(const model::Scenario& s) {
  const model::GpuProfile& p = model::hardware_profile(s);
  if (!p.is_cpu() || !(p.peak_tflops > 0)) {
    throw std::invalid_argument("hardware: the engine's MFU needs a cpu profile with peak_tflops (got '" + p.name + "')");
  }
  return p.peak_tflops * 1e12;
}

double peak_flops_for(const model::Scenario& s, const std::string& device) {
  if (device != "cuda") return peak_flops_of(s);
  const model::GpuProfile& p = model::hardware_profile(s);
  if (p.is_cpu() || !(p.peak_tflops > 0)) {
    throw std::invalid_argument("hardware: MFU on device \"cuda\" needs a GPU profile with peak_tflops (got '" +
                                p.name + "'); set [hardware] gpu, e.g. \"H200-SXM-141GB\"");
  }
  return p.peak_tflops * 1e12;
}

double cpu_gemm_peak_flops() {
  constexpr int n = 512;
  Eigen::MatrixXf a = Eigen::MatrixXf::Random(n, n), b = Eigen::MatrixXf::Random(n, n), c(n, n);
  double best_s = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    c.noalias() = a * b;
    best_s = std::min(best_s, seconds_since(t0));
  }
  return 2.0 * n * n * n / best_s;
}

struct Trainer::Impl {
  model::Scenario scenario;
  TrainOptions options;
  Comm& world;
  Comm& node;
  ProcessGroups groups;
  std::unique_ptr<Device> owned_device;  // make_device(options.device) when none is given
  Device* device;
  std::unique_ptr<TraceRecorder> trace;
  std::unique_ptr<PipelineExecutor> executor;
  std::unique_ptr<NodeDataLoader> loader;
  CheckpointLayout layout;
  int64_t start_step = 0;
  double load_s = 0;
  double peak_flops = 0;
  int lock_fd = -1;  // rank 0's flock on <checkpoint_dir>/LOCK, held for the run
  CheckpointPersister persister;  // the checkpoint being written in the background
  struct Persisting {
    int64_t step = 0;
    double stall_s = 0;  // the step's stall: snapshot to host memory (+ waiting for the previous write)
    uint64_t bytes = 0;
  } persisting;

  ~Impl() {
    if (lock_fd >= 0) ::close(lock_fd);  // releases the checkpoint_dir lock
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Impl(const model::Scenario& s, const TrainOptions& o, Comm& w, Comm& n, Device* given)
      : scenario(s),
        options(checked(o, s)),
        world(w),
        node(n),
        groups(w, s.parallel.tp, s.parallel.pp, s.parallel.dp, s.parallel.rank_order == model::RankOrder::kTpCpPpDp),
        owned_device(given != nullptr ? nullptr : make_device(options.device)),
        device(given != nullptr ? given : owned_device.get()),
        layout(make_checkpoint_layout(s.model, s.parallel)) {
    if (!options.trace.empty()) trace = std::make_unique<TraceRecorder>(world.rank());
    ExecutorOptions eo;
    eo.model = s.model;
    eo.parallel = s.parallel;
    eo.optimizations = s.optimizations;
    eo.optimizer = options.optimizer;
    eo.seed = options.seed;
    executor = std::make_unique<PipelineExecutor>(eo, groups, *device, trace.get());
    if (!options.checkpoint_dir.empty()) lock_checkpoint_dir();
    if (options.resume && !options.checkpoint_dir.empty()) resume();

    DataLoaderOptions lo;
    lo.dataset_path = dataset_path();
    lo.job_name = options.job_name;
    lo.seq_len = s.model.seq_len;
    lo.vocab = s.model.vocab;
    lo.global_batch = s.parallel.global_batch;
    lo.dp = s.parallel.dp;
    lo.dp_rank = groups.dp_rank();
    lo.seed = options.seed;
    lo.start_step = start_step;
    loader = make_loader(lo);

    // The peak a cpu profile measured (megascale calibrate micro: the fastest
    // single-core GEMM of its sweep, with provenance), not a re-measurement at
    // start-up, which a loaded machine drags down (MFU above 100%).
    peak_flops = peak_flops_for(s, std::string(device->name()) == "cpu" ? "cpu" : "cuda");
  }

  // NodeDataLoader throws DatasetError on the node's reader but a plain
  // runtime_error on the node's other ranks. Agree over the world, so that a bad
  // dataset is a DatasetError on every rank (megascale-train turns it into exit
  // status 2 whichever rank aborts first). Every rank gets here: the loader's
  // constructor is collective over the node and throws on all of its ranks.
  std::unique_ptr<NodeDataLoader> make_loader(const DataLoaderOptions& lo) {
    std::unique_ptr<NodeDataLoader> l;
    std::exception_ptr error;
    bool dataset_error = false;
    try {
      l = std::make_unique<NodeDataLoader>(node, lo);
    } catch (const DatasetError&) {
      error = std::current_exception();
      dataset_error = true;
    } catch (...) {
      error = std::current_exception();
    }
    const float mine[2] = {error ? 1.0f : 0.0f, dataset_error ? 1.0f : 0.0f};
    std::vector<float> all(2 * static_cast<size_t>(world.size()));
    world.all_gather(mine, 2, all.data());
    int failed_rank = -1, dataset_rank = -1;
    for (int r = world.size() - 1; r >= 0; --r) {
      if (all[2 * r] != 0.0f) failed_rank = r;
      if (all[2 * r + 1] != 0.0f) dataset_rank = r;
    }
    if (dataset_error) std::rethrow_exception(error);
    if (dataset_rank >= 0) {
      throw DatasetError(lo.dataset_path, "refused: world rank " + std::to_string(dataset_rank) +
                                              " (a node's reader) could not read it; see its error");
    }
    if (error) std::rethrow_exception(error);
    if (failed_rank >= 0) {
      throw std::runtime_error("data loader failed on world rank " + std::to_string(failed_rank) +
                               "; see its error");
    }
    return l;
  }

  // The dataset to read; makes the built-in synthetic corpus when none is given.
  std::string dataset_path() {
    if (!options.data.empty()) return options.data;
    const std::string path = synthetic_corpus_path(options, scenario.model.vocab);
    on_every_rank(world, [&] {
      if (world.rank() != 0 || std::filesystem::exists(path)) return;
      std::filesystem::create_directories(options.work_dir);
      // write_dataset writes a fresh temporary (base/temp_file.h: never a file or
      // link already there) and renames it into place.
      write_dataset(path, make_synthetic_corpus(static_cast<uint32_t>(scenario.model.vocab), kSyntheticTokens,
                                                options.seed),
                    static_cast<uint32_t>(scenario.model.vocab));
    }, [&](int rank) {
      throw std::runtime_error("writing the synthetic corpus " + path + " failed on world rank " +
                               std::to_string(rank) + "; see its error");
    });
    return path;
  }

  static std::string name(const char* what, int chunk) {
    return std::string(what) + ".chunk" + std::to_string(chunk);
  }

  // One training per checkpoint_dir: rank 0 holds an exclusive flock(2) on
  // <dir>/LOCK (released when the process ends, even killed) with its pid inside.
  // A second training on the same directory is refused on every rank; two used to
  // overwrite each other's steps, and a resume loaded the other run's weights.
  void lock_checkpoint_dir() {
    on_every_rank(world, [&] {
      if (world.rank() != 0) return;
      std::error_code ec;
      std::filesystem::create_directories(options.checkpoint_dir, ec);
      if (ec) throw CheckpointError(options.checkpoint_dir, 0, "lock", "cannot make this folder: " + ec.message());
      const std::string path = (std::filesystem::path(options.checkpoint_dir) / "LOCK").string();
      lock_fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (lock_fd < 0) throw CheckpointError(path, 0, "lock", std::string("cannot open: ") + std::strerror(errno));
      if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
        char holder[32] = {};
        (void)!::pread(lock_fd, holder, sizeof holder - 1, 0);
        ::close(lock_fd);
        lock_fd = -1;
        throw CheckpointError(options.checkpoint_dir, 0, "in use",
                              std::string("another training holds this checkpoint_dir (pid ") +
                                  (holder[0] != '\0' ? holder : "?") + "); give each training its own");
      }
      const std::string pid = std::to_string(::getpid());
      (void)!::ftruncate(lock_fd, 0);
      (void)!::pwrite(lock_fd, pid.data(), pid.size(), 0);
    }, [&](int rank) {
      throw CheckpointError(options.checkpoint_dir, rank, "lock",
                            "world rank 0 could not make or lock the checkpoint_dir: see its error");
    });
  }

  void resume() {
    const std::optional<int64_t> latest = latest_checkpoint(options.checkpoint_dir);
    // A newer step without its COMPLETE marker is an interrupted save: say which
    // one is skipped instead of resuming from an older step silently.
    if (world.rank() == 0) {
      for (int64_t partial : partial_checkpoints(options.checkpoint_dir)) {
        if (!latest || partial > *latest) {
          std::cerr << "megascale train: " << checkpoint_dir(options.checkpoint_dir, partial)
                    << " has no COMPLETE marker (an interrupted save): skipped; resuming from "
                    << (latest ? checkpoint_dir(options.checkpoint_dir, *latest) : std::string("step 1 (no complete checkpoint)"))
                    << "\n";
        }
      }
    }
    // Every rank must agree: take rank 0's view of the directory.
    float found = latest.has_value() ? static_cast<float>(*latest) : -1.0f;
    world.broadcast(&found, 1, 0);
    if (found < 0) return;
    const int64_t step = static_cast<int64_t>(found);
    const auto t0 = std::chrono::steady_clock::now();
    // One reader per DP group (engine/checkpoint.h): DP rank 0 reads what the
    // group holds alike and broadcasts it; each rank reads its own ZeRO shard.
    // [recovery] checkpoint_load = "every_rank": every rank reads its own
    // whole shard (then every rank's save wrote one).
    std::vector<std::pair<std::string, size_t>> replicated;
    for (int c = 0; c < executor->num_chunks(); ++c) {
      replicated.push_back({name("params", c), executor->chunk(c).buffer_floats()});
      if (!executor->optimizer_state_sharded()) {
        replicated.push_back({name("exp_avg", c), executor->optimizer(c).shard().size()});
        replicated.push_back({name("exp_avg_sq", c), executor->optimizer(c).shard().size()});
      }
    }
    const ShardState state =
        one_reader_per_dp_group()
            ? load_checkpoint_one_reader(world, groups.dp(), options.checkpoint_dir, step, layout, replicated)
            : load_checkpoint(world, options.checkpoint_dir, step, layout);
    on_every_rank(world, [&] { restore(state, step); }, [&](int rank) {
      throw CheckpointError(checkpoint_dir(options.checkpoint_dir, step), rank, "refused",
                            "world rank " + std::to_string(rank) + " could not restore its shard");
    });
    start_step = step;
    load_s = seconds_since(t0);
  }

  // [recovery] checkpoint_load: "one_per_dp_group" (the default, MegaScale's)
  // or "every_rank".
  bool one_reader_per_dp_group() const { return scenario.recovery.checkpoint_load != "every_rank"; }

  // Copies one rank's shard into the chunks and optimizers.
  void restore(const ShardState& state, int64_t step) {
    for (int c = 0; c < executor->num_chunks(); ++c) {
      ModelChunk& chunk = executor->chunk(c);
      ShardedOptimizer& opt = executor->optimizer(c);
      const NamedArray* params = state.find_array(name("params", c));
      const NamedArray* m = state.find_array(name("exp_avg", c));
      const NamedArray* v = state.find_array(name("exp_avg_sq", c));
      if (params == nullptr || m == nullptr || v == nullptr || params->data.size() != chunk.buffer_floats() ||
          m->data.size() != opt.shard().size() || v->data.size() != opt.shard().size()) {
        throw CheckpointError(shard_path(options.checkpoint_dir, step, world.rank()), world.rank(),
                              "contents", "chunk " + std::to_string(c) + " arrays missing or mis-sized" +
                                              (one_reader_per_dp_group() ? std::string()
                                                                         : " (a checkpoint saved with [recovery] "
                                                                           "checkpoint_load = \"one_per_dp_group\" "
                                                                           "stores the parameters on DP rank 0 only)"));
      }
      device->copy_to_device(chunk.params(), params->data.data(), params->data.size() * sizeof(float));
      opt.set_exp_avg(m->data);
      opt.set_exp_avg_sq(v->data);
      opt.set_step_count(state.find_value(name("optimizer_step", c)).value_or(step));
    }
  }

  void save(int64_t step) {
    const auto t0 = std::chrono::steady_clock::now();
    executor->sync_parameters();
    ShardState state;
    state.step = step;
    // What the DP group holds alike (the parameters after sync_parameters;
    // the optimizer state when it is not sharded) is written once, by DP
    // rank 0, the group's reader at restart (load_checkpoint_one_reader);
    // every rank writes its own ZeRO shard of the optimizer state.
    const bool writes_replicated = groups.dp_rank() == 0 || !one_reader_per_dp_group();
    for (int c = 0; c < executor->num_chunks(); ++c) {
      ModelChunk& chunk = executor->chunk(c);
      ShardedOptimizer& opt = executor->optimizer(c);
      if (writes_replicated) {
        std::vector<float> params(chunk.buffer_floats());
        device->copy_to_host(params.data(), chunk.params(), params.size() * sizeof(float));
        state.arrays.push_back({name("params", c), std::move(params)});
      }
      if (writes_replicated || executor->optimizer_state_sharded()) {
        state.arrays.push_back({name("exp_avg", c), opt.exp_avg()});
        state.arrays.push_back({name("exp_avg_sq", c), opt.exp_avg_sq()});
      }
      state.values.push_back({name("optimizer_step", c), opt.step_count()});
    }
    // A state that is not finite anywhere (an update that blew up the weights
    // while the step's own loss was still finite) is never checkpointed: every
    // rank learns it from one all-reduce and stops together.
    float bad = 0;
    for (const NamedArray& a : state.arrays) {
      for (float v : a.data) {
        if (!std::isfinite(v)) {
          bad = 1;
          break;
        }
      }
      if (bad != 0) break;
    }
    world.all_reduce_sum(&bad, 1);
    if (bad != 0) {
      throw TrainingDiverged("step " + std::to_string(step) +
                             ": the parameters or optimizer state are not finite after the update: the training "
                             "diverged; this state was not checkpointed" +
                             (options.checkpoint_dir.empty() ? std::string()
                                                             : "; the checkpoints already in " + options.checkpoint_dir +
                                                                   " are the last finite ones"));
    }
    // Stage 2 (two-stage checkpoint, engine/checkpoint.h): the previous
    // checkpoint's background write must have ended first (the step waits for
    // it: part of its stall), then this one is persisted in the background.
    if (persister.pending()) finish_persist(true);
    begin_checkpoint(world, options.checkpoint_dir, step);
    uint64_t bytes = 0;
    for (const NamedArray& a : state.arrays) bytes += a.data.size() * sizeof(float);
    persisting = {step, 0, bytes};
    persister.start(options.checkpoint_dir, step, world.rank(), layout, std::move(state));
    persisting.stall_s = seconds_since(t0);
    if (options.on_save_end) options.on_save_end(step);
  }

  // Ends the background persist once every rank's write ended (block: wait
  // for it): rank 0 writes the marker; reports the checkpoint. Collective.
  void finish_persist(bool block) {
    if (block && !persister.written()) {
      if (options.on_storage_wait) options.on_storage_wait(true);
      persister.wait();
      if (options.on_storage_wait) options.on_storage_wait(false);
    }
    if (!finish_checkpoint(world, persister, block)) return;
    if (options.on_checkpoint) {
      options.on_checkpoint(persisting.step, persisting.stall_s, persister.write_s(), persisting.bytes);
    }
  }

  void run(const std::function<void(const StepReport&)>& on_step) {
    // The caller's watchdog (armed before start-up), else one for this run.
    std::optional<Watchdog> own;
    if (options.watchdog == nullptr) own.emplace(options.watchdog_s, options.watchdog_s, world.rank());
    Watchdog& watchdog = options.watchdog != nullptr ? *options.watchdog : *own;
    watchdog.progress(start_step);
    const int cores = std::max(1u, std::thread::hardware_concurrency());
    // On CPU the processes share the machine's cores; on CUDA each has its GPU.
    const bool on_cpu = std::string(device->name()) == "cpu";
    const double usable_cores = on_cpu ? std::min(world.size(), cores) : world.size();
    for (int64_t step = start_step; step < options.steps; ++step) {
      const Batch batch = loader->next();
      const auto t0 = std::chrono::steady_clock::now();
      if (options.on_step_begin) options.on_step_begin(step + 1);
      const StepResult r = executor->step(batch, options.learning_rate);
      watchdog.progress(step + 1);
      const double rank_step_s = seconds_since(t0);
      float elapsed = static_cast<float>(rank_step_s);
      world.broadcast(&elapsed, 1, 0);
      StepReport report;
      report.step = step + 1;
      report.loss = r.loss;
      report.grad_norm = r.grad_norm;
      report.step_time_s = elapsed;
      report.rank_step_s = rank_step_s;
      const model::Throughput rate = model::throughput(scenario, elapsed, usable_cores, peak_flops);
      report.tokens_per_s = rate.tokens_per_s;
      report.mfu = rate.mfu;
      on_step(report);
      // The loss is identical on every rank (pipeline_executor.h): every rank
      // stops here together, before this state can become a checkpoint.
      if (!std::isfinite(r.loss)) {
        const std::string lr = fmt::format("{:g}", options.learning_rate);
        throw TrainingDiverged("step " + std::to_string(report.step) + ": the loss is " +
                               (std::isnan(r.loss) ? "NaN" : "infinite") + " (learning_rate " + lr +
                               "): the training diverged; stopped before checkpointing this state" +
                               (options.checkpoint_dir.empty() ? std::string()
                                                               : "; the checkpoints already in " + options.checkpoint_dir +
                                                                     " are the last finite ones"));
      }
      if (persister.pending()) finish_persist(false);  // one tiny all-reduce while a persist runs
      if (options.checkpoint_every > 0 && !options.checkpoint_dir.empty() &&
          report.step % options.checkpoint_every == 0) {
        save(report.step);
      }
    }
    if (persister.pending()) finish_persist(true);
    executor->sync_parameters();
    if (trace) {
      const std::vector<TraceEvent> merged = merge_traces(world, *trace, options.trace);
      (void)merged;
    }
  }
};

Trainer::Trainer(const model::Scenario& scenario, const TrainOptions& options, Comm& world, Comm& node,
                 Device* device)
    : impl_(std::make_unique<Impl>(scenario, options, world, node, device)) {}

Trainer::~Trainer() = default;

void Trainer::run(const std::function<void(const StepReport&)>& on_step) { impl_->run(on_step); }

int64_t Trainer::start_step() const { return impl_->start_step; }

double Trainer::checkpoint_load_s() const { return impl_->load_s; }

std::vector<float> Trainer::parameters() {
  impl_->executor->sync_parameters();
  std::vector<float> all;
  for (int c = 0; c < impl_->executor->num_chunks(); ++c) {
    ModelChunk& chunk = impl_->executor->chunk(c);
    const size_t at = all.size();
    all.resize(at + chunk.num_params());
    impl_->device->copy_to_host(all.data() + at, chunk.params(), chunk.num_params() * sizeof(float));
  }
  return all;
}

}  // namespace megascale::engine
