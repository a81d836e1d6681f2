// calibrate/net_check.cc: see net_check.h.
#include "calibrate/net_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "calibrate/nccl_tests.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "model/toml_section.h"
#include "network/routing.h"
#include "network/topology.h"
#include "sim/fabric_config.h"
#include "base/text_file.h"

namespace megascale::calibrate {
namespace {

namespace fs = std::filesystem;

std::optional<network::CollectiveOp> op_of(const std::string& nccl_op) {
  if (nccl_op == "all_reduce") return network::CollectiveOp::kAllReduce;
  if (nccl_op == "all_gather") return network::CollectiveOp::kAllGather;
  if (nccl_op == "reduce_scatter") return network::CollectiveOp::kReduceScatter;
  if (nccl_op == "sendrecv") return network::CollectiveOp::kSendRecv;
  return std::nullopt;
}

// Every run's servers hold 8 GPUs (DGX / HGX A100 and H100, the machines of
// the published files); runs of 4-GPU nodes are skipped with a reason.
constexpr int kGpusPerServer = 8;

model::GpuProfile profile_of(const NetMachine& m) {
  model::GpuProfile p = model::profile_named_or_file(m.gpu);
  p.default_nics_per_node = m.nics_per_node;
  p.default_nic_gbps = m.nic_gbps;
  return p;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string NetMachine::nccl_settings() const {
  std::string s = nccl_version.empty() ? "" : "NCCL " + nccl_version;
  if (nccl_algo) s += std::string(s.empty() ? "" : ", ") + "NCCL_ALGO=" + network::to_string(*nccl_algo);
  if (nccl_proto) s += std::string(s.empty() ? "" : ", ") + "NCCL_PROTO=" + network::to_string(*nccl_proto);
  return s;
}

std::vector<NetMachine> read_net_manifest(const std::string& path) {
  const toml::table root = model::parse_toml(base::read_text_or_throw(path), path);
  const model::Section top(root, "", path);
  static constexpr std::string_view kTop[] = {"run"};
  top.reject_unknown_keys(kTop);
  const toml::array* runs = root["run"].as_array();
  if (runs == nullptr || runs->empty()) top.fail_missing("run", "at least one [[run]] table");
  std::vector<NetMachine> out;
  const fs::path dir = fs::path(path).parent_path();
  for (size_t i = 0; i < runs->size(); ++i) {
    const toml::table* t = (*runs)[i].as_table();
    const std::string name = "run[" + std::to_string(i) + "]";
    if (t == nullptr) top.fail_at((*runs)[i], name, "expected a [[run]] table");
    const model::Section s(*t, name, path);
    static constexpr std::string_view kKeys[] = {"file",     "gpu",          "nics_per_node", "nic_gbps",
                                                 "transport", "exclude",     "unscored",      "nccl_version",
                                                 "nccl_algo", "nccl_proto"};
    s.reject_unknown_keys(kKeys);
    NetMachine m;
    const std::optional<std::string> file = s.string("file");
    if (!file) s.fail_missing("file");
    m.file = (dir / *file).string();
    if (!fs::is_regular_file(m.file)) s.fail("file", "no such file: " + m.file);
    // One measurement scored twice would weigh twice in the summary.
    for (size_t j = 0; j < out.size(); ++j) {
      if (base::file_identity(out[j].file) == base::file_identity(m.file)) {
        s.fail("file", "run[" + std::to_string(j) + "] scores this file already: a file listed twice weighs twice");
      }
    }
    const std::optional<std::string> gpu = s.string("gpu");
    if (!gpu) s.fail_missing("gpu");
    m.gpu = *gpu;
    const std::optional<int> nics = s.integer("nics_per_node", 1, 64);
    if (!nics) s.fail_missing("nics_per_node");
    if (kGpusPerServer % *nics != 0) {
      // Found here, at its key, not as the fabric's error naming the nccl-tests file.
      s.fail("nics_per_node", fmt::format("must divide the {} GPUs of a server (each NIC serves as many GPUs), got {}",
                                          kGpusPerServer, *nics));
    }
    m.nics_per_node = *nics;
    const std::optional<double> gbps = s.positive_number("nic_gbps");
    if (!gbps) s.fail_missing("nic_gbps");
    m.nic_gbps = *gbps;
    m.transport = s.string("transport").value_or("");
    m.exclude = s.string("exclude").value_or("");
    m.unscored = s.string("unscored").value_or("");
    m.nccl_version = s.string("nccl_version").value_or("");
    if (const std::optional<std::string> algo = s.string("nccl_algo")) {
      m.nccl_algo = network::parse_collective_algorithm(lower(*algo));
      if (!m.nccl_algo || *m.nccl_algo == network::CollectiveAlgorithm::kHierarchical) {
        s.fail("nccl_algo", "must be one NCCL algorithm: ring, tree, nvls or nvls-tree, not '" + *algo + "'");
      }
    }
    if (const std::optional<std::string> proto = s.string("nccl_proto")) {
      m.nccl_proto = network::parse_nccl_protocol(*proto);
      if (!m.nccl_proto) s.fail("nccl_proto", "must be one NCCL protocol: LL, LL128 or Simple, not '" + *proto + "'");
    }
    out.push_back(std::move(m));
  }
  return out;
}

NetRun predict_net_run(const NetMachine& m, const NetRestriction& only) {
  NetRun r;
  r.machine = m;
  const NcclTestsRun run = read_nccl_tests_file(m.file);
  r.op = run.op;
  r.ranks = run.ranks;
  r.nodes = run.nodes > 0 ? run.nodes : std::max(1, run.ranks / 8);
  if (!m.exclude.empty()) {
    r.skipped = "excluded: " + m.exclude;
    return r;
  }
  const std::optional<network::CollectiveOp> op = op_of(run.op);
  if (!op) {
    r.skipped = "op " + run.op + " is not modelled by net collective";
    return r;
  }
  if (r.ranks < 2 || r.ranks % r.nodes != 0) {
    r.skipped = "ranks " + std::to_string(r.ranks) + " over " + std::to_string(r.nodes) + " nodes";
    return r;
  }
  const model::GpuProfile gpu = profile_of(m);
  // Predicting another GPU model than the one that ran it compares two
  // machines (an H100's file checked with --gpu A100-SXM4-80GB was "108% off").
  if (const std::string measured = gpu_model(run.device), predicted = gpu_model(gpu.name);
      !measured.empty() && !predicted.empty() && measured != predicted) {
    throw ImportError(fmt::format("{}:{}: measured on {} ({}), but it would be predicted for {} ({}): give the GPU "
                                  "that ran it",
                                  m.file, run.first_line, run.device, measured, gpu.name, predicted));
  }
  const int per_node = r.ranks / r.nodes;
  const int gpus_per_server = kGpusPerServer;
  if (gpus_per_server % per_node != 0) {
    r.skipped = std::to_string(per_node) + " ranks per node do not divide an 8-GPU server";
    return r;
  }
  const network::FabricSpec spec = sim::default_fabric_spec(gpu, r.nodes * gpus_per_server);
  const network::Topology topology = network::Topology::build(spec);
  const network::Router router(topology, sim::ecmp_config(model::NetworkConfig{}));
  network::CollectiveSimulator sim(topology, router, sim::collective_options(gpu, m.nic_gbps, model::NetworkConfig{}));
  network::CollectiveRequest req;
  req.op = *op;
  req.groups = network::strided_groups(gpus_per_server, 1, r.ranks, per_node);
  // The command line's restriction, else the one the source states.
  const std::optional<network::CollectiveAlgorithm> algorithm = only.algorithm ? only.algorithm : m.nccl_algo;
  const std::optional<network::NcclProtocol> protocol = only.protocol ? only.protocol : m.nccl_proto;
  for (const NcclTestsPoint& pt : run.points) {
    if (!(pt.time_us > 0) || pt.bytes <= 0) continue;
    req.bytes = static_cast<double>(pt.bytes);
    const network::TunedCollective tuned = network::tune_collective(sim, req, algorithm, protocol);
    NetPoint p;
    p.bytes = req.bytes;
    p.out_of_place_us = pt.time_us;
    p.disturbed = out_of_place_disturbed(pt);
    p.measured_us = undisturbed_time_us(pt);
    p.predicted_us = tuned.best.time_s * 1e6;
    p.choice = std::string(network::to_string(tuned.best.algorithm)) + "/" + network::to_string(tuned.best.protocol);
    p.channels = tuned.best.channels;
    r.points.push_back(p);
  }
  return r;
}

std::vector<NetRun> predict_net_runs(const std::vector<NetMachine>& machines, const NetRestriction& only) {
  std::vector<NetRun> runs;
  for (const NetMachine& m : machines) {
    try {
      runs.push_back(predict_net_run(m, only));
    } catch (const std::invalid_argument& e) {  // a restriction no NCCL pair meets on this machine
      throw std::invalid_argument(m.file + ": " + e.what());
    }
  }
  return runs;
}

std::vector<NetClassStats> score_net_runs(const std::vector<NetRun>& results) {
  std::vector<NetClassStats> classes = {{"one node, >= 256 MiB", 0.05, 0.10, {}},
                                        {"one node, <= 1 MiB", 0.20, 0.50, {}},
                                        {"across nodes, >= 256 MiB", 0.05, 0.10, {}},
                                        {"across nodes, <= 1 MiB", 0.20, 0.50, {}}};
  for (const NetRun& r : results) {
    if (!r.machine.unscored.empty()) continue;
    for (const NetPoint& pt : r.points) {
      const int base = r.nodes > 1 ? 2 : 0;
      if (pt.bytes >= kLargeBytes) classes[base].errors.push_back(std::fabs(pt.error()));
      if (pt.bytes <= kSmallBytes) classes[base + 1].errors.push_back(std::fabs(pt.error()));
    }
  }
  return classes;
}

NetMachine profile_machine(const std::string& gpu) {
  NetMachine m;
  m.gpu = gpu;
  const model::GpuProfile g = model::profile_named_or_file(gpu);
  m.nics_per_node = g.default_nics_per_node;
  m.nic_gbps = g.default_nic_gbps;
  return m;
}

NetRunErrors net_run_errors(const NetRun& r) {
  NetRunErrors e{{"", 0, 0, {}}, {"", 0, 0, {}}, {"", 0, 0, {}}};
  for (const NetPoint& pt : r.points) {
    e.all.errors.push_back(std::fabs(pt.error()));
    if (pt.bytes >= kLargeBytes) e.large.errors.push_back(std::fabs(pt.error()));
    if (pt.bytes <= kSmallBytes) e.small.errors.push_back(std::fabs(pt.error()));
  }
  return e;
}

bool all_pass(const std::vector<NetClassStats>& classes) {
  return std::all_of(classes.begin(), classes.end(), [](const NetClassStats& c) { return c.pass(); });
}

}  // namespace megascale::calibrate
