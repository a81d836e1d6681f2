// model/job_schedule.h: the Schedule IR of a whole scenario, and op durations
// taken from the analytical estimate.
//
// build_job_schedule() fills ScheduleOptions from the scenario (P, V, M, layers,
// ZeRO stage, overlap switches, p2p message and DP payload sizes) and attaches the
// layer programs, so sim/ and engine/ start from one call. estimated_durations()
// times every op with the analytical estimator's per-op costs; replaying the IR
// with it (model/replay.h) is the dependency-exact counterpart of the closed form
// in model/estimator.cc, and the two must agree (tests/model/estimator_test.cc).
//
// Thread-safety: pure functions; the returned DurationFn owns copies of its inputs.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/estimator.h"
#include "model/replay.h"
#include "model/schedule.h"

namespace megascale::model {

// p2p message per (micro-batch, chunk boundary) per GPU: the (b, s, h) bf16
// activation divided over TP ranks (sequence parallel, or Megatron-LM's
// scatter-gather optimisation without it); on a cpu profile the engine's fp32
// (Tl, b, h) activation, Tl = s/tp under SP, else s.
int64_t p2p_message_bytes(const Scenario& s);

// DP payload per chunk per GPU of a chunk without the embedding: its layers'
// gradients (fp32) for the reduce-scatter / all-reduce (model/payload.h).
int64_t dp_chunk_bytes(const Scenario& s);

// The schedule's shape (P, V, M, layers, ZeRO stage, DP, overlap switches) from
// the job's configuration: one function for the simulator (below) and the
// engine (engine/pipeline_executor.cc), so both run the same op order. Byte
// counts are left 0.
ScheduleOptions schedule_options(const ModelConfig& m, const ParallelConfig& p, const Optimizations& o);

// The shape above plus the p2p message and the typical DP chunk payload.
ScheduleOptions schedule_options(const Scenario& s);

// Upper bound on DP buckets per chunk, against a tiny bucket size on a big
// chunk (millions of collectives). Megatron-Core sets none: the published
// runs here need up to 250 of its default size (nemo-gpt3-20b-64-fp8); at 64,
// the bound this had, 12 of them ran with fewer, larger buckets.
constexpr int kMaxDpBuckets = 1024;
// DP buckets per chunk (ScheduleOptions::dp_buckets) of a GPU job: 1 unless the
// optimizations bucket the DP collectives (dp_bucket_params != 0 with
// dp_overlap, DP > 1, ZeRO 0-2); else ceil(chunk parameters / bucket size),
// the bucket size being dp_bucket_params or Megatron-Core's default
// max(40M, 1M x DP) parameters. The CPU engine never buckets.
int dp_buckets_per_chunk(const Scenario& s);
// The DP bucket size in parameters the optimizations ask for: dp_bucket_params,
// or for -1 (the megatron-core preset) Megatron-Core's default max(40M, 1M x DP)
// (DP counting the CP ranks, as its DDP group does); 0 = one collective per chunk.
int64_t effective_dp_bucket_params(const Scenario& s);

// The Schedule IR of the scenario with its layer programs; every DP op carries
// the payload of its own (pipeline rank, chunk): the first and last chunks
// include the embedding, an all-gather moves parameters at the profile's
// param_gather_bytes (model::dp_payload_bytes, the same bytes sim/ times).
Schedule build_job_schedule(const Scenario& s);

// Durations for replay(): Forward/Backward = the estimate's per-layer times x the
// op's chunk's layers (model/pipeline_layout.h; the head work of the first/last
// stage is not added), p2p = e.p2p_s,
// DP collectives = per-chunk RS / AG / AR, optimizer step and data loading from
// the breakdown.
DurationFn estimated_durations(const Scenario& s, const Estimate& e);

}  // namespace megascale::model
