// cli/net_command.cc: `megascale net collective|ecmp|incast` - the fabric alone,
// without a training job (issue 3, "Command"). Parse -> call network/, sim/ -> print (report/net_report.h).
//
//   collective: sim/collective_run.h on the MegaScale fabric sized for the job,
//               or on a scenario's fabric (--scenario);
//   ecmp:       network/ecmp_stats.h (Monte Carlo through the router + theory);
//   incast:     network/congestion.h's incast_report (+ incast_svg for --plot).
// Exit codes as every command (cli/commands.h): 0 ok, 2 bad input - usage errors
// with the net usage text, scenario errors (file:line: key: reason), fabric
// errors naming the FabricSpec parameter, unknown GPU profiles.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>

#include "base/json.h"
#include "base/number_text.h"
#include "base/text_file.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "network/collectives.h"
#include "network/congestion.h"
#include "network/ecmp_stats.h"
#include "report/estimate_report.h"
#include "report/net_report.h"
#include "sim/collective_run.h"

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
    bytes = base::size_bytes(required(p, "--bytes"));
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
  sim::CollectiveMachine machine = sim::collective_machine(scenario, p.has("--gpu") ? p.values.at("--gpu") : "");
  const int gpus_per_server = machine.gpus_per_server;
  sim::CollectiveJob job;
  job.op = *op;
  job.bytes = bytes;
  job.ranks = ranks;
  job.groups = groups;
  job.scattered = placement == "scattered";
  job.seed = seed;
  job.algorithm = algo;
  job.protocol = proto;
  job.ranks_per_server =
      static_cast<int>(integer(p, "--ranks-per-server", std::gcd(ranks, gpus_per_server), 1, gpus_per_server));
  if (gpus_per_server % job.ranks_per_server != 0 || ranks % job.ranks_per_server != 0) {
    throw UsageError("--ranks-per-server " + std::to_string(job.ranks_per_server) + " must divide both --gpus (" +
                     std::to_string(ranks) + ") and the GPUs per server (" + std::to_string(gpus_per_server) + ")");
  }
  const int64_t needed = network::strided_groups_gpus(gpus_per_server, job.groups, ranks, job.ranks_per_server);
  if (needed > (1 << 24)) throw UsageError("the job needs " + std::to_string(needed) + " GPUs; at most 16777216");
  if (scenario && needed > scenario->cluster.gpus) {
    throw UsageError(std::to_string(job.groups) + " x " + std::to_string(ranks) + " ranks at " +
                     std::to_string(job.ranks_per_server) + " per server need " + std::to_string(needed) +
                     " GPUs; the scenario's cluster has " + std::to_string(scenario->cluster.gpus));
  }
  machine.ecmp.qps_per_connection =
      static_cast<int>(integer(p, "--qps", machine.ecmp.qps_per_connection, 1, network::kMaxQpsPerConnection));
  if (p.has("--cc")) {
    const auto cc = network::parse_cc_algorithm(p.values.at("--cc"));
    if (!cc) throw UsageError("--cc must be hybrid, dcqcn, swift or none, got '" + p.values.at("--cc") + "'");
    machine.options.congestion_control = *cc;
  }

  // A profile with measured collectives (calibrate import of nccl-tests output,
  // calibrate micro): its answer is printed beside the fabric model's.
  report::CollectiveRun run;
  if (p.has("--profile")) {
    run.measured = model::load_profile(p.values.at("--profile"));
  } else if (scenario && scenario->hardware.loaded_profile) {
    run.measured = *scenario->hardware.loaded_profile;
  }

  const auto t0 = std::chrono::steady_clock::now();
  sim::CollectiveRun ran;
  try {
    ran = sim::run_collective(machine, job);
  } catch (const sim::CollectiveChoiceError& e) {
    throw UsageError(e.what());
  }
  run.gpu = machine.gpu.name;
  run.ranks_per_server = job.ranks_per_server;
  run.placement = placement;
  run.bytes = bytes;
  run.spec = ran.spec;
  run.fabric = ran.fabric;
  run.ecmp = machine.ecmp;
  run.options = machine.options;
  run.tuned = ran.tuned;
  run.auto_choice = !algo || !proto;
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (p.on("--json")) {
    out << report::report_json(report::collective_json(run)) << "\n";
  } else {
    out << report::collective_text(run);
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
    out << report::report_json(report::ecmp_json(s, hash)) << "\n";
  } else {
    out << report::ecmp_text(s, hash);
  }
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
    base::Json j = network::incast_report_json(r);
    if (p.has("--plot")) j["plot"] = p.values.at("--plot");
    out << report::report_json(j) << "\n";
    return 0;
  }
  out << report::incast_text(o, r);
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
