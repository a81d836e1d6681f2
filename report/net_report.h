// report/net_report.h: `megascale net collective|ecmp|incast` as JSON and text:
// one collective on a fabric with the NCCL tuner's choice (and a profile's
// measured answer beside it), ECMP statistics, an incast's time series.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "base/json.h"
#include "model/hardware.h"
#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "network/congestion.h"
#include "network/ecmp_stats.h"
#include "network/routing.h"
#include "network/topology.h"
#include "sim/collective_run.h"

namespace megascale::report {

// What `net collective` ran: the job, the fabric and the tuner's answer.
struct CollectiveRun {
  std::string gpu;             // the GPU profile's name
  int ranks_per_server = 0;
  std::string placement;       // "packed" | "scattered"
  double bytes = 0;
  network::FabricSpec spec;
  std::string fabric;          // Topology::describe()
  network::EcmpConfig ecmp;
  network::CollectiveOptions options;
  network::TunedCollective tuned;
  bool auto_choice = true;     // the tuner chose the algorithm or the protocol
  double wall_s = 0;
  std::optional<model::GpuProfile> measured;  // a profile with measured collectives
};

// The report of sim::answer_collective's answer ("packed" | "scattered" as asked;
// `measured` left for the caller).
CollectiveRun collective_run(const sim::CollectiveAnswer& a, const std::string& placement);

// "1.00 GiB", "512 B": powers of 1024, as nccl-tests.
std::string human_bytes(double bytes);
// "1.234 s", "5.000 ms", "12.5 us".
std::string human_time(double s);

base::Json collective_json(const CollectiveRun& run);
std::string collective_text(const CollectiveRun& run);

base::Json ecmp_json(const network::EcmpStatistics& s, network::EcmpHash hash);
std::string ecmp_text(const network::EcmpStatistics& s, network::EcmpHash hash);

// Header, queue / throughput / PFC summary and every len/20-th sample.
std::string incast_text(const network::IncastOptions& o, const network::IncastReport& r);

}  // namespace megascale::report
