// reliability/recovery_model.cc: see recovery_model.h for forms and sources.
#include "reliability/recovery_model.h"

#include <stdexcept>

#include "model/hardware.h"
#include "model/memory.h"
#include "model/profile.h"

namespace megascale::reliability {

double comm_init_s(const std::string& design, int gpus) {
  const double n = gpus;
  constexpr double kPaperGpus = 2048;
  if (design == "tcpstore") return 1047.0 / (kPaperGpus * kPaperGpus) * n * n;
  if (design == "redis") return 361.0 / (kPaperGpus * kPaperGpus) * n * n;
  if (design == "ordered") return 4.5 / kPaperGpus * n;
  throw std::invalid_argument("unknown communication-group init design '" + design + "'");
}

CheckpointCosts checkpoint_costs(double per_gpu_bytes, double unique_bytes, int gpus,
                                 double nic_gbps, const model::RecoveryConfig& r) {
  CheckpointCosts c;
  c.per_gpu_bytes = per_gpu_bytes;
  c.unique_bytes = unique_bytes;
  const double to_host_s = per_gpu_bytes / (r.pcie_gbs * 1e9);
  const double to_storage_s = unique_bytes / (r.storage_write_gbs * 1e9);
  if (r.checkpoint == "sync") {
    c.stall_s = to_host_s + to_storage_s;
    c.persist_s = c.stall_s;
  } else {
    c.stall_s = to_host_s;
    c.persist_s = to_host_s + to_storage_s;
  }
  if (r.checkpoint_load == "every_rank") {
    c.load_s = static_cast<double>(gpus) * per_gpu_bytes / (r.storage_read_gbs * 1e9);
  } else {
    c.load_s = unique_bytes / (r.storage_read_gbs * 1e9) + per_gpu_bytes / (nic_gbps / 8.0 * 1e9);
  }
  return c;
}

CheckpointCosts checkpoint_costs(const model::Scenario& s) {
  const model::GpuProfile& gpu = model::hardware_profile(s);
  const model::MemoryBreakdown m =
      model::memory_per_gpu(s.model, s.parallel, s.optimizations, gpu);
  const double per_gpu = m.parameters_bytes + m.optimizer_bytes;
  const double unique = m.parameters_bytes * s.parallel.tp * s.parallel.pp +
                        m.optimizer_bytes * s.parallel.gpus();
  return checkpoint_costs(per_gpu, unique, s.parallel.gpus(), s.hardware.nic_gbps, s.recovery);
}

}  // namespace megascale::reliability
