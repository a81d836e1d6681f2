// engine/checkpoint.h: per-rank checkpoint shards with checksums and a
// completion marker.
//
// A checkpoint of step k lives in <root>/step_<k, 8 digits>/:
//   shard_<rank, 5 digits>.msck   one per world rank: parameters, optimizer
//                                 state, step, RNG / data cursor (what the
//                                 caller puts in; the trainer stores what a
//                                 DP group holds alike in its DP rank 0's
//                                 shard only: load_checkpoint_one_reader)
//   COMPLETE                      written by rank 0 after every shard is in place
// Each shard is written to "<name>.tmp", fsync'ed and renamed, so a shard file
// is either absent or whole; the marker is written (same way) only after all
// ranks reported success, so a directory without it is a partial checkpoint.
//
// Shard format "MSCK" version 1 (little-endian):
//   fixed header (64 bytes): magic "MSCK", version u32, rank u32, world_size u32,
//     tp u32, pp u32, dp u32, vpp u32, step i64, body_bytes u64, reserved (16 B)
//   body: model description (u32 length + bytes), n_arrays u32, n_values u32,
//     arrays: name (u32 length + bytes), count u64, count floats;
//     values: name (u32 length + bytes), i64
//   trailer: CRC-32 (engine/crc32.h) of header + body.
// Loading checks, in order, and throws CheckpointError naming the file, the rank
// and the failed check: marker present ("partial checkpoint"), shard present
// ("missing shard"), size ("truncated" / "trailing bytes"), magic, version,
// checksum ("checksum mismatch"), then the layout (rank, world size, tp, pp, dp,
// vpp, model description: "layout mismatch").
//
// Two-stage checkpoint (MegaScale NSDI'24 section 4: the training stalls
// only while the state is copied to host memory; the copy is persisted in the
// background): the caller snapshots its ShardState (stage 1), calls
// begin_checkpoint (collective: folder made, a stale marker removed), hands
// the snapshot to a CheckpointPersister, whose thread writes the shard as
// above (stage 2), and calls finish_checkpoint at step boundaries: once every
// rank's write ended, rank 0 writes COMPLETE. A crash before that leaves the
// step's folder without its marker: latest_checkpoint() keeps returning the
// previous complete checkpoint.
//
// Thread-safety: free functions; save/load/begin/finish are collective over
// the Comm. A CheckpointPersister is driven by one thread (its own thread
// only writes the shard).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "model/config.h"

namespace megascale::engine {

class Comm;

class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(const std::string& file, int rank, const std::string& check,
                  const std::string& detail);
  const std::string& file() const { return file_; }
  int rank() const { return rank_; }              // -1: not about one rank
  const std::string& check() const { return check_; }  // e.g. "checksum mismatch"

 private:
  std::string file_;
  int rank_;
  std::string check_;
};

// What a checkpoint must match to be loaded.
struct CheckpointLayout {
  int world_size = 1;
  int tp = 1, pp = 1, dp = 1, vpp = 1;
  // canonical model description (describe_model), then " ranks=tp-cp-pp-dp"
  // when the rank order is not Megatron's default (a shard is named by world rank)
  std::string model;
  bool operator==(const CheckpointLayout&) const = default;
};

// "layers=4 hidden=64 heads=4 kv_heads=4 seq=32 vocab=128 ffn=256 mlp=gelu block=sequential window=0"
std::string describe_model(const model::ModelConfig& m);
CheckpointLayout make_checkpoint_layout(const model::ModelConfig& m, const model::ParallelConfig& p);

struct NamedArray {
  std::string name;
  std::vector<float> data;
};

// One rank's state.
struct ShardState {
  int64_t step = 0;
  std::vector<NamedArray> arrays;                          // params, exp_avg, exp_avg_sq, ...
  std::vector<std::pair<std::string, int64_t>> values;     // rng state, data cursor, ...

  // nullptr when absent.
  const NamedArray* find_array(const std::string& name) const;
  NamedArray* find_array(const std::string& name) {
    return const_cast<NamedArray*>(static_cast<const ShardState&>(*this).find_array(name));
  }
  std::optional<int64_t> find_value(const std::string& name) const;
};

// <root>/step_<k>
std::string checkpoint_dir(const std::string& root, int64_t step);

// Steps under `root` whose directory has no COMPLETE marker (interrupted saves),
// ascending.
std::vector<int64_t> partial_checkpoints(const std::string& root);
std::string shard_path(const std::string& root, int64_t step, int rank);
std::string marker_path(const std::string& root, int64_t step);

