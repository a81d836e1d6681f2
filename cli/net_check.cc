// cli/net_check.cc: see net_check.h. Parse -> read nccl-tests (calibrate/) ->
// predict each size with the tuner on the fabric (network/) -> score -> print.
#include "cli/net_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibrate/nccl_tests.h"
#include "cli/args.h"
#include "cli/report.h"
#include "cli/text_file.h"
#include "cli/commands.h"
#include "sim/fabric_config.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "model/toml_section.h"
#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "network/routing.h"
#include "network/topology.h"

namespace megascale::cli {
namespace {

namespace fs = std::filesystem;

constexpr double kLargeBytes = 256.0 * (1 << 20);  // issue 12: ">= 256 MB"
constexpr double kSmallBytes = 1.0 * (1 << 20);    // issue 12: "<= 1 MB"

struct Machine {
  std::string file;       // path of the nccl-tests output
  std::string gpu;        // profile name or file
  int nics_per_node = 0;
  double nic_gbps = 0;
  std::string transport;
  std::string exclude;    // non-empty: listed, not predicted
  std::string unscored;   // non-empty: predicted and listed, left out of the bounds
};

struct Point {
  double bytes = 0;
  double measured_us = 0;
  double predicted_us = 0;
  std::string choice;  // "ring/LL"
  double error() const { return (predicted_us - measured_us) / measured_us; }
};

struct RunResult {
  Machine machine;
  std::string op;
  int ranks = 0;
  int nodes = 0;
  std::string skipped;  // why it was not predicted (exclusion, unsupported op)
  std::vector<Point> points;
};

std::vector<Machine> read_manifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const toml::table root = model::parse_toml(ss.str(), path);
  const model::Section top(root, "", path);
  static constexpr std::string_view kTop[] = {"run"};
  top.reject_unknown_keys(kTop);
  const toml::array* runs = root["run"].as_array();
  if (runs == nullptr || runs->empty()) top.fail_missing("run", "at least one [[run]] table");
  std::vector<Machine> out;
  const fs::path dir = fs::path(path).parent_path();
  for (size_t i = 0; i < runs->size(); ++i) {
    const toml::table* t = (*runs)[i].as_table();
    const std::string name = "run[" + std::to_string(i) + "]";
    if (t == nullptr) top.fail_at((*runs)[i], name, "expected a [[run]] table");
    const model::Section s(*t, name, path);
    static constexpr std::string_view kKeys[] = {"file",      "gpu",     "nics_per_node", "nic_gbps",
                                                 "transport", "exclude", "unscored"};
    s.reject_unknown_keys(kKeys);
    Machine m;
    const std::optional<std::string> file = s.string("file");
    if (!file) s.fail_missing("file");
    m.file = (dir / *file).string();
    if (!fs::is_regular_file(m.file)) s.fail("file", "no such file: " + m.file);
    const std::optional<std::string> gpu = s.string("gpu");
    if (!gpu) s.fail_missing("gpu");
    m.gpu = *gpu;
    const std::optional<int> nics = s.integer("nics_per_node", 1, 64);
    if (!nics) s.fail_missing("nics_per_node");
    m.nics_per_node = *nics;
    const std::optional<double> gbps = s.positive_number("nic_gbps");
    if (!gbps) s.fail_missing("nic_gbps");
    m.nic_gbps = *gbps;
    m.transport = s.string("transport").value_or("");
    m.exclude = s.string("exclude").value_or("");
    m.unscored = s.string("unscored").value_or("");
    out.push_back(std::move(m));
  }
  return out;
}

std::optional<network::CollectiveOp> op_of(const std::string& nccl_op) {
  if (nccl_op == "all_reduce") return network::CollectiveOp::kAllReduce;
  if (nccl_op == "all_gather") return network::CollectiveOp::kAllGather;
  if (nccl_op == "reduce_scatter") return network::CollectiveOp::kReduceScatter;
  if (nccl_op == "sendrecv") return network::CollectiveOp::kSendRecv;
  return std::nullopt;
}

model::GpuProfile profile_of(const Machine& m) {
  model::GpuProfile p = fs::is_regular_file(m.gpu) ? model::load_profile(m.gpu) : model::builtin_profile(m.gpu);
  p.default_nics_per_node = m.nics_per_node;
  p.default_nic_gbps = m.nic_gbps;
  return p;
}

struct Restriction {
  std::optional<network::CollectiveAlgorithm> algorithm;
  std::optional<network::NcclProtocol> protocol;
};

RunResult predict(const Machine& m, const Restriction& only) {
  RunResult r;
  r.machine = m;
  const calibrate::NcclTestsRun run = calibrate::read_nccl_tests_file(m.file);
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
  const int per_node = r.ranks / r.nodes;
  const int gpus_per_server = 8;
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
  for (const calibrate::NcclTestsPoint& pt : run.points) {
    if (!(pt.time_us > 0) || pt.bytes <= 0) continue;
    req.bytes = static_cast<double>(pt.bytes);
    const network::TunedCollective tuned = network::tune_collective(sim, req, only.algorithm, only.protocol);
    Point p;
    p.bytes = req.bytes;
    p.measured_us = pt.time_us;
    p.predicted_us = tuned.best.time_s * 1e6;
    p.choice = std::string(network::to_string(tuned.best.algorithm)) + "/" + network::to_string(tuned.best.protocol);
    r.points.push_back(p);
  }
  return r;
}

struct ClassStats {
  std::string name;
  double median_bound = 0, max_bound = 0;
  std::vector<double> errors;  // |relative error|
  double median() const {
    if (errors.empty()) return 0;
    std::vector<double> e = errors;
    std::sort(e.begin(), e.end());
    const size_t n = e.size();
    return n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
  }
  double max() const { return errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end()); }
  bool pass() const { return errors.empty() || (median() <= median_bound && max() <= max_bound); }
};

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * v);
  return b;
}
std::string num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string size_text(double b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB"};
  int i = 0;
  while (b >= 1024 && i < 3) {
    b /= 1024;
    ++i;
  }
  return num(i == 0 ? "%.0f" : "%.0f", b) + " " + u[i];
}

}  // namespace

