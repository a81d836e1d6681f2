// cli/net_command.cc: `megascale net collective|ecmp|incast` - the fabric alone,
// without a training job (issue 3, "Command"). Parse -> call network/ -> print.
//
//   collective: network/collectives.h on the MegaScale fabric sized for the job
//               (sim/fabric_config.h), or on a scenario's fabric (--scenario);
//   ecmp:       network/ecmp_stats.h (Monte Carlo through the router + theory);
//   incast:     network/congestion.h's incast_report (+ incast_svg for --plot).
// Exit codes as every command (cli/commands.h): 0 ok, 2 bad input - usage errors
// with the net usage text, scenario errors (file:line: key: reason), fabric
// errors naming the FabricSpec parameter, unknown GPU profiles.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ostream.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "sim/fabric_config.h"
#include "base/json.h"
#include "base/text_file.h"
#include "cli/report.h"
#include "model/hardware.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "network/collective_tuner.h"
#include "network/collectives.h"
#include "network/congestion.h"
#include "network/ecmp_stats.h"
#include "network/routing.h"
#include "network/topology.h"

namespace megascale::cli {
namespace {


std::string net_usage() {
  return "usage: megascale net <collective|ecmp|incast> [options]\n"
         "\n"
         "  collective --op allgather|reducescatter|allreduce|sendrecv --gpus N --bytes B\n"
         "             [--algo auto|ring|tree|nvls|nvls-tree|hierarchical] [--proto auto|LL|LL128|Simple]\n"
         "             [--gpu A100-SXM4-80GB] [--scenario FILE]\n"
         "             [--groups G] [--ranks-per-server M] [--placement packed|scattered [--seed S]]\n"
         "             [--qps Q] [--cc hybrid|dcqcn|swift|none] [--json]\n"
         "      time, algbw and busbw (nccl-tests conventions, GB/s) of one collective over N\n"
         "      ranks, with G identical communicators running at once (default 1) laid out as\n"
         "      Megatron-LM's data-parallel groups, M ranks of each on a server (default\n"
         "      gcd(N, GPUs per server)); scattered shuffles the servers (rings then cross the\n"
         "      aggregation and core tiers). On the MegaScale 3-tier fabric sized for them, or\n"
         "      on the scenario's [network]/[cluster]/[hardware] fabric. B takes K/M/G/T or\n"
         "      KiB/MiB/GiB/TiB (powers of 1024, as nccl-tests) or KB/MB/GB/TB (powers of 1000).\n"
         "      auto (default) picks the algorithm and protocol as NCCL's tuner does (NCCL 2.30\n"
         "      tuning.cc: latency + bytes / bandwidth per pair, the fastest runs) and prints\n"
         "      every pair considered; --algo / --proto restrict it like NCCL_ALGO / NCCL_PROTO.\n"
         "  ecmp --paths N --flows K --qps Q [--trials T] [--seed S] [--hash crc32|murmur3] [--json]\n"
         "      K flows of Q QPs hashed onto N equal-cost paths: mean fraction of paths used\n"
         "      and the efficiency of a synchronous collective (1/E[max load]), measured\n"
         "      through the router and in theory (balls into bins).\n"
         "  incast --senders N --cc dcqcn|swift|hybrid|none [--plot FILE.svg] [--duration-us D]\n"
         "         [--capacity-gbps C] [--no-pfc] [--json]\n"
         "      N senders into one switch port: queue, throughput and PFC pauses over time;\n"
         "      --plot writes them as an SVG.\n";
}


// Subcommands of `net` take no positional arguments.
ParsedArgs parse_net_args(const Args& args, const std::set<std::string>& switches,
                          const std::set<std::string>& valued) {
  ParsedArgs p = parse_args(args, switches, valued);
  if (!p.positional.empty()) throw UsageError("unexpected argument '" + p.positional.front() + "'");
  return p;
}

const std::string& required(const ParsedArgs& p, const std::string& name) {
  auto it = p.values.find(name);
  if (it == p.values.end()) throw UsageError(name + " is required");
  return it->second;
}

int64_t integer(const ParsedArgs& p, const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  auto it = p.values.find(name);
  if (it == p.values.end()) return fallback;
  const std::string& s = it->second;
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used != s.size() || v < min || v > max) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError(name + " expects an integer in " + std::to_string(min) + ".." + std::to_string(max) +
                     ", got '" + s + "'");
  }
}

