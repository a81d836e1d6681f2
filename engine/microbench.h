// engine/microbench.h: microbenchmarks of the engine's own kernels and
// communication, the measurements a cpu hardware profile is made of
// (`megascale calibrate micro`, model/profile.h).
//
// defines: MicroPlan, MicroPoint, MicroResult, default_micro_plan, add_scenario_shapes,
// run_microbenchmarks, micro_profile
//
// What is timed is what the trainer runs, through the same interfaces:
//   GEMMs        Device::matmul in the three layouts the linear layers use
//                (engine/transformer_layer.cc): "nt" forward (beta 0), "tn"
//                weight gradient (beta 1, accumulating), "nn" input gradient;
//                over a grid of (m, n, k) (half octaves by default, capped by
//                FLOPs) plus the exact shapes of the scenarios given.
//   attention    Device::attention_forward / attention_backward for one
//                sequence of 4 heads, per (seq, head dim), full causal and a
//                window of seq/8; reported per (sequence x head).
//   kernels      each kernel of model::kCpuKernels by element count, called
//                as the layers call them (row lengths of 512, the optimizer
//                through ShardedOptimizer on a one-rank communicator).
//   collectives  Comm::all_reduce_sum / all_gather / reduce_scatter_sum and
//                isend / irecv pairs by size, over groups of 2 .. N ranks.
//   in situ     whole models (ModelChunk forward and backward, a few sizes and
//                kinds), every op timed by the engine's OpObserver: the
//                kernels in their real order and cache state, from which the
//                in-situ scales of the profile are fitted.
// Every compute point runs first on rank 0 alone (ranks = 1) and then, when
// the job has more ranks, on all ranks at once (ranks = N, each rank timing
// its own copy): two processes on two cores share caches and memory
// bandwidth, and the simulator reads the table measured with the job's own
// number of busy ranks. A point is run once to warm up, then repeated until
// it has run `repeats` times and at least `min_point_s`; its time is the
// median and its spread (max - min) / median.
//
// Thread-safety: run_microbenchmarks is collective over `world` (every rank
// calls it with the same plan); the rest are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/comm.h"
#include "engine/device.h"
#include "model/config.h"
#include "model/hardware.h"
#include "model/profile_tables.h"

namespace megascale::engine {

struct GemmShape {
  std::string layout;  // "nt" | "tn" | "nn"
  int64_t m = 0, n = 0, k = 0;
  bool operator<(const GemmShape& o) const {
    return std::tie(layout, m, n, k) < std::tie(o.layout, o.m, o.n, o.k);
  }
};

// A whole model the in-situ pass runs (ModelChunk forward and backward of
// `microbatches` micro-batches, 1F1B order, as PP = 1 trains it).
struct InsituModel {
  std::string name;
  model::ModelConfig model;
  int micro_batch = 1;
  int microbatches = 2;
};

// One op kind's time in an in-situ pass (summed over its events and the
// measured iterations).
struct InsituObservation {
  int ranks = 1;
  std::string model;        // InsituModel::name
  std::string op;           // event name (model/op_cost.h)
  bool backward = false;
  int events = 0;
  double seconds = 0;
};

struct MicroPlan {
  std::vector<GemmShape> gemms;            // every shape, every layout
  std::vector<int> attention_seqs;         // sequence lengths
  std::vector<int> attention_head_dims;
  std::vector<double> kernel_elements;     // element counts of the kernel sweep
  std::vector<double> collective_bytes;    // sizes of the collective sweep
  std::vector<InsituModel> insitu;         // whole models timed in situ
  int insitu_iterations = 3;               // measured iterations per model (after one warm-up)
  int repeats = 5;                         // timed repeats per point (at least)
  double min_point_s = 2e-3;               // and at least this long in total
  bool concurrent = true;                  // also measure with every rank busy
  std::string label = "default";           // "default", "quick", ...: written as the profile's ref
};

// The default sweep: GEMM axes in half octaves 16 .. 4096 (octaves 16 .. 2048
// when `quick`), every layout, shapes up to 2^31 FLOPs (2^30 quick; beyond, the
// rate is saturated and GemmTable fills the cells from their neighbours); attention
// at sequences 16 .. 2048 and head dims 16 .. 256; kernels at 2^8 .. 2^24
// elements; collectives at 4 B .. 64 MiB.
MicroPlan default_micro_plan(bool quick);

// Adds the exact GEMM shapes (three layouts each), attention (seq, head dim)
// and kernel sizes that scenario `s` runs (its TP-sharded dimensions), so a
// profile made for those scenarios needs no interpolation for them.
void add_scenario_shapes(const model::Scenario& s, MicroPlan* plan);

// Progress lines (rank 0): "gemm 120/4650 ...".
using MicroProgress = std::function<void(const std::string&)>;

struct MicroResult {
  std::vector<model::GemmPoint> gemm;
  std::vector<model::AttentionPoint> attention;
  std::vector<model::KernelPoint> kernels;
  std::vector<model::CollectivePoint> collectives;
  std::vector<InsituObservation> insitu;
  int ranks = 1;
  double seconds = 0;  // wall time of the whole run
};

// Collective over `world`: every rank must call it with the same plan. The
// result is complete on world rank 0 (other ranks: compute tables only).
MicroResult run_microbenchmarks(Device& device, Comm& world, const MicroPlan& plan,
                                const MicroProgress& progress = {});

// A cpu profile (model/profile.h) from a run: every table and value with its
// provenance (`ref` names the plan and the engine calls, `host` and `date`
// given), peak_tflops from the fastest single-rank GEMM, memory_gbs from the
// copy kernel, memory_bytes = physical memory / cores, and the in-situ table
// (model/profile_tables.h InsituTable) fitted on the in-situ passes per busy
// rank count, with its leave-one-out error over the models.
model::GpuProfile micro_profile(const MicroResult& r, const MicroPlan& plan, const std::string& host,
                                const std::string& date);

}  // namespace megascale::engine