int calibrate_net_check(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json", "--points"},
                                  {"--manifest", "--gpu", "--nics-per-node", "--nic-gbps", "--write", "--algo",
                                   "--proto"});
  Restriction only;  // NCCL_ALGO / NCCL_PROTO: what a forced choice would give
  if (p.has("--algo") && p.values.at("--algo") != "auto") {
    only.algorithm = network::parse_collective_algorithm(p.values.at("--algo"));
    if (!only.algorithm || *only.algorithm == network::CollectiveAlgorithm::kHierarchical) {
      throw UsageError("--algo must be auto, ring, tree, nvls or nvls-tree, got '" + p.values.at("--algo") + "'");
    }
  }
  if (p.has("--proto") && p.values.at("--proto") != "auto") {
    only.protocol = network::parse_nccl_protocol(p.values.at("--proto"));
    if (!only.protocol) throw UsageError("--proto must be auto, LL, LL128 or Simple, got '" + p.values.at("--proto") + "'");
  }
  std::vector<Machine> machines;
  if (p.has("--manifest")) {
    if (!p.positional.empty()) throw UsageError("net-check takes --manifest FILE or nccl-tests FILEs, not both");
    machines = read_manifest(p.values.at("--manifest"));
  } else {
    if (p.positional.empty()) throw UsageError("net-check needs --manifest FILE or nccl-tests FILEs with --gpu");
    if (!p.has("--gpu")) throw UsageError("net-check FILE... needs --gpu NAME|FILE (and --nic-gbps, --nics-per-node)");
    Machine base;
    base.gpu = p.values.at("--gpu");
    const model::GpuProfile g =
        fs::is_regular_file(base.gpu) ? model::load_profile(base.gpu) : model::builtin_profile(base.gpu);
    base.nics_per_node = g.default_nics_per_node;
    base.nic_gbps = g.default_nic_gbps;
    try {
      if (p.has("--nics-per-node")) base.nics_per_node = std::stoi(p.values.at("--nics-per-node"));
      if (p.has("--nic-gbps")) base.nic_gbps = std::stod(p.values.at("--nic-gbps"));
    } catch (const std::exception&) {
      throw UsageError("--nics-per-node and --nic-gbps take positive numbers");
    }
    if (base.nics_per_node < 1 || base.nics_per_node > 64 || !(base.nic_gbps > 0) || !std::isfinite(base.nic_gbps)) {
      throw UsageError("--nics-per-node must be in 1..64 and --nic-gbps positive");
    }
    for (const std::string& f : p.positional) {
      Machine m = base;
      m.file = f;
      machines.push_back(m);
    }
  }

  std::vector<RunResult> results;
  for (const Machine& m : machines) {
    try {
      results.push_back(predict(m, only));
    } catch (const calibrate::ImportError& e) {
      err << "megascale calibrate net-check: " << e.what() << "\n";
      return 2;
    } catch (const std::invalid_argument& e) {  // a restriction no NCCL pair meets on this machine
      err << "megascale calibrate net-check: " << m.file << ": " << e.what() << "\n";
      return 2;
    }
  }

  ClassStats classes[4] = {{"one node, >= 256 MiB", 0.05, 0.10, {}},
                           {"one node, <= 1 MiB", 0.20, 0.50, {}},
                           {"across nodes, >= 256 MiB", 0.05, 0.10, {}},
                           {"across nodes, <= 1 MiB", 0.20, 0.50, {}}};
  for (const RunResult& r : results) {
    if (!r.machine.unscored.empty()) continue;
    for (const Point& pt : r.points) {
      const int base = r.nodes > 1 ? 2 : 0;
      if (pt.bytes >= kLargeBytes) classes[base].errors.push_back(std::fabs(pt.error()));
      if (pt.bytes <= kSmallBytes) classes[base + 1].errors.push_back(std::fabs(pt.error()));
    }
  }
  bool pass = true;
  for (const ClassStats& c : classes) pass = pass && c.pass();

  std::ostringstream md;
  md << "# `megascale net collective` against published nccl-tests output\n\n"
     << "Generated by `megascale calibrate net-check";
  for (const std::string& a : args) md << " " << a;
  md << "`. Each printed size of each run is predicted by the NCCL tuner on the fabric model "
        "(`network/collective_tuner.h`: NCCL 2.30 tuning.cc latencies and protocol ratios, flow-model bandwidth, "
        "the fastest enabled algorithm/protocol) for the machine its source states, and compared with the "
        "out-of-place time nccl-tests printed. Nothing is fitted to these files. Error = predicted / measured - 1.\n\n";
  md << "## Summary\n\n| class | points | median abs error | max abs error | bound (median / max) | met |\n"
        "|---|---|---|---|---|---|\n";
  for (const ClassStats& c : classes) {
    md << "| " << c.name << " | " << c.errors.size() << " | "
       << (c.errors.empty() ? std::string("-") : num("%.1f%%", 100 * c.median())) << " | "
       << (c.errors.empty() ? std::string("-") : num("%.1f%%", 100 * c.max())) << " | "
       << num("%.0f%%", 100 * c.median_bound) << " / " << num("%.0f%%", 100 * c.max_bound) << " | "
       << (c.errors.empty() ? "no data" : (c.pass() ? "yes" : "**no**")) << " |\n";
  }
  md << "\n## Runs\n\n| file | op | ranks | nodes | GPU | NICs | transport | points | median abs error | "
        "large (>= 256 MiB) | small (<= 1 MiB) |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : results) {
    const std::string file = fs::path(r.machine.file).filename().string();
    md << "| `" << file << "` | " << r.op << " | " << r.ranks << " | " << r.nodes << " | " << r.machine.gpu << " | "
       << r.machine.nics_per_node << " x " << num("%.0f", r.machine.nic_gbps) << "G | " << r.machine.transport << " | ";
    if (!r.skipped.empty()) {
      md << "- | " << r.skipped << " | | |\n";
      continue;
    }
    ClassStats all{"", 0, 0, {}}, large{"", 0, 0, {}}, small{"", 0, 0, {}};
    for (const Point& pt : r.points) {
      all.errors.push_back(std::fabs(pt.error()));
      if (pt.bytes >= kLargeBytes) large.errors.push_back(std::fabs(pt.error()));
      if (pt.bytes <= kSmallBytes) small.errors.push_back(std::fabs(pt.error()));
    }
    auto cell = [&](const ClassStats& c) {
      return c.errors.empty() ? std::string("-")
                              : num("%.1f%%", 100 * c.median()) + " median, " + num("%.1f%%", 100 * c.max()) + " max";
    };
    md << r.points.size() << (r.machine.unscored.empty() ? "" : " (not scored: " + r.machine.unscored + ")")
       << " | " << num("%.1f%%", 100 * all.median()) << " | " << cell(large) << " | "
       << cell(small) << " |\n";
  }
  if (p.on("--points")) {
    for (const RunResult& r : results) {
      if (r.points.empty()) continue;
      md << "\n### `" << fs::path(r.machine.file).filename().string() << "`\n\n"
         << "| size | measured us | predicted us | error | tuner choice |\n|---|---|---|---|---|\n";
      for (const Point& pt : r.points) {
        md << "| " << size_text(pt.bytes) << " | " << num("%.1f", pt.measured_us) << " | "
           << num("%.1f", pt.predicted_us) << " | " << pct(pt.error()) << " | " << pt.choice << " |\n";
      }
    }
  }
  md << "\nBounds " << (pass ? "met" : "**not met**") << " (issue 12).\n";

  if (p.has("--write")) {
    const std::string path = p.values.at("--write");
    if (!write_text_atomically(path, md.str())) {
      err << "megascale calibrate net-check: cannot write " << path << "\n";
      return 2;
    }
  }
  if (p.on("--json")) {
    base::Json j;
    j["pass"] = pass;
    for (const ClassStats& c : classes) {
      j["classes"].push_back({{"name", c.name}, {"points", c.errors.size()}, {"median_abs_error", c.median()},
                              {"max_abs_error", c.max()}, {"median_bound", c.median_bound},
                              {"max_bound", c.max_bound}, {"pass", c.pass()}});
    }
    for (const RunResult& r : results) {
      base::Json rj = {{"file", r.machine.file}, {"op", r.op},   {"ranks", r.ranks},
                           {"nodes", r.nodes},       {"gpu", r.machine.gpu}, {"skipped", r.skipped},
                           {"unscored", r.machine.unscored}};
      for (const Point& pt : r.points) {
        rj["points"].push_back({{"bytes", pt.bytes}, {"measured_us", pt.measured_us},
                                {"predicted_us", pt.predicted_us}, {"choice", pt.choice}});
      }
      j["runs"].push_back(rj);
    }
    out << report_json(j) << "\n";
  } else {
    out << md.str();
  }
  return pass ? 0 : 1;
}

}  // namespace megascale::cli
