// engine/data_loader.h: one dataset reader per node, batches shared with the
// node's ranks through POSIX shared memory, next batch prefetched by a thread.
//
// MegaScale (NSDI'24, section 3.5, "Data pipeline"): instead of every GPU worker
// running its own data loader, one dedicated loader per machine reads the
// training data into shared memory and the machine's workers copy their part
// from there (the "tree-based" loader), and preprocessing runs asynchronously,
// overlapped with the previous step.
//
// Here: node-local rank 0 of `node_comm` (the ranks of one machine, e.g.
// MpiComm::split_shared()) is the reader. It opens the MSDS dataset
// (engine/dataset.h) — the other ranks never touch the file — and a prefetch
// thread fills a ring of `prefetch_depth` slots in a shared-memory segment
// (shm_open + mmap) with the samples of every data-parallel replica present on
// the node. Ranks with the same dp_rank (the TP and PP peers of a replica) read
// the same samples. The segment's name, "/megascale-<job>-<host>-<reader pid>",
// is unlinked as soon as every rank has mapped it, so nothing is left behind in
// /dev/shm even if the job dies.
//
// Protocol (per slot s = step % depth, in the segment, lock-free atomics):
// the reader waits until every node rank released the slot's previous step,
// writes step k, then publishes ready_step[s] = k (release); a rank waits for
// ready_step[s] == k (acquire), copies its samples and increments consumed[s].
// A reader failure is written into the segment, so waiting ranks throw with the
// reader's message instead of hanging; a wait longer than `timeout_s` throws.
//
// Batch contents (deterministic; see dataset.h): replica d of D gets the
// B/D samples with global indices d*B/D .. (d+1)*B/D - 1 of step k, sample i
// being read_sample(seed, k, i). load_batch() computes the same batch without
// a loader (single process, tests).
//
// Thread-safety: a NodeDataLoader is used by its rank's thread; the prefetch
// thread is internal. Construction and destruction are collective over
// node_comm (construction exchanges options and the segment name; destruction
// is local but every rank should destroy its loader).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/dataset.h"

namespace megascale::engine {

class Comm;

struct DataLoaderOptions {
  std::string dataset_path;
  std::string job_name = "job";  // part of the shared-memory name: [A-Za-z0-9_.-]
  int seq_len = 0;
  int vocab = 0;                 // the model's (model.vocab): the reader refuses a dataset with more (check_dataset_fits)
  int global_batch = 0;          // B: samples per step over all replicas
  int dp = 1;                    // D
  int dp_rank = 0;               // this rank's replica
  uint64_t seed = 0;
  int64_t start_step = 0;        // first step next() returns (resume = checkpoint step)
  int prefetch_depth = 2;        // slots in flight (>= 2: one read, one prefetched)
  double timeout_s = 120;        // longest wait for a batch
};

struct Batch {
  int64_t step = 0;
  int samples = 0;               // B / D
  int seq_len = 0;
  int64_t first_sample = 0;      // global index (within the step) of sample 0
  std::vector<int32_t> tokens;   // (samples, seq_len)
  std::vector<int32_t> labels;   // (samples, seq_len): tokens shifted by one
};

// The batch of replica `options.dp_rank` for `step`, straight from a dataset.
Batch load_batch(const Dataset& ds, const DataLoaderOptions& options, int64_t step);

class NodeDataLoader {
 public:
  // Collective over node_comm; every node rank throws if any part fails:
  // std::invalid_argument for inconsistent options (B % D != 0, ranks
  // disagreeing on seq_len / global_batch / dp / start_step / depth); when the
  // reader cannot open the dataset (or create the segment) it throws its
  // DatasetError (std::runtime_error) and the other ranks a std::runtime_error
  // pointing at the reader; std::runtime_error when a rank cannot attach.
  NodeDataLoader(Comm& node_comm, const DataLoaderOptions& options);
  ~NodeDataLoader();
  NodeDataLoader(const NodeDataLoader&) = delete;
  NodeDataLoader& operator=(const NodeDataLoader&) = delete;

  // This rank's batch of the next step (start_step, start_step + 1, ...).
  Batch next();

  bool is_reader() const { return is_reader_; }
  // Number of times this process opened the dataset file (1 on the reader, 0 elsewhere).
  int dataset_opens() const { return dataset_opens_; }
  // Batches the reader's thread has published so far (0 on other ranks).
  int64_t batches_loaded() const { return batches_loaded_.load(); }
  const std::string& shm_name() const { return shm_name_; }

 private:
  struct Shared;  // the segment's header
  void prefetch_loop();
  void fail_shared(const std::string& message);

  DataLoaderOptions options_;
  int node_rank_ = 0;
  int node_size_ = 1;
  bool is_reader_ = false;
  int dataset_opens_ = 0;
  std::vector<int> node_dp_ranks_;  // sorted distinct dp ranks on this node
  int my_block_ = 0;                // index of options_.dp_rank in node_dp_ranks_
  int samples_per_replica_ = 0;
  size_t slot_bytes_ = 0;
  std::string shm_name_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  Shared* shared_ = nullptr;
  std::unique_ptr<Dataset> dataset_;  // reader only
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> batches_loaded_{0};
  int64_t next_step_ = 0;
};

}  // namespace megascale::engine
