// cli/net_command.cc: `megascale net collective|ecmp|incast` - the fabric alone,
// without a training job (issue 3, "Command"). Parse -> call network/, sim/ -> print (report/net_report.h).
//
//   collective: sim/collective_run.h on the MegaScale fabric sized for the job,
//               or on a scenario's fabric (--scenario);
//   ecmp:       network/ecmp_stats.h (Monte Carlo through the router + theory);
//   incast:     network/congestion.h's incast_report (+ incast_svg for --plot).
// Exit codes as every command (cli/commands.h).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "base/json.h"
#include "base/number_text.h"
#include "base/text_file.h"
#include "calibrate/nccl_tests.h"  // gpu_model
#include "cli/commands.h"
#include "model/profile.h"
#include "model/scenario.h"
#include "network/collectives.h"
#include "network/nccl_tuner.h"
#include "network/congestion.h"
#include "network/ecmp_stats.h"
#include "report/estimate_report.h"
#include "report/net_report.h"
#include "sim/collective_run.h"

namespace megascale::cli {
namespace {

const std::string& required(const ParsedArgs& p, const std::string& name) {
  if (!p.has(name)) throw UsageError(name + " is required");
  return p.text(name);
}

// Subcommands of `net` take no positional arguments.
void no_positional(const ParsedArgs& p) {
  if (!p.positional.empty()) throw UsageError("unexpected argument '" + p.positional.front() + "'");
}

// A job that does not fit the machine is a usage error (its usage follows).
sim::CollectiveAnswer answer(const sim::CollectiveQuery& q) {
  try {
    return sim::answer_collective(q);
  } catch (const sim::CollectiveChoiceError& e) {
    throw UsageError(e.what());
  }
}

int net_collective(const ParsedArgs& p, std::ostream& out, std::ostream&) {
  no_positional(p);
  const std::string& op_name = required(p, "--op");
  const std::optional<network::CollectiveOp> op = network::parse_collective_op(op_name);
  if (!op) throw UsageError("--op must be allgather, reducescatter, allreduce or sendrecv, got '" + op_name + "'");
  required(p, "--gpus");
  sim::CollectiveQuery q;  // sim/collective_run.h checks the job against the machine
  if (p.has("--scenario")) q.scenario = model::load_scenario(p.text("--scenario"));
  q.gpu = p.text("--gpu", "");
  q.job.op = *op;
  q.job.bytes = read_option("--bytes", [&] { return base::size_bytes(required(p, "--bytes")); });
  q.job.ranks = static_cast<int>(p.integer("--gpus", 0));
  q.job.groups = static_cast<int>(p.integer("--groups", 1));
  q.job.ranks_per_server = static_cast<int>(p.integer("--ranks-per-server", 0));
  q.job.scattered = p.text("--placement", "packed") == "scattered";
  q.job.seed = static_cast<uint64_t>(p.integer("--seed", 1));
  q.job.algorithm = read_option("--algo", [&] { return network::algorithm_choice(p.text("--algo", "auto")); });
  q.job.protocol = read_option("--proto", [&] { return network::protocol_choice(p.text("--proto", "auto")); });
  if (p.has("--qps")) q.qps_per_connection = static_cast<int>(p.integer("--qps", 1));
  if (p.has("--routing")) q.routing = network::parse_routing_mode(p.text("--routing"));
  if (p.has("--cc")) q.congestion_control = read_option("--cc", [&] { return network::cc_choice(p.text("--cc")); });
  // A profile with measured collectives (calibrate import of nccl-tests output,
  // calibrate micro): its answer is printed beside the fabric model's, so both
  // time the same GPU. Without --gpu or --scenario the fabric model runs the
  // profile's GPU; one that names another GPU is refused (an H100's profile
  // beside the default A100 model printed 4.0 ms measured against 8.2 ms).
  std::optional<model::GpuProfile> measured;
  if (p.has("--profile")) {
    measured = model::profile_named_or_file(p.text("--profile"));
    if (q.gpu.empty() && !q.scenario) q.profile = measured;
    const std::string fabric_gpu = !q.gpu.empty() ? q.gpu : q.scenario ? q.scenario->hardware.gpu : measured->name;
    const std::string measured_model = calibrate::gpu_model(measured->name);
    const std::string fabric_model = calibrate::gpu_model(fabric_gpu);
    if (!measured_model.empty() && !fabric_model.empty() && measured_model != fabric_model) {
      throw UsageError(fmt::format("--profile {} ({}) is the {}'s, but the fabric model runs {}{}; give --gpu "
                                   "the {}'s profile, or neither --gpu nor --scenario, so that both time the same GPU",
                                   p.text("--profile"), measured->name, measured_model, fabric_gpu,
                                   !q.gpu.empty() ? " (--gpu)" : " (the scenario's)",
                                   measured_model));
    }
  } else if (q.scenario && q.scenario->hardware.loaded_profile) {
    measured = *q.scenario->hardware.loaded_profile;
  }
  report::CollectiveRun run = report::collective_run(answer(q), p.text("--placement", "packed"));
  if (measured) run.measured = *measured;
  out << (p.on("--json") ? report::report_json(report::collective_json(run)) + "\n" : report::collective_text(run));
  return 0;
}

int net_ecmp(const ParsedArgs& p, std::ostream& out, std::ostream&) {
  no_positional(p);
  for (const char* name : {"--paths", "--flows", "--qps"}) required(p, name);
  const int paths = static_cast<int>(p.integer("--paths", 0));
  const int flows = static_cast<int>(p.integer("--flows", 0));
  const int qps = static_cast<int>(p.integer("--qps", 1));
  const int trials = static_cast<int>(p.integer("--trials", 1000));
  const auto seed = static_cast<uint64_t>(p.integer("--seed", 1));
  network::EcmpHash hash = network::EcmpHash::kCrc32;
  if (p.has("--hash")) {
    const auto h = network::parse_ecmp_hash(p.text("--hash"));
    if (!h) throw UsageError("--hash must be crc32 or murmur3, got '" + p.text("--hash") + "'");
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

int net_incast(const ParsedArgs& p, std::ostream& out, std::ostream& err) {
  no_positional(p);
  required(p, "--senders");
  const std::string& cc_name = required(p, "--cc");
  network::IncastOptions o;
  o.senders = static_cast<int>(p.integer("--senders", 0));
  o.cc = read_option("--cc", [&] { return network::cc_choice(cc_name); });
  o.duration_us = p.number("--duration-us", o.duration_us);
  o.capacity_gbps = p.number("--capacity-gbps", o.capacity_gbps);
  o.pfc = !p.on("--no-pfc");
  const network::IncastReport r = network::incast_report(o);
  if (p.has("--plot")) {
    const std::string& path = p.text("--plot");
    base::write_text_or_throw(path, network::incast_svg(r));
    if (!p.on("--json")) err << "wrote " << path << "\n";
  }
  if (p.on("--json")) {
    base::Json j = network::incast_report_json(r);
    if (p.has("--plot")) j["plot"] = p.text("--plot");
    out << report::report_json(j) << "\n";
    return 0;
  }
  out << report::incast_text(o, r);
  return 0;
}

}  // namespace

std::vector<CommandEntry> net_commands() {
  const Option seed = {"--seed", Kind::kInt, "S", "of the placement or the hashes (default 1)", 0, kNoLimit};
  const Option qps = {"--qps", Kind::kInt, "Q", "QPs per connection", 1, network::kMaxQpsPerConnection};
  const Option json = json_flag();
  CommandEntry collective = {
      {"net collective", "--op OP --gpus N --bytes B [options]",
       "time, algbw and busbw (nccl-tests conventions) of one collective on the MegaScale fabric\n"
       "sized for it (or the scenario's); auto: the algorithm and protocol NCCL's tuner picks",
       {{"--op", Kind::kText, "allgather|reducescatter|allreduce|sendrecv", "the collective"},
        {"--gpus", Kind::kInt, "N", "ranks of one communicator", 2, 1 << 22},
        {"--bytes", Kind::kText, "B", "message size: K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024,\nas nccl-tests) or KB/MB/GB/TB (powers of 1000)"},
        {"--algo", Kind::kText, "auto|ring|tree|nvls|nvls-tree|hierarchical", "restrict the tuner like NCCL_ALGO"},
        {"--proto", Kind::kText, "auto|LL|LL128|Simple", "restrict the tuner like NCCL_PROTO"},
        {"--gpu", Kind::kText, "NAME", "GPU profile (default A100-SXM4-80GB)"},
        {"--scenario", Kind::kText, "FILE", "the scenario's fabric, ECMP and congestion control"},
        {"--profile", Kind::kText, "NAME|FILE",
         "a profile with measured collectives, printed beside (and the GPU\nmodelled, without --gpu and --scenario)"},
        {"--groups", Kind::kInt, "G", "communicators running at once (default 1)", 1, 1 << 20},
        {"--ranks-per-server", Kind::kInt, "M", "ranks of each on a server (default gcd(N, GPUs per server))", 1, kMaxInt},
        {"--placement", Kind::kChoice, "packed|scattered", "scattered shuffles the servers (rings then cross the\naggregation and core tiers)"},
        seed, qps, {"--routing", Kind::kChoice, "ecmp|adaptive", "ECMP hashing (RoCE) or InfiniBand adaptive routing\n(default: the scenario's, else ecmp)"},
        {"--cc", Kind::kText, "hybrid|dcqcn|swift|none", "congestion control"}, json}},
      net_collective};
  CommandEntry ecmp = {
      {"net ecmp", "--paths N --flows K --qps Q [options]",
       "K flows of Q QPs hashed onto N equal-cost paths: paths used and collective efficiency\n"
       "(1/E[max load]), through the router and in theory",
       {{"--paths", Kind::kInt, "N", "equal-cost paths", 1, 256},
        {"--flows", Kind::kInt, "K", "flows", 1, 1 << 20}, qps,
        {"--trials", Kind::kInt, "T", "Monte Carlo trials (default 1000)", 1, 10'000'000}, seed,
        {"--hash", Kind::kText, "crc32|murmur3", "the switches' hash (default crc32)"}, json}},
      net_ecmp};
  // The fluid model steps 1 us at a time through queues sized for real ports; a
  // port faster than any switch sells (1.6 Tb/s today) only makes it run for
  // minutes (1e12 did), so the range stops at 3,200 Gb/s.
  CommandEntry incast = {
      {"net incast", "--senders N --cc dcqcn|swift|hybrid|none [options]",
       "N senders into one switch port: queue, throughput and PFC pauses over time.",
       {{"--senders", Kind::kInt, "N", "senders", 1, 4096},
        {"--cc", Kind::kText, "dcqcn|swift|hybrid|none", "congestion control"},
        {"--plot", Kind::kOutFile, "FILE.svg", "queue, throughput and pauses as an SVG"},
        // At least two base RTTs (10 us, IncastOptions) and two 10-us samples:
        // shorter, the senders end before any feedback and the steady second
        // half holds no sample (1 us printed fairness 0.000 from 0 / 0).
        {"--duration-us", Kind::kNumber, "D", "simulated time", 20, 1e6,
         "microseconds from 20 (two base RTTs and two 10-us samples) to 1000000 (1 s of simulated time)"},
        {"--capacity-gbps", Kind::kNumber, "C", "the port's line rate", kAboveZero, 3200,
         "a positive line rate, at most 3200 (a switch port's)"},
        {"--no-pfc", Kind::kFlag, "", "without PFC"}, json}},
      net_incast};
  return {collective, ecmp, incast};
}

}  // namespace megascale::cli