double number(const ParsedArgs& p, const std::string& name, double fallback) {
  auto it = p.values.find(name);
  if (it == p.values.end()) return fallback;
  const std::string& s = it->second;
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size() || !(v > 0) || !std::isfinite(v)) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError(name + " expects a positive number, got '" + s + "'");
  }
}

// A size in bytes: a number with an optional unit. K, M, G, T and KiB, MiB, GiB,
// TiB are powers of 1024 (nccl-tests' -b/-e convention: 1G = 2^30); KB, MB, GB,
// TB powers of 1000; B or nothing, bytes. Units are case-insensitive. Throws
// std::invalid_argument with the reason.
double parse_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (e.g. 1G, 256M, 1GiB, 4096)");
  }
  std::string unit;
  for (size_t i = used; i < text.size(); ++i) {
    unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  }
  static const std::map<std::string, double> kUnits = {
      {"", 1.0},          {"B", 1.0},
      {"K", 0x1p10},      {"KIB", 0x1p10},  {"KB", 1e3},
      {"M", 0x1p20},      {"MIB", 0x1p20},  {"MB", 1e6},
      {"G", 0x1p30},      {"GIB", 0x1p30},  {"GB", 1e9},
      {"T", 0x1p40},      {"TIB", 0x1p40},  {"TB", 1e12}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    throw std::invalid_argument("'" + text + "': unknown unit '" + text.substr(used) +
                                "' (K, M, G, T = powers of 1024, also KiB..TiB; KB..TB = powers of 1000)");
  }
  const double bytes = v * it->second;
  if (!(bytes > 0) || !std::isfinite(bytes) || bytes > 0x1p60) {
    throw std::invalid_argument("'" + text + "' must be a positive size of at most 1 EiB");
  }
  return bytes;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_time(double s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

Json bottleneck_json(const network::Bottleneck& b) {
  Json j;
  j["kind"] = b.kind;
  j["description"] = b.description;
  j["flows"] = b.flows;
  j["capacity_gbps"] = b.capacity_gbps;
  j["rate_gbps"] = b.rate_gbps;
  if (b.link >= 0) {
    j["link"] = static_cast<int64_t>(b.link);
    j["direction"] = b.up ? "up" : "down";
  }
  return j;
}

Json cc_json(const network::CcEffectUsed& c) {
  Json j;
  j["algorithm"] = std::string(network::cc_algorithm_name(c.algorithm));
  j["applied"] = c.applied;
  j["senders_per_bottleneck"] = c.senders;
  j["achieved_bandwidth_fraction"] = c.achieved_bandwidth_fraction;
  j["added_latency_us"] = c.added_latency_us;
  j["pfc_pause_fraction"] = c.pfc_pause_fraction;
  return j;
}

std::string cc_text(const network::CcEffectUsed& c) {
  const std::string name(network::cc_algorithm_name(c.algorithm));
  if (!c.applied) return name + ": no effect on the critical flow (no switch queue shared with it)";
  return fmt::format("{}: {} sub-flows share the bottleneck queue; achieved {:.1f}% of it, +{:.2f} us queueing, "
                     "PFC paused {:.1f}% of the time",
                     name, c.senders, 100 * c.achieved_bandwidth_fraction, c.added_latency_us,
                     100 * c.pfc_pause_fraction);
}

int net_collective(const Args& args, std::ostream& out) {
  const ParsedArgs p = parse_net_args(args, {"--json"},
                                  {"--op", "--gpus", "--bytes", "--gpu", "--algo", "--proto", "--scenario", "--groups",
                                   "--ranks-per-server", "--qps", "--cc", "--placement", "--seed", "--profile"});
  const std::string& op_name = required(p, "--op");
  const std::optional<network::CollectiveOp> op = network::parse_collective_op(op_name);
  if (!op) throw UsageError("--op must be allgather, reducescatter, allreduce or sendrecv, got '" + op_name + "'");
  required(p, "--gpus");
  const int ranks = static_cast<int>(integer(p, "--gpus", 0, 2, 1 << 22));
  double bytes = 0;
  try {
    bytes = parse_bytes(required(p, "--bytes"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--bytes: ") + e.what());
  }
  std::optional<network::CollectiveAlgorithm> algo;  // nullopt: NCCL's choice
  if (p.has("--algo") && p.values.at("--algo") != "auto") {
    const auto a = network::parse_collective_algorithm(p.values.at("--algo"));
    if (!a) {
      throw UsageError("--algo must be auto, ring, tree, nvls, nvls-tree or hierarchical, got '" +
                       p.values.at("--algo") + "'");
    }
    algo = *a;
  }
  std::optional<network::NcclProtocol> proto;  // nullopt: NCCL's choice
  if (p.has("--proto") && p.values.at("--proto") != "auto") {
    const auto pr = network::parse_nccl_protocol(p.values.at("--proto"));
    if (!pr) throw UsageError("--proto must be auto, LL, LL128 or Simple, got '" + p.values.at("--proto") + "'");
    proto = *pr;
  }
  if ((algo == network::CollectiveAlgorithm::kTree || algo == network::CollectiveAlgorithm::kNvlsTree) &&
      *op != network::CollectiveOp::kAllReduce && *op != network::CollectiveOp::kSendRecv) {
    throw UsageError(std::string("--algo ") + network::to_string(*algo) + " is for allreduce only (as in NCCL)");
  }
  const int groups = static_cast<int>(integer(p, "--groups", 1, 1, 1 << 20));
  const std::string placement = p.has("--placement") ? p.values.at("--placement") : "packed";
  if (placement != "packed" && placement != "scattered") {
    throw UsageError("--placement must be packed or scattered, got '" + placement + "'");
  }
  const auto seed = static_cast<uint64_t>(integer(p, "--seed", 1, 0, INT64_MAX));

  // Hardware, fabric, ECMP and CC: the scenario's, or the MegaScale defaults.
  std::optional<model::Scenario> scenario;
  if (p.has("--scenario")) scenario = model::load_scenario(p.values.at("--scenario"));
  const std::string gpu_name =
      p.has("--gpu") ? p.values.at("--gpu") : (scenario ? scenario->hardware.gpu : std::string("A100-SXM4-80GB"));
  const model::GpuProfile& gpu = model::gpu_profile(gpu_name);
  const model::NetworkConfig net = scenario ? scenario->network : model::NetworkConfig{};
  const int gpus_per_server = scenario ? scenario->hardware.gpus_per_node : 8;
  const double nic_gbps = scenario ? scenario->hardware.nic_gbps : gpu.default_nic_gbps;
  const int ranks_per_server =
      static_cast<int>(integer(p, "--ranks-per-server", std::gcd(ranks, gpus_per_server), 1, gpus_per_server));
  if (gpus_per_server % ranks_per_server != 0 || ranks % ranks_per_server != 0) {
    throw UsageError("--ranks-per-server " + std::to_string(ranks_per_server) + " must divide both --gpus (" +
                     std::to_string(ranks) + ") and the GPUs per server (" + std::to_string(gpus_per_server) + ")");
  }
  const int64_t needed = network::strided_groups_gpus(gpus_per_server, groups, ranks, ranks_per_server);
  if (needed > (1 << 24)) throw UsageError("the job needs " + std::to_string(needed) + " GPUs; at most 16777216");

  network::FabricSpec spec;
  if (scenario) {
    if (needed > scenario->cluster.gpus) {
      throw UsageError(std::to_string(groups) + " x " + std::to_string(ranks) + " ranks at " +
                       std::to_string(ranks_per_server) + " per server need " + std::to_string(needed) +
                       " GPUs; the scenario's cluster has " + std::to_string(scenario->cluster.gpus));
    }
    spec = sim::fabric_spec(net, scenario->hardware, gpu, scenario->cluster.gpus);
  } else {
    spec = sim::default_fabric_spec(gpu, static_cast<int>(needed));
  }
  network::EcmpConfig ecmp = sim::ecmp_config(net);
  ecmp.qps_per_connection =
      static_cast<int>(integer(p, "--qps", ecmp.qps_per_connection, 1, network::kMaxQpsPerConnection));
  network::CollectiveOptions options = sim::collective_options(gpu, nic_gbps, net);
  if (p.has("--cc")) {
    const auto cc = network::parse_cc_algorithm(p.values.at("--cc"));
    if (!cc) throw UsageError("--cc must be hybrid, dcqcn, swift or none, got '" + p.values.at("--cc") + "'");
    options.congestion_control = *cc;
  }

  // A profile with measured collectives (calibrate import of nccl-tests output,
  // calibrate micro): its answer is printed beside the fabric model's.
  std::optional<model::GpuProfile> measured;
  if (p.has("--profile")) {
    measured = model::load_profile(p.values.at("--profile"));
  } else if (scenario && scenario->hardware.loaded_profile) {
    measured = *scenario->hardware.loaded_profile;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const network::Topology topology = network::Topology::build(spec);
  const network::Router router(topology, ecmp);
  network::CollectiveSimulator sim(topology, router, options);
  network::CollectiveRequest req;
  req.op = *op;
  req.bytes = bytes;
  req.groups = network::strided_groups(gpus_per_server, groups, ranks, ranks_per_server);
  if (placement == "scattered") {
    network::scatter_servers(&req.groups, gpus_per_server, spec.gpus / gpus_per_server, seed);
  }
  // Hierarchical is three NCCL calls, not an NCCL algorithm: run as asked
  // (Simple unless --proto names another). Everything else goes through the tuner.
  network::TunedCollective tuned;
  try {
    if (algo == network::CollectiveAlgorithm::kHierarchical) {
      req.algorithm = *algo;
      req.protocol = proto.value_or(network::NcclProtocol::kSimple);
      tuned.best = sim.run(req);
    } else {
      tuned = network::tune_collective(sim, req, algo, proto);
    }
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  const network::CollectiveResult& r = tuned.best;
  const bool auto_choice = !algo || !proto;
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::string table_op = *op == network::CollectiveOp::kAllReduce       ? "all_reduce"
                               : *op == network::CollectiveOp::kAllGather     ? "all_gather"
                               : *op == network::CollectiveOp::kReduceScatter ? "reduce_scatter"
                                                                              : "sendrecv";
  const std::string profile_scope = r.servers_per_group > 1 ? "inter" : "intra";
  std::optional<double> profile_s;
  if (measured && measured->measured() != nullptr) {
    profile_s = measured->measured()->collectives.time_s(table_op, profile_scope, r.ranks, bytes);
  }
  const double profile_busbw_gbs =
      profile_s ? bytes * model::busbw_factor(table_op, r.ranks) / *profile_s / 1e9 : 0.0;

  const std::string busbw_rule = *op == network::CollectiveOp::kAllReduce    ? "algbw x 2(n-1)/n"
                                 : *op == network::CollectiveOp::kSendRecv ? "algbw"
                                                                           : "algbw x (n-1)/n";
  if (p.on("--json")) {
    Json j;
    j["op"] = network::to_string(r.op);
    j["algorithm"] = network::to_string(r.algorithm);
    j["protocol"] = network::to_string(r.protocol);
    j["auto"] = auto_choice;
    std::vector<Json> cands;
    for (const network::TunerCandidate& c : tuned.candidates) {
      Json cj;
      cj["algorithm"] = network::to_string(c.algorithm);
      cj["protocol"] = network::to_string(c.protocol);
      cj["enabled"] = c.enabled;
      if (c.enabled) {
        cj["time_s"] = c.time_s;
        cj["latency_s"] = c.latency_s;
        cj["busbw_gbs"] = c.busbw_gbs;
        cj["nccl_estimate_s"] = c.estimate_s;
      } else {
        cj["why_not"] = c.why_not;
      }
      cands.push_back(cj);
    }

    j["gpu"] = gpu.name;
    j["ranks"] = r.ranks;
    j["groups"] = r.groups;
    j["ranks_per_server"] = ranks_per_server;
    j["servers_per_group"] = r.servers_per_group;
    j["placement"] = placement;
    j["bytes"] = static_cast<int64_t>(std::llround(r.bytes));
    j["time_s"] = r.time_s;
    j["algbw_gbs"] = r.algbw_gbs;
    j["busbw_gbs"] = r.busbw_gbs;
    j["busbw_rule"] = busbw_rule;
    j["latency_s"] = r.latency_s;
    j["bandwidth_s"] = r.bandwidth_s;
    j["steps"] = r.steps;
    j["bottleneck"] = bottleneck_json(r.bottleneck);
    j["congestion_control"] = cc_json(r.cc);
    std::vector<Json> phases;
    for (const network::CollectivePhase& ph : r.phases) {
      Json pj;
      pj["name"] = ph.name;
      pj["steps"] = ph.steps;
      pj["step_bandwidth_s"] = ph.step.bandwidth_s;
      pj["bandwidth_s"] = ph.bandwidth_s;
      pj["latency_s"] = ph.latency_s;
      pj["flows_per_step"] = static_cast<int64_t>(ph.step.subflows);
      pj["network_flows_per_step"] = static_cast<int64_t>(ph.step.network_subflows);
      pj["cc_limited_flows"] = static_cast<int64_t>(ph.step.cc_limited_subflows);
      pj["memo_hit"] = ph.memo_hit;
      pj["bottleneck"] = bottleneck_json(ph.step.bottleneck);
      pj["congestion_control"] = cc_json(ph.step.cc);
      phases.push_back(pj);
    }
    j["phases"] = phases;
    Json fj;
    fj["preset"] = spec.preset;
    fj["description"] = topology.describe();
    fj["gpus"] = spec.gpus;
    fj["nic_gbps"] = spec.nic_gbps;
    fj["nic_busbw_gbs"] = options.nic_busbw_gbs;
    fj["nvlink_busbw_gbs"] = options.nvlink_busbw_gbs;
    fj["ecmp_hash"] = network::to_string(ecmp.hash);
    fj["qps_per_connection"] = ecmp.qps_per_connection;
    fj["polarized"] = ecmp.polarized;
    j["fabric"] = fj;
    j["step_solves"] = static_cast<int64_t>(r.step_solves);
    j["wall_time_s"] = wall_s;
    if (measured) {
      Json pj;
      pj["name"] = measured->name;
      pj["file"] = measured->source_file;
      pj["scope"] = profile_scope;
      if (profile_s) {
        pj["time_s"] = *profile_s;
        pj["busbw_gbs"] = profile_busbw_gbs;
      } else {
        pj["time_s"] = nullptr;
      }
      j["profile"] = pj;
    }
    j["candidates"] = cands;  // last: the fields above are the chosen pair's
    out << report_json(j) << "\n";
    return 0;
  }
  fmt::print(out, "{} ({}, {}) of {} over {} ranks ({} per server, {}) x {} group{}, {}\n", network::to_string(r.op),
             network::to_string(r.algorithm), network::to_string(r.protocol), human_bytes(bytes), r.ranks,
             ranks_per_server, placement, r.groups, r.groups == 1 ? "" : "s", gpu.name);
  out << "  fabric      " << topology.describe() << "; ECMP " << network::to_string(ecmp.hash) << ", "
      << ecmp.qps_per_connection << " QP(s) per connection\n";
  out << "  time        " << human_time(r.time_s) << " (latency " << human_time(r.latency_s) << " + bandwidth "
      << human_time(r.bandwidth_s) << ")\n";
  out << "  algbw       " << fmt::format("{:.2f} GB/s", r.algbw_gbs) << "\n";
  out << "  busbw       " << fmt::format("{:.2f} GB/s", r.busbw_gbs) << " (" << busbw_rule << ", nccl-tests)\n";
  out << "  steps       " << r.steps << "\n";
  out << "  bottleneck  " << r.bottleneck.kind << ": " << r.bottleneck.description << "\n";
  out << "  congestion  " << cc_text(r.cc) << "\n";
  out << "  phases\n";
  for (const network::CollectivePhase& ph : r.phases) {
    fmt::print(out, "    {:<44} {:4} steps x {}, {} flows/step, latency {}{}\n", ph.name, ph.steps,
               human_time(ph.step.bandwidth_s), ph.step.subflows, human_time(ph.latency_s),
               ph.memo_hit ? " (memoised)" : "");
  }
  if (tuned.candidates.size() > 1) {
    out << "  NCCL tuner  " << (auto_choice ? "chose " : "ran ") << network::to_string(r.algorithm) << "/"
        << network::to_string(r.protocol)
        << " (the lowest NCCL estimate, NCCL 2.30 tuning.cc; times are the fabric model's); pairs considered:\n";
    for (const network::TunerCandidate& c : tuned.candidates) {
      const std::string pair = std::string(network::to_string(c.algorithm)) + "/" + network::to_string(c.protocol);
      if (c.enabled) {
        fmt::print(out, "    {:<18} {:>12}  latency {:>10}  busbw {:8.2f} GB/s  NCCL estimate {:>12}{}\n", pair,
                   human_time(c.time_s), human_time(c.latency_s), c.busbw_gbs, human_time(c.estimate_s),
                   c.algorithm == r.algorithm && c.protocol == r.protocol ? "  <- chosen" : "");
      } else {
        fmt::print(out, "    {:<18} off: {}\n", pair, c.why_not);
      }
    }
  }
  out << "  solved in   " << human_time(wall_s) << "\n";
  if (measured) {
    out << "  profile     " << measured->name << " (" << measured->source_file << "): ";
    if (profile_s) {
      out << human_time(*profile_s) << ", busbw " << fmt::format("{:.2f} GB/s", profile_busbw_gbs) << " (its measured "
          << profile_scope << " " << table_op << ")\n";
    } else {
      out << "no measured " << profile_scope << " " << table_op << "\n";
    }
  }
  return 0;
}

int net_ecmp(const Args& args, std::ostream& out) {
  const ParsedArgs p = parse_net_args(args, {"--json"}, {"--paths", "--flows", "--qps", "--trials", "--seed", "--hash"});
  for (const char* name : {"--paths", "--flows", "--qps"}) required(p, name);
  const int paths = static_cast<int>(integer(p, "--paths", 0, 1, 256));
  const int flows = static_cast<int>(integer(p, "--flows", 0, 1, 1 << 20));
  const int qps = static_cast<int>(integer(p, "--qps", 1, 1, network::kMaxQpsPerConnection));
  const int trials = static_cast<int>(integer(p, "--trials", 1000, 1, 10'000'000));
  const auto seed = static_cast<uint64_t>(integer(p, "--seed", 1, 0, INT64_MAX));
  network::EcmpHash hash = network::EcmpHash::kCrc32;
  if (p.has("--hash")) {
    const auto h = network::parse_ecmp_hash(p.values.at("--hash"));
    if (!h) throw UsageError("--hash must be crc32 or murmur3, got '" + p.values.at("--hash") + "'");
    hash = *h;
  }
  if (static_cast<int64_t>(flows) * qps > (1 << 20)) throw UsageError("--flows x --qps must be at most 1048576");
  const network::EcmpStatistics s = network::ecmp_statistics(paths, flows, qps, trials, seed, hash);
  if (p.on("--json")) {
    Json measured, theory, j;
    measured["mean_paths_used_fraction"] = s.mean_paths_used_fraction;
    measured["collective_efficiency"] = s.collective_efficiency;
    measured["mean_max_load_flows"] = s.mean_max_load_flows;
    theory["mean_paths_used_fraction"] = s.theory_paths_used_fraction;
    theory["collective_efficiency"] = s.theory_collective_efficiency;
    j["paths"] = s.paths;
    j["flows"] = s.flows;
    j["qps"] = s.qps;
    j["trials"] = s.trials;
    j["hash"] = network::to_string(hash);
    j["mean_paths_used_fraction"] = s.mean_paths_used_fraction;
    j["collective_efficiency"] = s.collective_efficiency;
    j["measured"] = measured;
    j["theory"] = theory;
    out << report_json(j) << "\n";
    return 0;
  }
  fmt::print(out, "{} flows x {} QP(s) on {} equal-cost paths, {} trials ({})\n", flows, qps, paths, trials,
             network::to_string(hash));
  out << "                              measured   theory\n";
  fmt::print(out, "  paths used (fraction)       {:8.4f}  {:8.4f}\n", s.mean_paths_used_fraction,
             s.theory_paths_used_fraction);
  // No exact theory above kMaxExactBalls QPs (network/ecmp_stats.h): "n/a".
  fmt::print(out, "  collective efficiency       {:8.4f}  {}\n", s.collective_efficiency,
             std::isfinite(s.theory_collective_efficiency) ? fmt::format("{:8.4f}", s.theory_collective_efficiency)
                                                           : fmt::format("{:>8}", "n/a"));
  fmt::print(out, "  E[max load] (flows)         {:8.4f}\n", s.mean_max_load_flows);
  return 0;
}

int net_incast(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_net_args(args, {"--json", "--no-pfc"},
                                  {"--senders", "--cc", "--plot", "--duration-us", "--capacity-gbps"});
  required(p, "--senders");
  const std::string& cc_name = required(p, "--cc");
  network::IncastOptions o;
  o.senders = static_cast<int>(integer(p, "--senders", 0, 1, 4096));
  const auto cc = network::parse_cc_algorithm(cc_name);
  if (!cc) throw UsageError("--cc must be dcqcn, swift, hybrid or none, got '" + cc_name + "'");
  o.cc = *cc;
  o.duration_us = number(p, "--duration-us", o.duration_us);
  if (o.duration_us > 1e6) throw UsageError("--duration-us must be at most 1000000 (1 s of simulated time)");
  o.capacity_gbps = number(p, "--capacity-gbps", o.capacity_gbps);
  // The fluid model steps 1 us at a time through queues sized for real ports;
  // a port faster than any switch sells (1.6 Tb/s today) only makes it run for
  // minutes (1e12 did), so the range stops at 3,200 Gb/s.
  if (o.capacity_gbps > 3200) {
    throw UsageError("--capacity-gbps must be at most 3200 (a switch port's line rate), got '" +
                     p.values.at("--capacity-gbps") + "'");
  }
  o.pfc = !p.on("--no-pfc");
  const network::IncastReport r = network::incast_report(o);
  if (p.has("--plot")) {
    const std::string& path = p.values.at("--plot");
    if (!base::write_text_atomically(path, network::incast_svg(r))) {
      throw std::invalid_argument("--plot: cannot write '" + path + "'");
    }
    if (!p.on("--json")) err << "wrote " << path << "\n";
  }
  if (p.on("--json")) {
    Json j = network::incast_report_json(r);
    if (p.has("--plot")) j["plot"] = p.values.at("--plot");
    out << report_json(j) << "\n";
    return 0;
  }
  fmt::print(out, "incast: {} senders -> one {:.0f} Gb/s port, {}, PFC {}, {:.0f} us simulated\n", o.senders,
             o.capacity_gbps, network::cc_algorithm_name(o.cc), o.pfc ? "on" : "off", o.duration_us);
  fmt::print(out,
             "  queue       steady mean {:.1f} KB, steady max {:.1f} KB, max {:.1f} KB (PFC XOFF {:.1f} KB, limit {:.1f} KB)\n",
             r.steady_mean_queue_bytes / 1e3, r.steady_max_queue_bytes / 1e3, r.max_queue_bytes / 1e3,
             r.pfc_xoff_bytes / 1e3, r.queue_limit_bytes / 1e3);
  fmt::print(out, "  throughput  {:.1f}% of the port; Jain fairness {:.3f}; dropped {:.0f} bytes\n",
             100 * r.throughput_fraction, r.jain_fairness, r.dropped_bytes);
  fmt::print(out, "  PFC         senders paused {:.1f}% of their active time; port asserted {:.1f}%\n",
             100 * r.pause_fraction, 100 * r.port_pause_asserted_fraction);
  out << "  series (every " << std::max<size_t>(1, r.series.size() / 20) << " samples)\n"
      << "        t_us   queue_KB   rate_gbps   throughput_gbps   paused_senders\n";
  const size_t every = std::max<size_t>(1, r.series.size() / 20);
  for (size_t i = 0; i < r.series.size(); i += every) {
    const network::FluidSample& s = r.series[i];
    fmt::print(out, "  {:10.0f} {:10.1f} {:11.1f} {:17.1f} {:16.3f}\n", s.t_us, s.queue_bytes / 1e3, s.total_rate_gbps,
               s.throughput_gbps, s.paused_senders_fraction);
  }
  return 0;
}

}  // namespace

int cmd_net(const Args& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << "megascale net: missing subcommand\n\n" << net_usage();
    return 2;
  }
  const std::string sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    out << net_usage();
    return 0;
  }
  const Args rest(args.begin() + 1, args.end());
  if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
      std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
    out << net_usage();
    return 0;
  }
  const std::string where = "megascale net " + sub;
  try {
    if (sub == "collective") return net_collective(rest, out);
    if (sub == "ecmp") return net_ecmp(rest, out);
    if (sub == "incast") return net_incast(rest, out, err);
    err << "megascale net: unknown subcommand '" << sub << "' (collective, ecmp, incast)\n\n" << net_usage();
    return 2;
  } catch (const UsageError& e) {
    err << where << ": " << e.what() << "\n\n" << net_usage();
    return 2;
  } catch (const model::ScenarioError& e) {
    err << where << ": " << e.what() << "\n";
    return 2;
  } catch (const network::FabricError& e) {
    err << where << ": cannot build the fabric: parameter " << e.parameter() << ": " << e.reason() << "\n";
    return 2;
  } catch (const std::invalid_argument& e) {
    err << where << ": " << e.what() << "\n";
    return 2;
  }
}

}  // namespace megascale::cli
