// model/scenario.cc: reads scenario TOML with TOML++ and validates it.
//
// Each table of the file is read by one function (read_model, read_parallel,
// ...) through a Section, which knows the table's dotted name and file so that
// every error carries file, line, column and key. The keys each table accepts
// are listed next to the function that reads them; scenarios/README.md
// documents them.
#include "model/scenario.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/number_text.h"
#include "model/fabric_tiers.h"
#include "model/fused_overlap.h"
#include "model/hardware.h"
#include "model/megatron_layout.h"
#include "model/pipeline_layout.h"
#include "model/profile.h"
#include "model/scenario_overrides.h"
#include "model/system_preset.h"
#include "model/toml_section.h"

namespace megascale::model {

namespace {

// ---------------------------------------------------------------------------
// The tables

std::string divisibility(std::string_view what, int64_t value, std::string_view by,
                         int64_t divisor) {
  return std::string(what) + " (" + std::to_string(value) + ") not divisible by " +
         std::string(by) + " (" + std::to_string(divisor) + ")";
}

// Whether a name holds an ASCII control character (they garble the reports
// and terminals that print it).
bool has_control_character(std::string_view text) {
  return std::any_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

constexpr std::string_view kModelKeys[] = {"name",     "layers",  "hidden",          "heads",
                                           "kv_heads", "seq_len", "vocab",           "ffn_hidden",
                                           "mlp",      "block",   "attention_window", "tie_embeddings",
                                           "hidden_dropout", "attention_dropout", "norm", "position"};

ModelConfig read_model(const Section& s) {
  s.reject_unknown_keys(kModelKeys);
  ModelConfig m;
  m.name = s.string("name").value_or(m.name);
  // Printed in every report, CSV row and chart title: a blank or garbled name
  // would leave them unreadable ("model  (24 layers ...)").
  if (base::trim(m.name).empty() || m.name.size() > 200 || has_control_character(m.name)) {
    s.fail("name", fmt::format("must be 1-200 characters, not blank, without control characters, got {:?}", m.name));
  }
  m.layers = s.required_integer("layers", 1);
  // Bounded so that the default ffn_hidden, 4*hidden, fits an int.
  m.hidden = s.required_integer("hidden", 1, INT_MAX / 4);
  m.heads = s.required_integer("heads", 1);
  m.kv_heads = s.integer("kv_heads", 1).value_or(m.heads);
  m.seq_len = s.required_integer("seq_len", 1);
  m.vocab = s.required_integer("vocab", 1);
  m.ffn_hidden = s.integer("ffn_hidden", 1).value_or(4 * m.hidden);
  m.mlp = s.enum_choice("mlp", {MlpKind::kGelu, MlpKind::kSwiGlu}).value_or(m.mlp);
  m.block =
      s.enum_choice("block", {BlockKind::kSequential, BlockKind::kParallel}).value_or(m.block);
  m.attention_window = s.integer("attention_window", 0).value_or(m.attention_window);
  m.tie_embeddings = s.boolean("tie_embeddings").value_or(m.tie_embeddings);
  m.norm = s.enum_choice("norm", {NormKind::kLayerNorm, NormKind::kRmsNorm}).value_or(m.norm);
  m.position = s.enum_choice("position", {PositionKind::kLearned, PositionKind::kRope}).value_or(m.position);
  for (const char* key : {"hidden_dropout", "attention_dropout"}) {
    const std::optional<double> p = s.fraction(key);
    if (p && *p >= 1.0) s.fail(key, fmt::format("a dropout probability must be below 1, got {}", *p));
    (std::string_view(key) == "hidden_dropout" ? m.hidden_dropout : m.attention_dropout) = p;
  }
  if (m.hidden % m.heads != 0) s.fail("heads", divisibility("hidden", m.hidden, "heads", m.heads));
  if (m.heads % m.kv_heads != 0) {
    s.fail("kv_heads", divisibility("heads", m.heads, "kv_heads", m.kv_heads));
  }
  return m;
}

constexpr std::string_view kParallelKeys[] = {
    "tp",         "cp",        "cp_comm",   "pp",         "vpp", "first_stage_layers", "last_stage_layers", "pipeline_layout",
    "dp",         "micro_batch", "global_batch", "sequence_parallel",
    "zero_stage", "recompute", "rank_order"};

// dp defaults to the GPUs left once tp, cp and pp are placed, when that is exact.
int read_dp(const Section& s, int tp, int cp, int pp, int cluster_gpus) {
  if (std::optional<int> dp = s.integer("dp", 1)) return *dp;
  const int64_t tp_pp = static_cast<int64_t>(tp) * pp * cp;
  if (cluster_gpus % tp_pp != 0) {
    s.fail_missing("dp", "cluster.gpus (" + std::to_string(cluster_gpus) + ") is not a multiple of tp*" +
                             (cp > 1 ? "cp*" : "") + "pp (" + std::to_string(tp_pp) + ")");
  }
  return static_cast<int>(cluster_gpus / tp_pp);
}

// parallel.pipeline_layout: Megatron-Core's layout string (model/megatron_layout.h).
// Its virtual stages fix vpp (a vpp given beside it must agree); it excludes
// first / last_stage_layers. The pipeline-rank checks are check_layout's.
void read_pipeline_layout(const Section& s, int layers, ParallelConfig* p) {
  const std::optional<std::string> text = s.string("pipeline_layout");
  if (!text) return;
  if (p->first_stage_layers > 0 || p->last_stage_layers > 0) {
    s.fail("pipeline_layout", "give either pipeline_layout or first_stage_layers / last_stage_layers, not both");
  }
  std::vector<int> stages;
  try {
    stages = parse_megatron_layout(*text, layers);
  } catch (const std::invalid_argument& e) {
    s.fail("pipeline_layout", e.what());
  }
  const int64_t n = static_cast<int64_t>(stages.size());
  if (n % p->pp != 0) {
    s.fail("pipeline_layout", fmt::format("{} virtual stages are not a multiple of pp ({})", n, p->pp));
  }
  const int vpp = static_cast<int>(n / p->pp);
  if (s.integer("vpp", 1).has_value() && p->vpp != vpp) {
    s.fail("vpp", fmt::format("{} disagrees with pipeline_layout ({} virtual stages = pp {} x vpp {}); leave vpp out "
                              "or make them agree",
                              p->vpp, n, p->pp, vpp));
  }
  p->vpp = vpp;
  p->pipeline_layout = *text;
  p->pipeline_chunk_layers = std::make_shared<const std::vector<int>>(std::move(stages));
}

ParallelConfig read_parallel(const Section& s, int cluster_gpus, int layers) {
  s.reject_unknown_keys(kParallelKeys);
  ParallelConfig p;
  p.tp = s.required_integer("tp", 1);
  p.cp = s.integer("cp", 1, 4096).value_or(1);
  // Read with cp = 1 too, where it moves nothing: `--set parallel.cp=1` on a
  // context-parallel scenario is a what-if, not an error.
  p.cp_comm = s.enum_choice("cp_comm", {CpComm::kP2p, CpComm::kAllGather}).value_or(CpComm::kP2p);
  p.pp = s.required_integer("pp", 1);
  p.vpp = s.integer("vpp", 1).value_or(1);
  p.first_stage_layers = s.integer("first_stage_layers", 1).value_or(0);
  p.last_stage_layers = s.integer("last_stage_layers", 1).value_or(0);
  read_pipeline_layout(s, layers, &p);
  p.dp = read_dp(s, p.tp, p.cp, p.pp, cluster_gpus);
  p.micro_batch = s.integer("micro_batch", 1).value_or(1);
  p.global_batch = s.required_integer("global_batch", 1);
  p.sequence_parallel = s.boolean("sequence_parallel").value_or(false);
  p.zero_stage = s.integer("zero_stage", 0, 3).value_or(1);
  p.recompute =
      s.enum_choice("recompute",
                      {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kSelectiveOp})
          .value_or(Recompute::kNone);
  p.rank_order =
      s.enum_choice("rank_order", {RankOrder::kTpCpDpPp, RankOrder::kTpCpPpDp}).value_or(RankOrder::kTpCpDpPp);
  return p;
}

constexpr std::string_view kHardwareKeys[] = {"gpu", "profile", "gpus_per_node", "nics_per_node",
                                              "nic_gbps", "gpu_speed_sigma"};

// hardware.profile: a profile file, relative to the scenario's folder (or, when
// a --set override gave it, to the current directory). Its errors name the
// profile file; a file that cannot be opened is named at the scenario's key.
void read_profile_key(const Section& s, HardwareConfig* hw, bool gpu_given) {
  const std::optional<std::string> path = s.string("profile");
  if (!path) return;
  if (path->empty()) s.fail("profile", "empty path");
  std::filesystem::path resolved(*path);
  if (resolved.is_relative() && !s.from_override("profile")) {
    resolved = std::filesystem::path(s.file()).parent_path() / resolved;
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(resolved, ec)) {
    s.fail("profile", "cannot open profile file '" + resolved.string() + "'" +
                          (std::filesystem::exists(resolved, ec) ? " (not a regular file)" : " (no such file)"));
  }
  auto profile = std::make_shared<GpuProfile>(load_profile(resolved.string()));
  if (gpu_given && (hw->gpu == "cpu") != profile->is_cpu()) {
    s.fail("profile", "'" + resolved.string() + "' is a " + profile->kind + " profile but hardware.gpu is \"" +
                          hw->gpu + "\"; give a profile of the same kind, or drop hardware.gpu");
  }
  if (!gpu_given) hw->gpu = profile->is_cpu() ? "cpu" : profile->name;
  hw->profile = resolved.string();
  hw->loaded_profile = std::move(profile);
}

// A line rate of at least model/hardware.h kMinLineRateGbps.
void check_line_rate(const Section& s, std::string_view key, double gbps) {
  if (gbps < kMinLineRateGbps) {
    s.fail(key, fmt::format("must be at least {} Gb/s (1 Gigabit Ethernet, the slowest link a cluster runs), got {}",
                            kMinLineRateGbps, gbps));
  }
}

// The longest one-way hop on Earth: half its circumference of fibre, ~20,000 km
// at ~5 us/km (light at ~2/3 c in glass) = 100 ms. A longer hop is a slip of
// units (ms or ns for us).
constexpr double kMaxHopLatencyUs = 100000.0;

void check_hop_latency(const Section& s, std::string_view key, double us) {
  if (us > kMaxHopLatencyUs) {
    s.fail(key, fmt::format("must be at most {} us (100 ms: half the Earth's circumference of fibre at ~5 us/km), "
                            "got {}",
                            kMaxHopLatencyUs, us));
  }
}

HardwareConfig read_hardware(const Section& s) {
  s.reject_unknown_keys(kHardwareKeys);
  HardwareConfig hw;
  // A shipped profile (model/profile.h), or "cpu" for the real CPU trainer.
  std::vector<std::string> names = builtin_profile_names();
  if (std::find(names.begin(), names.end(), "cpu") == names.end()) names.push_back("cpu");
  const std::vector<std::string_view> allowed(names.begin(), names.end());
  const std::optional<std::string> gpu = s.choice("gpu", allowed);
  hw.gpu = gpu.value_or(hw.gpu);
  read_profile_key(s, &hw, gpu.has_value());
  hw.gpus_per_node = s.integer("gpus_per_node", 1).value_or(hw.gpus_per_node);
  // Unset: one NIC per GPU up to the 8-GPU server's 8 (a 1- or 4-GPU node
  // had 8 NICs, which the fabric refused).
  hw.nics_per_node = s.integer("nics_per_node", 1).value_or(std::min(hw.gpus_per_node, hw.nics_per_node));
  hw.nic_gbps = s.positive_number("nic_gbps").value_or(hw.nic_gbps);
  check_line_rate(s, "nic_gbps", hw.nic_gbps);
  // Every NIC serves the same number of GPUs (network/topology.h builds one
  // NIC per gpus_per_node / nics_per_node GPUs; the event level refused the
  // rest with "cannot build the fabric", the closed form ran them).
  if (hw.gpus_per_node % hw.nics_per_node != 0) {
    s.fail(s.node("nics_per_node") || !s.node("gpus_per_node") ? "nics_per_node" : "gpus_per_node",
           fmt::format("nics_per_node ({}) must divide gpus_per_node ({}): each NIC serves the same number of GPUs "
                       "(a node with more NICs than GPUs, e.g. 16 x 100G for 8 GPUs, is written as 8 NICs of 200G)",
                       hw.nics_per_node, hw.gpus_per_node));
  }
  // The GPU-fleet spread (config.h) is not a CPU's: on "cpu" none unless given.
  hw.gpu_speed_sigma = s.non_negative_number("gpu_speed_sigma").value_or(hw.gpu == "cpu" ? 0.0 : hw.gpu_speed_sigma);
  if (hw.gpu_speed_sigma > 0.5) {
    s.fail("gpu_speed_sigma", fmt::format("must be at most 0.5 (a 50% spread), got {}", hw.gpu_speed_sigma));
  }
  return hw;
}

constexpr std::string_view kClusterKeys[] = {"gpus", "topology"};
constexpr std::string_view kTopologies[] = {"megascale-clos", "rail-2tier", "fat-tree"};

ClusterConfig read_cluster(const Section& s) {
  s.reject_unknown_keys(kClusterKeys);
  ClusterConfig c;
  c.gpus = s.required_integer("gpus", 1);
  c.topology = s.choice("topology", kTopologies).value_or(c.topology);
  return c;
}

// A broken rule: the dotted key it is about and why.
struct Violation {
  std::string key;  // dotted
  std::string reason;
};

constexpr std::string_view kNetworkKeys[] = {
    "preset",          "switch_radix",      "switch_port_gbps", "split_ports",
    "tiers",           "oversubscription",  "rail_optimized",   "switch_latency_us",
    "link_latency_us", "qps_per_connection", "ecmp_hash",       "polarization",
    "congestion_control", "nvlink_gbps",     "routing"};
constexpr std::string_view kEcmpHashes[] = {"crc32", "murmur3"};
constexpr std::string_view kRoutings[] = {"ecmp", "adaptive"};
constexpr std::string_view kCongestionControls[] = {"dcqcn", "swift", "hybrid"};
// NCCL_IB_MAX_QPS (NCCL src/transport/net_ib.cc).
constexpr int kMaxQpsPerConnection = 128;

// `cluster_topology` is cluster.topology, `topology_given` whether the file set
// it: network.preset defaults to it and may not contradict it.
NetworkConfig read_network(const Section& s, const std::string& cluster_topology,
                           bool topology_given) {
  s.reject_unknown_keys(kNetworkKeys);
  const std::optional<std::string> preset = s.choice("preset", kTopologies);
  if (preset && topology_given && *preset != cluster_topology) {
    s.fail("preset", "\"" + *preset + "\" differs from cluster.topology (\"" + cluster_topology +
                         "\"); give one of them, or the same value in both");
  }
  NetworkConfig n = NetworkConfig::for_preset(preset.value_or(cluster_topology));
  n.switch_radix = s.integer("switch_radix", 2).value_or(n.switch_radix);
  n.switch_port_gbps = s.positive_number("switch_port_gbps").value_or(n.switch_port_gbps);
  n.split_ports = s.boolean("split_ports").value_or(n.split_ports);
  n.tiers = s.integer("tiers", 2, 3).value_or(n.tiers);
  n.rail_optimized = s.boolean("rail_optimized").value_or(n.rail_optimized);
  check_line_rate(s, "switch_port_gbps", n.switch_port_gbps);
  n.switch_latency_us = s.non_negative_number("switch_latency_us").value_or(n.switch_latency_us);
  n.link_latency_us = s.non_negative_number("link_latency_us").value_or(n.link_latency_us);
  check_hop_latency(s, "switch_latency_us", n.switch_latency_us);
  check_hop_latency(s, "link_latency_us", n.link_latency_us);
  n.qps_per_connection =
      s.integer("qps_per_connection", 1, kMaxQpsPerConnection).value_or(n.qps_per_connection);
  n.ecmp_hash = s.choice("ecmp_hash", kEcmpHashes).value_or(n.ecmp_hash);
  n.routing = s.choice("routing", kRoutings).value_or(n.routing);
  n.polarization = s.boolean("polarization").value_or(n.polarization);
  n.congestion_control =
      s.choice("congestion_control", kCongestionControls).value_or(n.congestion_control);
  n.nvlink_gbps = s.non_negative_number("nvlink_gbps").value_or(n.nvlink_gbps);
  if (const auto ratios = s.positive_numbers("oversubscription")) {
    const size_t tiers_with_uplinks = static_cast<size_t>(n.tiers - 1);
    if (ratios->size() != 1 && ratios->size() != tiers_with_uplinks) {
      s.fail("oversubscription",
             std::to_string(ratios->size()) + " ratios given for " + std::to_string(n.tiers) +
                 " tiers; give one for all tiers or one per tier below the top (" +
                 std::to_string(tiers_with_uplinks) + ")");
    }
    n.oversubscription.clear();
    for (size_t i = 0; i < ratios->size(); ++i) {
      const std::string_view tier = i == 0 ? "ToR" : (n.tiers == 2 ? "spine" : "aggregation");
      int down = 0;
      if (std::optional<std::string> reason =
              downlink_ports(n.switch_radix, (*ratios)[i].value, tier, &down)) {
        s.fail_at(*(*ratios)[i].node, "oversubscription", *reason);
      }
      n.oversubscription.push_back((*ratios)[i].value);
    }
  }
  return n;
}

// Whether the GPUs fit the fabric the [network] and [hardware] values describe
// (model/fabric_tiers.h: network/topology.h's sizing rules and messages).
// Returns the dotted key at fault and the reason.
std::optional<Violation> check_fabric(const NetworkConfig& n, const HardwareConfig& hw,
                                      int cluster_gpus) {
  FabricTiersOrFault f = fabric_tiers(n, hw, cluster_gpus);
  if (!f.fault) return std::nullopt;
  return Violation{std::move(f.fault->key), std::move(f.fault->reason)};
}

// Whether the job's tensor-parallel groups sit whole inside its servers.
// Megatron places ranks TP-fastest on consecutive GPUs
// (megatron/core/parallel_state.py, RankGenerator order "tp-cp-ep-dp-pp"), so a
// TP group of tp < gpus_per_node GPUs stays inside one server only when tp
// divides gpus_per_node; the estimator and the event level time every such group
// on NVLink (model/estimator.cc parallel_links), which a group straddling two
// servers does not have. A tp above gpus_per_node is timed on the fabric.
// The same holds for a context-parallel group of tp x cp consecutive GPUs,
// whose ring-attention exchanges are timed on NVLink when tp x cp fits one
// server (model/estimator.cc cp_exposed_s).
std::optional<Violation> check_placement(const HardwareConfig& hw, const ParallelConfig& p) {
  const int node = hw.gpus_per_node;
  if (p.tp < node && node % p.tp != 0) {
    return Violation{"parallel.tp",
                     fmt::format("tp = {} splits tensor-parallel groups across {}-GPU servers "
                                 "(hardware.gpus_per_node), where the model times them on NVLink: tp must divide "
                                 "gpus_per_node, or exceed it",
                                 p.tp, node)};
  }
  const int64_t tp_cp = static_cast<int64_t>(p.tp) * p.cp;
  if (p.cp > 1 && tp_cp < node && node % tp_cp != 0) {
    return Violation{"parallel.cp",
                     fmt::format("tp x cp = {} splits context-parallel groups across {}-GPU servers "
                                 "(hardware.gpus_per_node), where the model times them on NVLink: tp x cp must "
                                 "divide gpus_per_node, or exceed it",
                                 tp_cp, node)};
  }
  return std::nullopt;
}

constexpr std::string_view kOptimizationKeys[] = {
    "preset",        "tp_overlap", "pp_overlap", "dp_overlap",      "efficient_operators",
    "data_pipeline", "optimizer",  "fused_attention", "dp_bucket_params", "fp8",
    "cross_entropy", "tp_overlap_comm", "tp_overlap_sm_margin", "userbuffers", "attention_kernel",
    "eager_elementwise", "grad_reduce_dtype", "fp8_recipe", "fp8_param_gather", "dp_overlap_param_gather",
    "optimizer_state_dtype", "grad_accumulation", "exp_avg_dtype", "exp_avg_sq_dtype", "main_params_dtype"};
constexpr std::string_view kPresets[] = {"megatron", "megatron-core", "megascale"};

// Megatron-Core's precision-aware optimizer keys of [optimizations] and their
// values as a file writes them; "fp32" everywhere is the plain optimizer.
std::array<std::pair<std::string_view, std::string_view>, 3> precision_aware_optimizer(const Optimizations& o) {
  return {{{"exp_avg_dtype", to_string(o.exp_avg_dtype)},
           {"exp_avg_sq_dtype", to_string(o.exp_avg_sq_dtype)},
           {"main_params_dtype", to_string(o.main_params_dtype)}}};
}

// [optimizations.userbuffers.<TE GEMM name>]: the keys TE's initialize_ub takes
// for that GEMM's method (model/fused_overlap.h kUbGemms): its default, or a
// ring exchange for a forward reduce-scatter (ub_method_allowed). A ring
// exchange always runs tp pieces: num_splits is refused on an all-gather's and
// left unused on a reduce-scatter switched from its pipeline.
constexpr std::string_view kUbRingKeys[] = {"method", "aggregate", "num_sm", "set_sm_margin"};
constexpr std::string_view kUbPipelineRingKeys[] = {"method", "aggregate", "num_sm", "set_sm_margin", "num_splits"};
constexpr std::string_view kUbPipelineKeys[] = {"method", "num_sm", "num_splits", "set_sm_margin"};
constexpr std::string_view kUbBulkKeys[] = {"method", "num_sm", "set_sm_margin"};

std::map<std::string, UbOverlapConfig> read_userbuffers(const Section& s) {
  std::array<std::string_view, kUbGemms.size()> names;
  for (size_t i = 0; i < kUbGemms.size(); ++i) names[i] = kUbGemms[i].name;
  s.reject_unknown_keys(names);
  std::map<std::string, UbOverlapConfig> out;
  for (const UbGemm& g : kUbGemms) {
    const std::optional<Section> t = s.subsection(g.name);
    if (!t) continue;
    UbMethod method = g.method;
    if (const std::optional<std::string> m = t->string("method")) {
      std::optional<UbMethod> named;
      for (UbMethod candidate : {UbMethod::kRingExchange, UbMethod::kPipeline, UbMethod::kBulk}) {
        if (*m == to_string(candidate)) named = candidate;
      }
      if (!named || !ub_method_allowed(g.name, *named)) {
        t->fail("method", fmt::format("Transformer Engine runs {} as \"{}\"{}; got \"{}\"", g.name, to_string(g.method),
                                      g.method == UbMethod::kPipeline ? " or \"ring_exchange\"" : " only", *m));
      }
      method = *named;
    }
    // A forward reduce-scatter switched to a ring exchange keeps its pipeline
    // tuning's num_splits unused, as TE does (split_overlap_rs runs tp pieces),
    // so `--set ...proj_fprop.method=ring_exchange` works on a tuned file; an
    // all-gather's ring exchange has no such key.
    if (method == UbMethod::kRingExchange && g.method == UbMethod::kRingExchange && t->node("num_splits") != nullptr) {
      t->fail("num_splits", "a ring exchange runs tp pieces (tp / 2 with aggregate), one per peer; num_splits is "
                            "a pipeline key");
    }
    switch (method) {
      case UbMethod::kRingExchange:
        t->reject_unknown_keys(g.method == UbMethod::kPipeline ? std::span<const std::string_view>(kUbPipelineRingKeys)
                                                               : std::span<const std::string_view>(kUbRingKeys));
        break;
      case UbMethod::kPipeline: t->reject_unknown_keys(kUbPipelineKeys); break;
      case UbMethod::kBulk: t->reject_unknown_keys(kUbBulkKeys); break;
    }
    UbOverlapConfig c;
    if (method != g.method) c.method = method;
    c.num_sm = t->integer("num_sm", 1, 1024);
    c.num_splits = t->integer("num_splits", 2, 64);
    c.set_sm_margin = t->boolean("set_sm_margin");
    c.aggregate = t->boolean("aggregate");
    out.emplace(std::string(g.name), c);
  }
  return out;
}

// The preset first, then each switch given explicitly overrides it.
Optimizations read_optimizations(const Section& s) {
  s.reject_unknown_keys(kOptimizationKeys);
  Optimizations o;
  apply_preset(s.choice("preset", kPresets).value_or("megatron"), &o);
  o.tp_overlap = s.boolean("tp_overlap").value_or(o.tp_overlap);
  o.tp_overlap_comm = s.enum_choice("tp_overlap_comm", {TpOverlapComm::kNccl, TpOverlapComm::kUserBuffers})
                          .value_or(o.tp_overlap_comm);
  o.tp_overlap_sm_margin = s.boolean("tp_overlap_sm_margin").value_or(o.tp_overlap_sm_margin);
  if (const std::optional<Section> ub = s.subsection("userbuffers")) o.userbuffers = read_userbuffers(*ub);
  o.pp_overlap = s.boolean("pp_overlap").value_or(o.pp_overlap);
  o.dp_overlap = s.boolean("dp_overlap").value_or(o.dp_overlap);
  if (const std::optional<bool> g = s.boolean("dp_overlap_param_gather")) {
    // Megatron's arguments.py: "Must use --overlap-param-gather with --overlap-grad-reduce".
    if (*g && !o.dp_overlap) {
      s.fail("dp_overlap_param_gather", "overlapping the parameter all-gathers needs dp_overlap = true (set by the key "
                                        "or the preset), as Megatron-Core's --overlap-param-gather needs "
                                        "--overlap-grad-reduce");
    }
    o.dp_overlap_param_gather = *g;
  }
  o.efficient_operators = s.boolean("efficient_operators").value_or(o.efficient_operators);
  o.eager_elementwise = s.boolean("eager_elementwise").value_or(o.eager_elementwise);
  o.data_pipeline = s.boolean("data_pipeline").value_or(o.data_pipeline);
  o.fused_attention = s.boolean("fused_attention").value_or(o.fused_attention);
  if (const std::optional<AttentionKernel> k =
          s.enum_choice("attention_kernel", {AttentionKernel::kFlash2, AttentionKernel::kFlashTriton})) {
    o.attention_kernel = *k;
    if (*k != AttentionKernel::kFlash2 && !o.efficient_operators) {
      s.fail("attention_kernel", "a FlashAttention kernel runs only with efficient_operators = true "
                                 "(without it the attention is unfused)");
    }
    if (*k != AttentionKernel::kFlash2 && o.fused_attention) {
      s.fail("attention_kernel", "fused_attention = true (set by the key or the preset) runs Hopper's fused "
                                 "attention kernel instead; set fused_attention = false to choose this one");
    }
  }
  o.fp8 = s.boolean("fp8").value_or(o.fp8);
  // Read with fp8 = false too and left unused there, as Transformer Engine leaves
  // a recipe outside fp8_autocast: `--set optimizations.fp8=false` on an FP8 file.
  o.fp8_recipe = s.enum_choice("fp8_recipe", {Fp8Recipe::kDelayed, Fp8Recipe::kCurrent, Fp8Recipe::kMxfp8})
                     .value_or(o.fp8_recipe);
  // Read with fp8 = false too and left unused there, as the recipe is.
  o.fp8_param_gather = s.boolean("fp8_param_gather").value_or(o.fp8_param_gather);
  if (const std::optional<double> b = s.non_negative_number("dp_bucket_params")) {
    if (*b != std::floor(*b) || *b > 1e15) s.fail("dp_bucket_params", "expected a whole number of parameters (0: one collective per chunk)");
    o.dp_bucket_params = static_cast<int64_t>(*b);
  }
  o.optimizer = s.enum_choice("optimizer", {OptimizerKind::kAdam, OptimizerKind::kLamb})
                    .value_or(o.optimizer);
  o.cross_entropy = s.enum_choice("cross_entropy", {CrossEntropyImpl::kUnfused, CrossEntropyImpl::kJitFused,
                                                   CrossEntropyImpl::kSingleKernel, CrossEntropyImpl::kPytorch})
                        .value_or(o.cross_entropy);
  o.grad_reduce_dtype = s.enum_choice("grad_reduce_dtype", {GradReduceDtype::kFp32, GradReduceDtype::kBf16})
                            .value_or(o.grad_reduce_dtype);
  o.optimizer_state_dtype =
      s.enum_choice("optimizer_state_dtype", {OptimizerStateDtype::kFp32, OptimizerStateDtype::kBf16})
          .value_or(o.optimizer_state_dtype);
  o.grad_accumulation = s.enum_choice("grad_accumulation", {GradAccumulation::kFused, GradAccumulation::kAdd,
                                                            GradAccumulation::kAdd16Bit, GradAccumulation::kCastAdd})
                            .value_or(o.grad_accumulation);
  const std::initializer_list<MomentDtype> moments = {MomentDtype::kFp32, MomentDtype::kBf16, MomentDtype::kFp16,
                                                      MomentDtype::kFp8};
  o.exp_avg_dtype = s.enum_choice("exp_avg_dtype", moments).value_or(o.exp_avg_dtype);
  o.exp_avg_sq_dtype = s.enum_choice("exp_avg_sq_dtype", moments).value_or(o.exp_avg_sq_dtype);
  o.main_params_dtype =
      s.enum_choice("main_params_dtype",
                    {MainParamsDtype::kFp32, MainParamsDtype::kFp16, MainParamsDtype::kFp32Remainders})
          .value_or(o.main_params_dtype);
  for (const auto& [key, value] : precision_aware_optimizer(o)) {
    if (value == "fp32") continue;
    if (o.optimizer_state_dtype != OptimizerStateDtype::kFp32) {
      s.fail(key, "optimizer_state_dtype = \"bf16\" is Apex's DistributedFusedAdam, this key Megatron-Core's "
                  "precision-aware optimizer (Transformer Engine's FusedAdam): two optimizers, set one of them");
    }
    if (o.optimizer != OptimizerKind::kAdam) {
      s.fail(key, fmt::format("Megatron-Core's precision-aware optimizer is Adam only (optimizer_config.py asserts "
                              "it), got optimizer = \"{}\"",
                              to_string(o.optimizer)));
    }
  }
  if (o.main_params_dtype == MainParamsDtype::kFp32Remainders && o.fp8 && o.fp8_recipe != Fp8Recipe::kDelayed) {
    s.fail("main_params_dtype",
           fmt::format("fp32_remainders needs Transformer Engine to hold the master weights, which it does without FP8 "
                       "or with delayed scaling; with fp8_recipe = \"{}\" Megatron-Core keeps them itself in fp32 "
                       "(megatron/core/optimizer/__init__.py): set main_params_dtype = \"fp32\"",
                       to_string(o.fp8_recipe)));
  }
  return o;
}

constexpr std::string_view kTopLevelKeys[] = {"name",     "model",         "parallel", "hardware",
                                              "cluster",  "optimizations", "network",  "failures",
                                              "recovery", "run",           "train",    "inject"};

constexpr std::string_view kFailureKeys[] = {
    "preset",         "rate_scale",       "gpu_per_hour",      "node_per_hour",   "nic_per_hour",
    "link_per_hour",  "switch_per_hour",  "software_per_hour", "links",           "switches",
    "hang_fraction",  "slowdown_fraction", "slowdown_factor",  "link_flap_mean_s", "nccl_ib_timeout",
    "nccl_ib_retry_cnt", "traffic_drop_fraction", "during_recovery", "faults"};
constexpr std::string_view kFailurePresets[] = {"none", "llama3"};
constexpr std::string_view kFaultKeys[] = {"at", "component", "kind"};
constexpr std::string_view kComponents[] = {"gpu", "node", "nic", "link", "switch", "software"};
constexpr std::string_view kFaultKinds[] = {"crash",     "hang",      "slowdown",
                                            "node_down", "link_flap", "traffic_drop"};

FailureConfig read_failures(const Section& s) {
  s.reject_unknown_keys(kFailureKeys);
  FailureConfig f;
  f.preset = s.choice("preset", kFailurePresets).value_or(f.preset);
  f.rate_scale = s.non_negative_number("rate_scale").value_or(f.rate_scale);
  f.gpu_per_hour = s.non_negative_number("gpu_per_hour").value_or(f.gpu_per_hour);
  f.node_per_hour = s.non_negative_number("node_per_hour").value_or(f.node_per_hour);
  f.nic_per_hour = s.non_negative_number("nic_per_hour").value_or(f.nic_per_hour);
  f.link_per_hour = s.non_negative_number("link_per_hour").value_or(f.link_per_hour);
  f.switch_per_hour = s.non_negative_number("switch_per_hour").value_or(f.switch_per_hour);
  f.software_per_hour = s.non_negative_number("software_per_hour").value_or(f.software_per_hour);
  f.links = s.integer("links", 0).value_or(f.links);
  f.switches = s.integer("switches", 0).value_or(f.switches);
  f.hang_fraction = s.fraction("hang_fraction").value_or(f.hang_fraction);
  f.slowdown_fraction = s.fraction("slowdown_fraction").value_or(f.slowdown_fraction);
  if (f.hang_fraction + f.slowdown_fraction > 1.0) {
    s.fail("slowdown_fraction", "hang_fraction + slowdown_fraction must be <= 1");
  }
  f.slowdown_factor = s.positive_number("slowdown_factor").value_or(f.slowdown_factor);
  if (f.slowdown_factor < 1.0) s.fail("slowdown_factor", "must be >= 1 (a slowdown)");
  f.link_flap_mean_s = s.non_negative_number("link_flap_mean_s").value_or(f.link_flap_mean_s);
  f.nccl_ib_timeout = s.integer("nccl_ib_timeout", 1, 31).value_or(f.nccl_ib_timeout);
  f.nccl_ib_retry_cnt = s.integer("nccl_ib_retry_cnt", 0, 7).value_or(f.nccl_ib_retry_cnt);
  f.traffic_drop_fraction = s.fraction("traffic_drop_fraction").value_or(f.traffic_drop_fraction);
  f.during_recovery = s.boolean("during_recovery").value_or(f.during_recovery);
  for (const Section& fault : s.table_array("faults")) {
    fault.reject_unknown_keys(kFaultKeys);
    FaultSpec spec;
    const std::optional<double> at = fault.duration_s("at");
    if (!at) fault.fail_missing("at", "when the fault happens, e.g. at = \"3d\"");
    spec.at_s = *at;
    spec.component = fault.choice("component", kComponents).value_or(spec.component);
    spec.kind = fault.choice("kind", kFaultKinds).value_or(spec.kind);
    f.faults.push_back(spec);
  }
  return f;
}

constexpr std::string_view kRecoveryKeys[] = {
    "preset",          "heartbeat_period_s", "heartbeat_misses",  "error_report_s",
    "nccl_timeout_s",  "traffic_anomaly_detection", "anomaly_detect_s", "slowdown_detect_s",
    "self_check_s",    "false_negative",     "false_positive",    "manual_handling_s",
    "spare_nodes",     "replacement_s",      "repair_s",          "init",
    "process_start_s", "checkpoint_load",    "storage_read_gbs",  "checkpoint",
    "checkpoint_interval", "pcie_gbs",       "storage_write_gbs", "traffic_drop_detect_s",
    "redis",           "step_stall_s",       "slow_factor",       "slow_steps",
    "evict_slow",      "max_restarts",       "nodes"};
constexpr std::string_view kNodeKinds[] = {"local", "netns"};
constexpr std::string_view kRecoveryPresets[] = {"megascale", "baseline"};
constexpr std::string_view kInitDesigns[] = {"tcpstore", "redis", "ordered"};
constexpr std::string_view kLoadDesigns[] = {"every_rank", "one_per_dp_group"};
constexpr std::string_view kCheckpointDesigns[] = {"two_stage", "sync"};

// The preset first, then each key given explicitly overrides it.
RecoveryConfig read_recovery(const Section& s) {
  s.reject_unknown_keys(kRecoveryKeys);
  const std::string preset = s.choice("preset", kRecoveryPresets).value_or("megascale");
  RecoveryConfig r = preset == "baseline" ? RecoveryConfig::baseline() : RecoveryConfig::megascale();
  r.heartbeat_period_s = s.positive_number("heartbeat_period_s").value_or(r.heartbeat_period_s);
  r.heartbeat_misses = s.integer("heartbeat_misses", 1).value_or(r.heartbeat_misses);
  r.error_report_s = s.non_negative_number("error_report_s").value_or(r.error_report_s);
  r.nccl_timeout_s = s.positive_number("nccl_timeout_s").value_or(r.nccl_timeout_s);
  r.traffic_anomaly_detection =
      s.boolean("traffic_anomaly_detection").value_or(r.traffic_anomaly_detection);
  r.anomaly_detect_s = s.non_negative_number("anomaly_detect_s").value_or(r.anomaly_detect_s);
  r.traffic_drop_detect_s =
      s.non_negative_number("traffic_drop_detect_s").value_or(r.traffic_drop_detect_s);
  r.slowdown_detect_s = s.non_negative_number("slowdown_detect_s").value_or(r.slowdown_detect_s);
  r.self_check_s = s.non_negative_number("self_check_s").value_or(r.self_check_s);
  r.false_negative = s.fraction("false_negative").value_or(r.false_negative);
  r.false_positive = s.fraction("false_positive").value_or(r.false_positive);
  r.manual_handling_s = s.non_negative_number("manual_handling_s").value_or(r.manual_handling_s);
  r.spare_nodes = s.integer("spare_nodes", 0).value_or(r.spare_nodes);
  r.replacement_s = s.non_negative_number("replacement_s").value_or(r.replacement_s);
  r.repair_s = s.non_negative_number("repair_s").value_or(r.repair_s);
  r.init = s.choice("init", kInitDesigns).value_or(r.init);
  r.process_start_s = s.non_negative_number("process_start_s").value_or(r.process_start_s);
  r.checkpoint_load = s.choice("checkpoint_load", kLoadDesigns).value_or(r.checkpoint_load);
  r.storage_read_gbs = s.positive_number("storage_read_gbs").value_or(r.storage_read_gbs);
  r.checkpoint = s.choice("checkpoint", kCheckpointDesigns).value_or(r.checkpoint);
  r.checkpoint_interval_s = s.duration_s("checkpoint_interval").value_or(r.checkpoint_interval_s);
  if (r.checkpoint_interval_s <= 0) s.fail("checkpoint_interval", "must be > 0");
  r.pcie_gbs = s.positive_number("pcie_gbs").value_or(r.pcie_gbs);
  r.storage_write_gbs = s.positive_number("storage_write_gbs").value_or(r.storage_write_gbs);
  r.redis = s.string("redis").value_or(r.redis);
  if (!r.redis.empty()) {
    const size_t colon = r.redis.rfind(':');
    const std::string port = colon == std::string::npos ? "" : r.redis.substr(colon + 1);
    if (colon == 0 || port.empty() || port.find_first_not_of("0123456789") != std::string::npos ||
        port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535) {
      s.fail("redis", "expected \"host:port\" (port 1..65535), got \"" + r.redis + "\"");
    }
  }
  r.step_stall_s = s.positive_number("step_stall_s").value_or(r.step_stall_s);
  r.slow_factor = s.positive_number("slow_factor").value_or(r.slow_factor);
  if (r.slow_factor <= 1.0) s.fail("slow_factor", "must be > 1 (a multiple of the median compute time)");
  r.slow_steps = s.integer("slow_steps", 1).value_or(r.slow_steps);
  r.evict_slow = s.boolean("evict_slow").value_or(r.evict_slow);
  r.max_restarts = s.integer("max_restarts", 0).value_or(r.max_restarts);
  r.nodes = s.choice("nodes", kNodeKinds).value_or(r.nodes);
  return r;
}

constexpr std::string_view kInjectKeys[] = {"fault", "rank", "step", "percent"};

// [[inject]]: faults for a live run; rank and step are checked against the
// scenario once cluster and train are read.
std::vector<InjectSpec> read_inject(const Section& top) {
  std::vector<InjectSpec> out;
  for (const Section& f : top.table_array("inject")) {
    f.reject_unknown_keys(kInjectKeys);
    InjectSpec spec;
    const std::optional<std::string> fault = f.choice("fault", kInjectFaults);
    if (!fault) {
      f.fail_missing("fault", "one of kill, hang, slow, traffic_stop, corrupt_checkpoint, redis_kill, slow_all, "
                              "link_cut, node_down");
    }
    spec.fault = *fault;
    if (inject_takes_rank(spec.fault)) {
      spec.rank = f.integer("rank", 0).value_or(spec.rank);
    } else {
      if (f.node("rank") != nullptr) f.fail("rank", "fault = \"" + spec.fault + "\" names no rank");
      spec.rank = -1;
    }
    spec.step = f.integer("step", 1).value_or(spec.step);
    spec.percent = f.positive_number("percent").value_or(spec.percent);
    if (inject_takes_percent(spec.fault) && spec.percent <= 0) {
      f.fail_missing("percent", spec.fault + " needs the extra time, e.g. percent = 200");
    }
    if (!inject_takes_percent(spec.fault) && f.node("percent") != nullptr) {
      f.fail("percent", "only fault = \"slow\" and \"slow_all\" take a percent");
    }
    out.push_back(spec);
  }
  return out;
}

constexpr std::string_view kRunKeys[] = {"duration", "tokens", "runs", "seed", "iteration_time_s"};

RunConfig read_run(const Section& s) {
  s.reject_unknown_keys(kRunKeys);
  RunConfig r;
  r.duration_s = s.duration_s("duration").value_or(r.duration_s);
  if (r.duration_s <= 0) s.fail("duration", "must be > 0");
  r.tokens = s.non_negative_number("tokens").value_or(r.tokens);
  r.runs = s.integer("runs", 1, 10000000).value_or(r.runs);
  r.seed = s.integer("seed", 0).value_or(static_cast<int>(r.seed));
  r.iteration_time_s = s.non_negative_number("iteration_time_s").value_or(r.iteration_time_s);
  return r;
}

constexpr std::string_view kTrainKeys[] = {"steps",          "learning_rate", "seed",
                                           "data",           "work_dir",      "checkpoint_dir",
                                           "checkpoint_every", "trace",       "weight_decay",
                                           "max_grad_norm",  "watchdog_s",    "startup_watchdog_s",
                                           "device",         "precision",     "attention"};
constexpr std::string_view kTrainDevices[] = {"cpu", "cuda"};
constexpr std::string_view kTrainPrecisions[] = {"fp32", "bf16"};
constexpr std::string_view kTrainAttention[] = {"auto", "flash", "cublas", "flash-tc"};

TrainConfig read_train(const Section& s) {
  s.reject_unknown_keys(kTrainKeys);
  TrainConfig t;
  t.steps = s.integer("steps", 1).value_or(t.steps);
  t.learning_rate = s.positive_number("learning_rate").value_or(t.learning_rate);
  t.seed = s.integer("seed", 0).value_or(static_cast<int>(t.seed));
  t.data = s.string("data").value_or(t.data);
  t.work_dir = s.string("work_dir").value_or(t.work_dir);
  t.checkpoint_dir = s.string("checkpoint_dir").value_or(t.checkpoint_dir);
  t.checkpoint_every = s.integer("checkpoint_every", 0).value_or(t.checkpoint_every);
  t.trace = s.string("trace").value_or(t.trace);
  t.weight_decay = s.non_negative_number("weight_decay").value_or(t.weight_decay);
  t.max_grad_norm = s.non_negative_number("max_grad_norm").value_or(t.max_grad_norm);
  t.watchdog_s = s.non_negative_number("watchdog_s").value_or(t.watchdog_s);
  t.startup_watchdog_s = s.non_negative_number("startup_watchdog_s").value_or(t.startup_watchdog_s);
  t.device = s.choice("device", kTrainDevices).value_or(t.device);
  t.precision = s.choice("precision", kTrainPrecisions).value_or(t.precision);
  t.attention = s.choice("attention", kTrainAttention).value_or(t.attention);
  if (t.attention == "flash-tc" && t.precision != "bf16") {
    s.fail("attention", "\"flash-tc\" runs on bf16 tensor cores: it needs train.precision = \"bf16\"");
  }
  if (t.checkpoint_every > 0 && t.checkpoint_dir.empty()) {
    s.fail("checkpoint_every", "needs train.checkpoint_dir");
  }
  // Relative paths are relative to the scenario file's folder (work_dir too: it
  // resolved against the current directory, unlike every other path key).
  const std::filesystem::path base = std::filesystem::path(s.file()).parent_path();
  for (std::string* path : {&t.data, &t.work_dir, &t.checkpoint_dir, &t.trace}) {
    if (!path->empty() && std::filesystem::path(*path).is_relative()) *path = (base / *path).string();
  }
  return t;
}

Scenario read_scenario(const toml::table& root, const std::string& source) {
  const Section top(root, "", source);
  top.reject_unknown_keys(kTopLevelKeys);
  Scenario sc;
  sc.source = source;
  sc.name = top.string("name").value_or(std::filesystem::path(source).stem().string());
  // The name is a file name too: `megascale run` writes
  // results/recovery/<name>.json and <work_dir>/run-<name>/. A '/' or a
  // leading '.' would put them elsewhere ("../../x"), a control character
  // would garble the reports; 200 characters leave room for the longest
  // suffix under the usual 255-byte file-name limit.
  if (const std::optional<std::string> given = top.string("name")) {
    const std::string& n = *given;
    if (n.empty() || n.size() > 200 || n.find('/') != std::string::npos || n.find('\\') != std::string::npos ||
        n[0] == '.' || has_control_character(n)) {
      top.fail("name", fmt::format("must be 1-200 characters without '/', '\\', control characters or a leading '.' "
                                   "(it names files: results/recovery/<name>.json), got {:?}",
                                   n));
    }
  }
  sc.model = read_model(top.required_subsection("model"));
  if (std::optional<Section> s = top.subsection("hardware")) sc.hardware = read_hardware(*s);
  const Section cluster = top.required_subsection("cluster");
  sc.cluster = read_cluster(cluster);
  const bool topology_given = cluster.string("topology").has_value();
  if (std::optional<Section> s = top.subsection("network")) {
    sc.network = read_network(*s, sc.cluster.topology, topology_given);
    sc.cluster.topology = sc.network.preset;  // the two name one fabric
  } else {
    sc.network = NetworkConfig::for_preset(sc.cluster.topology);
  }
  sc.parallel = read_parallel(top.required_subsection("parallel"), sc.cluster.gpus, sc.model.layers);
  if (std::optional<Section> s = top.subsection("optimizations")) {
    sc.optimizations = read_optimizations(*s);
  }
  if (std::optional<Section> s = top.subsection("train")) sc.train = read_train(*s);
  if (std::optional<Section> s = top.subsection("failures")) sc.failures = read_failures(*s);
  if (std::optional<Section> s = top.subsection("recovery")) sc.recovery = read_recovery(*s);
  if (std::optional<Section> s = top.subsection("run")) sc.run = read_run(*s);
  sc.inject = read_inject(top);
  for (size_t i = 0; i < sc.inject.size(); ++i) {
    const std::string key = "inject[" + std::to_string(i) + "]";
    if (sc.inject[i].rank >= sc.cluster.gpus) {
      top.fail(key + ".rank", "rank " + std::to_string(sc.inject[i].rank) + " is not below cluster.gpus = " +
                                  std::to_string(sc.cluster.gpus));
    }
    if (sc.inject[i].step > sc.train.steps) {
      top.fail(key + ".step", "step " + std::to_string(sc.inject[i].step) + " is after the last step (train.steps = " +
                                  std::to_string(sc.train.steps) + ")");
    }
  }
  // The CPU engine (engine/layers.cc) runs LayerNorm and learned positions;
  // its measured profile times those kernels only.
  if (sc.hardware.gpu == "cpu" && sc.model.norm != NormKind::kLayerNorm) {
    top.fail("model.norm", "the CPU engine runs LayerNorm, got \"" + std::string(to_string(sc.model.norm)) + "\"");
  }
  if (sc.hardware.gpu == "cpu" && sc.model.position != PositionKind::kLearned) {
    top.fail("model.position",
             "the CPU engine learns absolute positions, got \"" + std::string(to_string(sc.model.position)) + "\"");
  }
  if (sc.hardware.gpu == "cpu" && sc.optimizations.grad_reduce_dtype != GradReduceDtype::kFp32) {
    top.fail("optimizations.grad_reduce_dtype", "the CPU engine reduces fp32 gradients, got \"" +
                                                    std::string(to_string(sc.optimizations.grad_reduce_dtype)) + "\"");
  }
  if (sc.hardware.gpu == "cpu" && sc.optimizations.grad_accumulation != GradAccumulation::kFused) {
    top.fail("optimizations.grad_accumulation",
             fmt::format("the CPU engine is timed by its own kernels (its weight gradients accumulate in place), "
                         "got \"{}\"",
                         to_string(sc.optimizations.grad_accumulation)));
  }
  if (sc.hardware.gpu == "cpu" && sc.optimizations.optimizer_state_dtype != OptimizerStateDtype::kFp32) {
    top.fail("optimizations.optimizer_state_dtype",
             fmt::format("the CPU engine keeps fp32 optimizer state, got \"{}\"",
                         to_string(sc.optimizations.optimizer_state_dtype)));
  }
  for (const auto& [key, value] : precision_aware_optimizer(sc.optimizations)) {
    if (sc.hardware.gpu == "cpu" && value != "fp32") {
      top.fail(fmt::format("optimizations.{}", key),
               fmt::format("the CPU engine keeps fp32 optimizer state, got \"{}\"", value));
    }
  }
  if (sc.parallel.cp > 1) {
    // Context parallelism, folded (model/config.h ParallelConfig): Megatron-Core
    // splits each sequence into 2 cp chunks, two per CP rank (causal load balance).
    if (sc.model.seq_len % (2 * sc.parallel.cp) != 0) {
      top.fail("parallel.cp", "model.seq_len (" + std::to_string(sc.model.seq_len) + ") must be a multiple of 2 x cp (" +
                                  std::to_string(2 * sc.parallel.cp) + "): each CP rank holds two equal chunks");
    }
    if (sc.hardware.gpu == "cpu") top.fail("parallel.cp", "the CPU engine has no context parallelism");
    sc.model = context_parallel_model(sc.model, 1, sc.parallel.cp);
    sc.parallel.dp *= sc.parallel.cp;
    sc.parallel.global_batch *= sc.parallel.cp;
  }
  std::string key;
  if (std::optional<std::string> reason =
          check_layout(sc.model, sc.parallel, sc.cluster.gpus, &key)) {
    top.fail(key, *reason);
  }
  if (std::optional<Violation> v = check_fabric(sc.network, sc.hardware, sc.cluster.gpus)) {
    top.fail(v->key, v->reason);
  }
  if (std::optional<Violation> v = check_placement(sc.hardware, sc.parallel)) {
    top.fail(v->key, v->reason);
  }
  for (const auto& [gemm, c] : sc.optimizations.userbuffers) {
    const GpuProfile& gpu = hardware_profile(sc);
    if (!gpu.is_cpu() && c.num_sm && *c.num_sm >= gpu.sm_count) {
      top.fail("optimizations.userbuffers." + gemm + ".num_sm",
               std::to_string(*c.num_sm) + " communication SMs leave none of the " + gpu.name + "'s " +
                   std::to_string(gpu.sm_count) + " SMs to the GEMM");
    }
  }
  if (sc.optimizations.fp8) {
    const GpuProfile& gpu = hardware_profile(sc);
    if (!(gpu.fp8_gemm_speedup() > 0)) {
      top.fail("optimizations.fp8", "the GPU profile " + gpu.name +
                                        " has no FP8 tensor cores (fp8_peak_tflops, fp8_gemm_efficiency); FP8 "
                                        "needs a Hopper or newer profile");
    }
    // Transformer Engine 2.x check_mxfp8_support (pytorch/quantization.py):
    // compute capability 10.0 up to, not including, 12.0.
    if (sc.optimizations.fp8_recipe == Fp8Recipe::kMxfp8 &&
        !(gpu.compute_capability >= 100 && gpu.compute_capability < 120)) {
      top.fail("optimizations.fp8_recipe",
               fmt::format("\"mxfp8\" needs a GPU of compute capability 10.x or 11.x (Transformer Engine's "
                           "check_mxfp8_support); the profile {} has {}",
                           gpu.name, gpu.compute_capability > 0 ? fmt::format("{}.{}", gpu.compute_capability / 10,
                                                                              gpu.compute_capability % 10)
                                                                : std::string("none stated")));
    }
  }
  // FlashAttention's Triton port (flash-attn's flash_attn_triton.py docstring
  // and kernel): causal or full attention with an optional bias, head
  // dimensions up to 128; no sliding window.
  if (sc.optimizations.attention_kernel == AttentionKernel::kFlashTriton) {
    if (sc.model.attention_window > 0) {
      top.fail("optimizations.attention_kernel",
               "FlashAttention's Triton port has no sliding window (model.attention_window = " +
                   std::to_string(sc.model.attention_window) + "); use \"flash2\"");
    }
    if (sc.model.heads > 0 && sc.model.head_dim() > 128) {
      top.fail("optimizations.attention_kernel", "FlashAttention's Triton port supports head dimensions up to 128, "
                                                 "this model's is " + std::to_string(sc.model.head_dim()));
    }
  }
  return sc;
}

// ---------------------------------------------------------------------------
// Layout checks (check_layout), in the order the header lists them

std::optional<Violation> check_positive_sizes(const ModelConfig& m, const ParallelConfig& p,
                                              int cluster_gpus) {
  const std::pair<std::string_view, int> sizes[] = {{"model.layers", m.layers},
                                                    {"model.heads", m.heads},
                                                    {"model.kv_heads", m.kv_heads},
                                                    {"parallel.tp", p.tp},
                                                    {"parallel.pp", p.pp},
                                                    {"parallel.vpp", p.vpp},
                                                    {"parallel.dp", p.dp},
                                                    {"parallel.micro_batch", p.micro_batch},
                                                    {"parallel.global_batch", p.global_batch},
                                                    {"cluster.gpus", cluster_gpus}};
  for (const auto& [key, value] : sizes) {
    if (value > 0) continue;
    const std::string_view name = key.substr(key.find('.') + 1);
    return Violation{std::string(key),
                     std::string(name) + " (" + std::to_string(value) + ") must be > 0"};
  }
  return std::nullopt;
}

std::optional<Violation> check_tensor_split(const ModelConfig& m, const ParallelConfig& p) {
  if (m.heads % p.tp != 0) {
    return Violation{"parallel.tp", divisibility("heads", m.heads, "tp", p.tp)};
  }
  if (m.kv_heads % p.tp != 0) {
    return Violation{"parallel.tp", divisibility("kv_heads", m.kv_heads, "tp", p.tp)};
  }
  // Megatron-LM's ColumnParallelLinear splits the MLP's first GEMM into equal
  // parts (core/utils.py divide() asserts it), and sequence parallelism splits
  // the sequence into tp equal parts (arguments.py: seq_length % tp == 0).
  if (m.ffn_hidden % p.tp != 0) {
    return Violation{"parallel.tp", divisibility("ffn_hidden", m.ffn_hidden, "tp", p.tp)};
  }
  if (p.sequence_parallel && p.tp > 1 && m.seq_len % p.tp != 0) {
    return Violation{"parallel.tp", divisibility("seq_len", m.seq_len, "tp", p.tp) + " (sequence parallelism)"};
  }
  return std::nullopt;
}

// Megatron-Core's split (model/pipeline_layout.h); the error names vpp when pp
// alone would divide the layers and says how to ask for uneven first / last
// stages (a user with Llama 3 405B's 126 layers on 16 stages learns the keys).
std::optional<Violation> check_pipeline_split(const ModelConfig& m, const ParallelConfig& p) {
  std::string key;
  std::optional<std::string> why =
      pipeline_layout_error(m, p, &key);
  if (!why) return std::nullopt;
  return Violation{key, *why};
}

// Errors print the file's dp and global batch: a folded config (model/config.h)
// carries cp x dp and cp x global_batch, as the reports' layout line undoes.
std::optional<Violation> check_gpu_count(const ParallelConfig& p, int cluster_gpus) {
  const int64_t layout_gpus = static_cast<int64_t>(p.tp) * p.pp * p.dp;
  if (layout_gpus == cluster_gpus) return std::nullopt;
  const std::string product = p.cp > 1 ? "tp*cp*pp*dp (" + std::to_string(p.tp) + "*" + std::to_string(p.cp) + "*"
                                       : "tp*pp*dp (" + std::to_string(p.tp) + "*";
  return Violation{"cluster.gpus", "gpus (" + std::to_string(cluster_gpus) + ") != " + product +
                                       std::to_string(p.pp) + "*" + std::to_string(p.replicas()) + "=" +
                                       std::to_string(layout_gpus) + ")"};
}

std::optional<Violation> check_batch_split(const ParallelConfig& p) {
  const int64_t samples_per_step = static_cast<int64_t>(p.dp) * p.micro_batch;
  if (p.global_batch % samples_per_step == 0) return std::nullopt;
  // cp x global_batch over cp x dp x micro_batch: the same test on the file's values.
  return Violation{"parallel.global_batch", "global_batch (" + std::to_string(p.global_batch / p.cp) +
                                                ") not divisible by dp*micro_batch (" +
                                                std::to_string(p.replicas()) + "*" +
                                                std::to_string(p.micro_batch) + "=" +
                                                std::to_string(samples_per_step / p.cp) + ")"};
}

// Megatron-LM's interleaved 1F1B needs several stages and whole rounds of pp
// micro-batches.
std::optional<Violation> check_interleaving(const ParallelConfig& p) {
  if (p.vpp == 1) return std::nullopt;
  if (p.pp == 1) return Violation{"parallel.vpp", "vpp > 1 requires pp > 1"};
  if (p.microbatches() % p.pp == 0) return std::nullopt;
  return Violation{"parallel.vpp", "microbatches per replica (" + std::to_string(p.microbatches()) +
                                       ") not a multiple of pp (" + std::to_string(p.pp) +
                                       "), required when vpp > 1"};
}

std::optional<Violation> check_zero_stage(const ParallelConfig& p) {
  if (p.zero_stage >= 0 && p.zero_stage <= 3) return std::nullopt;
  return Violation{"parallel.zero_stage",
                   "zero_stage (" + std::to_string(p.zero_stage) + ") not in 0..3"};
}

}  // namespace

ScenarioError::ScenarioError(std::string file, int line, int column, std::string key,
                             std::string reason)
    : std::runtime_error(format_message(file, line, column, key, reason)),
      file_(std::move(file)),
      line_(line),
      column_(column),
      key_(std::move(key)),
      reason_(std::move(reason)) {}

ModelConfig context_parallel_model(const ModelConfig& m, int folded_cp, int cp) {
  ModelConfig out = m;
  const int sequence = folded_cp > 1 ? m.span() : m.seq_len;
  out.seq_len = sequence / std::max(1, cp);
  out.attention_span = cp > 1 ? sequence : 0;
  return out;
}

Scenario with_layout(const Scenario& s, const ParallelConfig& p) {
  Scenario out = s;
  out.model = context_parallel_model(s.model, s.parallel.cp, p.cp);
  out.parallel = p;
  return out;
}

Scenario load_scenario(const std::string& path) { return load_scenario(path, {}); }

std::optional<EngineLimit> engine_limit(const ParallelConfig& p) {
  if (p.recompute != Recompute::kNone) {
    return EngineLimit{"parallel.recompute", std::string("the engine keeps every activation; set recompute = \"none\" "
                                                         "to train this scenario (got \"") +
                                                 to_string(p.recompute) + "\")"};
  }
  if (p.zero_stage > 2) {
    return EngineLimit{"parallel.zero_stage", "the engine runs ZeRO 0-2, got " + std::to_string(p.zero_stage)};
  }
  // engine/pipeline_executor.cc p2p_tag: (direction x vpp + chunk) x M + micro-batch.
  constexpr int64_t kMpiTagUpperBound = 32767;  // the MPI standard's guaranteed MPI_TAG_UB
  const int64_t tags = 2LL * p.vpp * p.microbatches();
  if (tags - 1 > kMpiTagUpperBound) {
    return EngineLimit{"parallel.global_batch",
                       fmt::format("{} micro-batches per replica x {} chunks x 2 directions need {} p2p tags; MPI "
                                   "guarantees {}",
                                   p.microbatches(), p.vpp, tags, kMpiTagUpperBound + 1)};
  }
  return std::nullopt;
}

void check_trainable(const Scenario& s) {
  if (s.train.device == "cpu" && s.hardware.gpu != "cpu") {
    throw ScenarioError(s.source, 0, 0, "hardware.gpu",
                        "the CPU engine (train.device = \"cpu\") needs gpu = \"cpu\" (got \"" + s.hardware.gpu +
                            "\"); set train.device = \"cuda\" to train on GPUs");
  }
  if (s.train.device == "cuda" && s.hardware.gpu == "cpu") {
    throw ScenarioError(s.source, 0, 0, "hardware.gpu",
                        "train.device = \"cuda\" needs a GPU profile for its MFU (e.g. gpu = \"H200-SXM-141GB\"), got "
                        "\"cpu\"");
  }
  if (const std::optional<EngineLimit> limit = engine_limit(s.parallel)) {
    throw ScenarioError(s.source, 0, 0, limit->key, limit->reason);
  }
  // A setting the engine does not run: "the engine <does>, got "<value>"; set
  // <leaf> = "<runs>" to train this scenario", naming the key.
  auto refuse = [&s](std::string_view key, std::string_view engine_does, std::string_view got,
                     std::string_view runs) {
    throw ScenarioError(s.source, 0, 0, std::string(key),
                        fmt::format("the engine {}, got \"{}\"; set {} = \"{}\" to train this scenario", engine_does,
                                    got, key.substr(key.find('.') + 1), runs));
  };
  // engine/layers.cc: LayerNorm and a learned position table, on either device.
  if (s.model.norm != NormKind::kLayerNorm) {
    refuse("model.norm", "runs LayerNorm", to_string(s.model.norm), "layernorm");
  }
  if (s.model.position != PositionKind::kLearned) {
    refuse("model.position", "learns absolute positions", to_string(s.model.position), "learned");
  }
  // engine/cuda/comm_nccl.cc: every collective is ncclFloat32.
  if (s.optimizations.grad_reduce_dtype != GradReduceDtype::kFp32) {
    refuse("optimizations.grad_reduce_dtype", "reduces fp32 gradients", to_string(s.optimizations.grad_reduce_dtype),
           "fp32");
  }
  if (s.optimizations.grad_accumulation != GradAccumulation::kFused) {
    refuse("optimizations.grad_accumulation", "accumulates its weight gradients in place",
           to_string(s.optimizations.grad_accumulation), "fused");
  }
  // engine/optimizer: fp32 master weights and moments.
  if (s.optimizations.optimizer_state_dtype != OptimizerStateDtype::kFp32) {
    refuse("optimizations.optimizer_state_dtype", "keeps fp32 optimizer state",
           to_string(s.optimizations.optimizer_state_dtype), "fp32");
  }
  for (const auto& [key, value] : precision_aware_optimizer(s.optimizations)) {
    if (value != "fp32") refuse(fmt::format("optimizations.{}", key), "keeps fp32 optimizer state", value, "fp32");
  }
  // The engine's output layer holds vocab / tp rows per TP rank and does not
  // pad the vocabulary as Megatron-LM does (the simulator takes model.vocab as
  // the padded size its cost counts); every rank used to stop on it at start
  // (engine/layers.cc).
  if (s.model.vocab % s.parallel.tp != 0) {
    throw ScenarioError(s.source, 0, 0, "model.vocab",
                        fmt::format("vocab {} not divisible by tp {}: the engine does not pad the vocabulary; pad it "
                                    "to a multiple of tp, as Megatron-LM does",
                                    s.model.vocab, s.parallel.tp));
  }
  // The engine's bias-dropout-add and attention run with dropout off
  // (engine/README.md); a probability it would not apply is refused, not dropped.
  for (const auto& [key, p] : {std::pair{"model.hidden_dropout", s.model.hidden_dropout},
                               std::pair{"model.attention_dropout", s.model.attention_dropout}}) {
    if (p && *p > 0) {
      throw ScenarioError(s.source, 0, 0, key,
                          "the engine trains without dropout, got " + fmt::format("{:g}", *p) +
                              "; set it to 0 or leave it out to train this scenario");
    }
  }
}

Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    throw ScenarioError(path, 0, 0, "", "cannot open file: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ScenarioError(path, 0, 0, "", std::string("cannot open file: ") + std::strerror(errno));
  }
  // Read at most kMaxScenarioBytes: a scenario is a few KB, and a device or a
  // pipe without end (/dev/zero) must be an error, not an exhausted memory.
  constexpr std::streamsize kMaxScenarioBytes = 16 << 20;
  std::string text(static_cast<size_t>(kMaxScenarioBytes) + 1, '\0');
  in.read(text.data(), kMaxScenarioBytes + 1);
  const std::streamsize got = in.gcount();
  if (got > kMaxScenarioBytes) {
    throw ScenarioError(path, 0, 0, "", "file is larger than 16 MiB: not a scenario (a scenario is a few KB)");
  }
  text.resize(static_cast<size_t>(got));
  return parse_scenario(text, path, overrides);
}

Scenario parse_scenario(std::string_view toml_text, const std::string& source) {
  return parse_scenario(toml_text, source, {});
}

std::string overrides_note(const ScenarioError& e, const std::vector<std::string>& overrides) {
  if (overrides.empty() || is_override_source(e.file())) return "";
  return fmt::format("  ({} as changed by --set {})\n", e.file(), fmt::join(overrides, ", --set "));
}

Scenario parse_scenario(std::string_view toml_text, const std::string& source,
                        const std::vector<std::string>& overrides) {
  toml::table root = parse_toml(toml_text, source);
  apply_overrides(overrides, &root);
  return read_scenario(root, source);
}

std::optional<std::string> check_layout(const ModelConfig& m, const ParallelConfig& p,
                                        int cluster_gpus, std::string* key) {
  std::optional<Violation> violation = check_positive_sizes(m, p, cluster_gpus);
  if (!violation) violation = check_tensor_split(m, p);
  if (!violation) violation = check_pipeline_split(m, p);
  if (!violation) violation = check_gpu_count(p, cluster_gpus);
  if (!violation) violation = check_batch_split(p);
  if (!violation) violation = check_interleaving(p);
  if (!violation) violation = check_zero_stage(p);
  if (!violation) return std::nullopt;
  if (key != nullptr) *key = violation->key;
  return violation->reason;
}

// MegaScale (NSDI'24) Table 1: the 175B model, TP 8, PP 8 with 6 model chunks
// per stage, DP 192 on 12,288 GPUs, global batch 6144 of 2048-token samples.
Scenario default_scenario(const std::string& preset) {
  Scenario sc;
  sc.source = "<built-in>";
  sc.name = "gpt-175b-12288-" + preset;

  sc.model.name = "gpt-175b";
  sc.model.layers = 96;
  sc.model.hidden = 12288;
  sc.model.heads = 128;
  sc.model.kv_heads = 128;
  sc.model.seq_len = 2048;
  sc.model.vocab = 64000;
  sc.model.ffn_hidden = 4 * sc.model.hidden;
  sc.model.mlp = MlpKind::kGelu;
  sc.model.block = BlockKind::kSequential;
  sc.model.attention_window = 0;

  sc.parallel.tp = 8;
  sc.parallel.pp = 8;
  sc.parallel.vpp = 6;
  sc.parallel.dp = 192;
  sc.parallel.micro_batch = 1;
  sc.parallel.global_batch = 6144;
  sc.parallel.sequence_parallel = true;
  sc.parallel.zero_stage = 1;
  sc.parallel.recompute = Recompute::kNone;

  sc.hardware = HardwareConfig{};  // A100-SXM4-80GB, 8 GPUs and 8 x 200 Gb/s NICs per node
  sc.cluster.gpus = 12288;
  sc.cluster.topology = "megascale-clos";

  return as_system(sc, preset);
}

void apply_preset(const std::string& preset, Optimizations* o) {
  if (preset == "megatron") {
    *o = Optimizations::megatron();
  } else if (preset == "megascale") {
    *o = Optimizations::megascale();
  } else if (preset == "megatron-core") {
    *o = Optimizations::megatron_core();
  } else {
    throw std::invalid_argument("unknown optimizations preset '" + preset +
                                "' (allowed: megatron, megatron-core, megascale)");
  }
}

}  // namespace megascale::model