// Collective over `world` (rank = world rank). REQUIRES: layout.world_size ==
// world.size(). Throws CheckpointError on every rank when any rank failed to
// write (no marker is written then).
void save_checkpoint(Comm& world, const std::string& root, int64_t step,
                     const CheckpointLayout& layout, const ShardState& state);

// Collective: every rank reads and checks its own shard; when any rank's check
// fails every rank throws (the failing ranks their own error, the others one
// naming the failed ranks), so no rank continues alone.
ShardState load_checkpoint(Comm& world, const std::string& root, int64_t step,
                           const CheckpointLayout& expected);

// One checkpoint reader per DP group (MegaScale NSDI'24 section 4: at
// restart one worker of each data-parallel group reads the state the group
// shares and broadcasts it to the others, so storage serves it once per
// group, not once per rank). `replicated` names the arrays (name, floats)
// every rank of the `dp` group holds the same (the parameters; the optimizer
// state too when it is not sharded over DP): a checkpoint holds them only in
// the shard of the group's DP rank 0 (the trainer's save writes them there
// only), which reads them and broadcasts them over `dp`; every rank reads its
// own shard for the rest (its ZeRO shard of the optimizer state, the values).
// Returns each rank's full state, as load_checkpoint. Collective over
// `world` (the checks agreed as in load_checkpoint, before any broadcast)
// and `dp` (rank 0 of `dp` is the reader). A reader whose shard lacks a
// replicated array, or holds it with another size, fails the "contents"
// check on every rank. REQUIRES: every rank passes the same `replicated`
// list in the same order.
ShardState load_checkpoint_one_reader(Comm& world, Comm& dp, const std::string& root, int64_t step,
                                      const CheckpointLayout& expected,
                                      const std::vector<std::pair<std::string, size_t>>& replicated);

// Non-collective pieces, for tools and tests.
void write_shard_file(const std::string& path, int rank, const CheckpointLayout& layout,
                      const ShardState& state);
ShardState read_shard_file(const std::string& path, int rank, const CheckpointLayout& expected);
// Checks the marker and reads `rank`'s shard of step `step`.
ShardState read_checkpoint_shard(const std::string& root, int64_t step, int rank,
                                 const CheckpointLayout& expected);

// Largest step under `root` that has a marker, if any.
std::optional<int64_t> latest_checkpoint(const std::string& root);

// Two-stage checkpoint, the job's part before the background writes:
// collective; every rank makes the step's folder and rank 0 removes a marker
// left there by an earlier save of the same step, before any rank's new shard
// lands. Throws CheckpointError on every rank when any rank failed.
void begin_checkpoint(Comm& world, const std::string& root, int64_t step);

// Two-stage checkpoint, this rank's background writer.
class CheckpointPersister {
 public:
  CheckpointPersister() = default;
  // Waits for a write in flight; never writes a marker.
  ~CheckpointPersister();
  CheckpointPersister(const CheckpointPersister&) = delete;
  CheckpointPersister& operator=(const CheckpointPersister&) = delete;

  // Writes `state` as `rank`'s shard of step `step` under `root`
  // (write_shard_file: .tmp, fsync, rename) on a background thread.
  // REQUIRES: !pending(); begin_checkpoint ran for this step.
  void start(const std::string& root, int64_t step, int rank, const CheckpointLayout& layout,
             ShardState state);
  // Started and not yet finished by finish_checkpoint.
  bool pending() const { return pending_; }
  // The background write ended (either way). Never blocks.
  bool written() const { return written_.load(std::memory_order_acquire); }
  // Blocks until the background write ended.
  void wait();
  int64_t step() const { return step_; }
  const std::string& root() const { return root_; }
  // After wait(): the write's seconds and its error (nullptr when it succeeded).
  double write_s() const { return write_s_; }
  std::exception_ptr error() const { return error_; }
  // Used by finish_checkpoint.
  void clear();

 private:
  std::thread thread_;
  std::atomic<bool> written_{false};
  bool pending_ = false;
  std::string root_;
  int64_t step_ = -1;
  int world_size_ = 1;
  double write_s_ = 0;
  std::exception_ptr error_;

  friend bool finish_checkpoint(Comm& world, CheckpointPersister& persister, bool block);
};

// Two-stage checkpoint, the job's part after the background writes:
// collective, called at the same point on every rank while
// persister.pending(). With block = false, one all-reduce first asks whether
// every rank's write ended; if one has not, returns false and nothing
// changes. Otherwise (or with block = true, after waiting for this rank's
// write) the ranks agree on the outcome and rank 0 writes the COMPLETE
// marker; returns true and the persister is no longer pending. Throws
// CheckpointError on every rank when any rank's write failed (no marker).
bool finish_checkpoint(Comm& world, CheckpointPersister& persister, bool block);

}  // namespace megascale::engine
