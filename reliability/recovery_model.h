// reliability/recovery_model.h: the time each recovery step takes.
//
// Communication-group initialisation, seconds, for n GPUs (MegaScale NSDI'24
// section 4.2 / REFERENCE.md "Operations": 1047 s with TCPStore, 361 s with
// Redis, under 5 s with ordered init at 2,048 GPUs; under 30 s above 10,000):
//   tcpstore: a n^2,  a = 1047 / 2048^2   (global barriers are O(n^2))
//   redis:    c n^2,  c =  361 / 2048^2   (same barriers, faster store)
//   ordered:  e n,    e =  4.5 / 2048     (O(n) barriers; 27 s at 12,288)
// Each design has one published point, so each form has one constant fitted to
// it exactly; the constant term is assumed 0. The quadratic forms are an
// extrapolation beyond 2,048 GPUs (TCPStore at 12,288 GPUs: ~10.5 h).
//
// Checkpoint state: per GPU, parameters + optimizer state of the most loaded
// stage (model/memory.h); unique bytes = parameters x tp x pp + optimizer x GPUs
// (parameters are replicated over DP, optimizer state is ZeRO-sharded).
// Two-stage checkpoint: GPU -> pinned host over PCIe on the critical path
// (per-GPU bytes / pcie_gbs), then host -> storage asynchronously (unique bytes /
// storage_write_gbs). Synchronous: both on the critical path. Load: every rank
// reads its own state from storage (GPUs x per-GPU bytes / storage_read_gbs), or
// one reader per DP group reads the unique state and broadcasts it over the NICs
// (unique / storage_read_gbs + per-GPU bytes / NIC GB/s). Storage bandwidths are
// aggregate assumptions (recovery.storage_*_gbs), not published figures.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "model/config.h"

namespace megascale::reliability {

// REQUIRES: design is "tcpstore", "redis" or "ordered"; gpus >= 1.
double comm_init_s(const std::string& design, int gpus);

struct CheckpointCosts {
  double per_gpu_bytes = 0;   // parameters + optimizer state on one GPU
  double unique_bytes = 0;    // the whole job's state, once
  double stall_s = 0;         // training paused per checkpoint
  double persist_s = 0;       // from the snapshot until it is on storage
  double load_s = 0;          // reading it back at restart
};

// REQUIRES: the layout is valid and hardware.gpu names a profile.
CheckpointCosts checkpoint_costs(const model::Scenario& s);
// The same from given state sizes (tests, what-ifs).
CheckpointCosts checkpoint_costs(double per_gpu_bytes, double unique_bytes, int gpus,
                                 double nic_gbps, const model::RecoveryConfig& r);

}  // namespace megascale::reliability
