// calibrate/validation.cc: run the paper's scenarios and compare with published figures.
#include "calibrate/validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "model/estimator.h"
#include "model/scenario.h"
#include "sim/event_run.h"

namespace megascale::calibrate {
namespace {

// MegaScale (Jiang et al., NSDI'24, arXiv 2402.15627), via ../shared/REFERENCE.md.
std::vector<PaperCase> make_cases() {
  std::vector<PaperCase> c;
  struct T2 {
    int gpus;
    double megatron_s, megatron_mfu, megascale_s, megascale_mfu;
  };
  // Table 2: 175B strong scaling (iteration time, MFU).
  const T2 t2[] = {{256, 40.0, 0.530, 32.0, 0.653},     {512, 21.2, 0.499, 16.5, 0.635},
                   {768, 15.2, 0.467, 11.5, 0.613},     {1024, 11.9, 0.447, 8.9, 0.590},
                   {3072, 29.02, 0.487, 23.66, 0.591},  {6144, 14.78, 0.478, 12.21, 0.573},
                   {8192, 12.24, 0.433, 9.56, 0.549},   {12288, 8.57, 0.412, 6.34, 0.552}};
  for (const T2& r : t2) {
    const std::string g = std::to_string(r.gpus);
    c.push_back({"table2-megatron-" + g + ".toml", "table2", "Megatron-LM " + g + " GPUs",
                 r.megatron_mfu, r.megatron_s});
    c.push_back({"table2-megascale-" + g + ".toml", "table2", "MegaScale " + g + " GPUs",
                 r.megascale_mfu, r.megascale_s});
  }
  // Table 3: 175B on 256 GPUs, cumulative MFU.
  const std::pair<const char*, double> t3[] = {
      {"1-baseline", 0.477},          {"2-parallel-block", 0.523},
      {"3-sliding-window", 0.533},    {"4-tp-overlap", 0.555},
      {"5-pp-overlap", 0.580},        {"6-dp-overlap", 0.595},
      {"7-efficient-operators", 0.612}, {"8-misc", 0.623},
      {"9-lamb", 0.653}};
  for (const auto& [tag, mfu] : t3) {
    c.push_back({std::string("table3-") + tag + ".toml", "table3", tag, mfu, 0});
  }
  // Figure 9: 530B weak scaling (labels read off the figure, approximate).
  const int f9_gpus[] = {2240, 4480, 11200};
  const double f9_megatron[] = {0.492, 0.488, 0.482};
  const double f9_megascale[] = {0.543, 0.541, 0.543};
  for (int i = 0; i < 3; ++i) {
    const std::string g = std::to_string(f9_gpus[i]);
    c.push_back({"fig9-megatron-" + g + ".toml", "fig9", "Megatron-LM " + g + " GPUs", f9_megatron[i], 0});
    c.push_back({"fig9-megascale-" + g + ".toml", "fig9", "MegaScale " + g + " GPUs", f9_megascale[i], 0});
  }
  return c;
}

std::string stem(const std::string& file) { return file.substr(0, file.rfind('.')); }

// The discussion closing results/validation.md (kept next to the code that
// produces the figures it discusses).
constexpr const char* kWhyItMisses =
    "## What the errors mean\n\n"
    "- **Per-sample work is right at up to 1,024 GPUs.** At global batch 768 the\n"
    "  predicted seconds per sample per GPU are within 1.5% of the published ones for\n"
    "  both systems (table above): operator costs (`model/op_cost.h`, GEMM tile/wave\n"
    "  model capped at the 85% cuBLAS microbenchmark, FlashAttention-2 efficiencies),\n"
    "  the TP/SP collectives (fused under TP overlap with GEMM pieces that run on the\n"
    "  84 SMs NCCL's 24 channels leave, `model/fused_overlap.h`), and the GPU-to-GPU\n"
    "  speed spread (a TP group runs at its slowest GPU, the slowest replica gates the\n"
    "  step) carry no per-scenario parameter.\n"
    "- **The per-step cost is under-predicted.** The published times imply a cost per\n"
    "  step that does not shrink with more GPUs of about 2.6 s (Megatron-LM) and 1.2 s\n"
    "  (MegaScale) at batch 768; the simulation has 0.7 s and 0.15 s (pipeline fill and\n"
    "  drain, exposed DP reduce-scatter / all-gather on the fabric, optimizer, data).\n"
    "  This is why the error grows from 256 to 1,024 GPUs (the step shrinks, the missing\n"
    "  second does not). Candidates the model does not have, none with a public\n"
    "  measurement we may use: NCCL network collectives below the nccl-tests bus\n"
    "  bandwidth when 8 rails run at once, host-side work between steps (Python, the\n"
    "  optimizer's many small kernels, logging), gradient-buffer management.\n"
    "- **The large-batch cluster is slower per sample than predicted.** At batch 6,144\n"
    "  (3,072-12,288 GPUs) the published per-sample cost is 9-12% above its batch-768\n"
    "  value, while the prediction stays flat (the fabric contention, p2p across\n"
    "  aggregation/core switches and the larger GPU population add ~1-2%). MegaScale's\n"
    "  rows at 3,072-8,192 GPUs carry the largest errors. The paper observed\n"
    "  computational stragglers on ~0.5% of machines (~10% slower); given as input\n"
    "  (`megascale simulate FILE --stragglers 0.005 --straggler-factor 1.1`) they lower\n"
    "  the MegaScale rows at 1,024-12,288 GPUs by 1.9-3.4 points. They are not assumed.\n"
    "- **Figure 9 (530B) is the weakest.** PP 35 x VPP 3 puts one layer in each model\n"
    "  chunk, so pipeline traffic and per-chunk overheads weigh ~12x more than for the\n"
    "  175B layout; the labels are read off a figure and the batch per replica (280\n"
    "  micro-batches) is inferred from \"global batch = GPUs\". For scale: Megatron-LM's\n"
    "  own paper reports 54.2% MFU for 530B on 2,240 A100s with selective recomputation\n"
    "  (Korthikanti et al. 2022, arXiv 2205.05198), MegaScale's figure 49.2%.\n"
    "- **Stragglers agree with section 5.** MegaScale found ~0.5% of machines ~10%\n"
    "  slower in the forward pass and gained ~0.7% MFU (read as points) by removing\n"
    "  them. With that slowdown given as 10% x the forward's share of a micro-batch\n"
    "  (0.33), the simulation loses 0.66 points on the 12,288-GPU layout (mean of\n"
    "  seeds 1-4): the slow machines mostly hide inside the GPU speed spread that\n"
    "  already gates the step. Nothing here is fitted.\n"
    "- **Assumed inputs.** The sliding window (1,024 tokens) is not printed in the\n"
    "  paper; synchronous data loading costs an assumed 1 ms per sample (the GPU\n"
    "  profiles' `data_load_s_per_sample`);\n"
    "  the GPU speed spread (sigma 1.5%) comes from V100/MI60 measurements (Sinha et al.,\n"
    "  SC'22).\n"
    "- **MFU accounting.** Our MFU uses 72 B s L h^2 (1 + s'/6h + V/12Lh), s' = s for\n"
    "  full attention and, under a sliding window, s scaled by the keys per query the\n"
    "  window leaves (model/op_cost.h). The published Megatron-LM MFUs match the\n"
    "  formula applied to the published iteration times to within 0.2 points; the\n"
    "  published MegaScale MFUs are 0.2-1.0 points lower than the full-attention count\n"
    "  of their own iteration times (their FLOPs count for the sliding-window model is\n"
    "  smaller); with the assumed 1,024-token window counted, ours is 0.37 points\n"
    "  lower. The iteration-time rows show the timing error alone.\n";

struct Stats {
  double sum = 0, max = 0;
  int n = 0;
  void add(double e) {
    sum += std::fabs(e);
    max = std::max(max, std::fabs(e));
    ++n;
  }
  double mean() const { return n ? sum / n : 0.0; }
};

}  // namespace

const std::vector<PaperCase>& paper_cases() {
  static const std::vector<PaperCase> kCases = make_cases();
  return kCases;
}

namespace {

ValidationSummary summarise(const std::vector<ValidationRow>& rows, bool analytical) {
  Stats t2, t3, f9, speedup;
  std::vector<double> t3_pred, t3_pub;
  for (const ValidationRow& row : rows) {
    const double pred = analytical ? row.analytical : row.predicted;
    const double err = pred - row.published;
    if (row.metric == "speedup") speedup.add(err);
    if (row.metric != "mfu") continue;
    if (row.table == "table2") t2.add(err);
    if (row.table == "fig9") f9.add(err);
    if (row.table == "table3") {
      t3.add(err);
      t3_pred.push_back(pred);
      t3_pub.push_back(row.published);
    }
  }
  ValidationSummary sm;
  sm.table2_mean_abs_mfu_error = t2.mean();
  sm.table2_max_abs_mfu_error = t2.max;
  sm.table3_mean_abs_mfu_error = t3.mean();
  sm.table3_max_abs_mfu_error = t3.max;
  sm.fig9_mean_abs_mfu_error = f9.mean();
  sm.fig9_max_abs_mfu_error = f9.max;
  sm.table2_max_abs_speedup_error = speedup.max;
  for (size_t i = 1; i < t3_pred.size(); ++i) {
    const double pub_inc = t3_pub[i] - t3_pub[i - 1];
    const double pred_inc = t3_pred[i] - t3_pred[i - 1];
    if ((pub_inc > 0) != (pred_inc > 0)) ++sm.table3_wrong_sign_increments;
    sm.table3_max_abs_increment_error = std::max(sm.table3_max_abs_increment_error, std::fabs(pred_inc - pub_inc));
  }
  return sm;
}

}  // namespace

bool meets(const ValidationSummary& s, const AccuracyBounds& b) {
  return s.table2_mean_abs_mfu_error <= b.table2_mean && s.table2_max_abs_mfu_error <= b.table2_max &&
         s.table2_max_abs_speedup_error <= b.speedup && s.table3_max_abs_mfu_error <= b.table3_each &&
         s.table3_wrong_sign_increments == 0 && s.table3_max_abs_increment_error <= b.table3_increment &&
         s.fig9_max_abs_mfu_error <= b.fig9_each;
}

ValidationReport run_validation(const std::string& scenario_dir, const std::string& fidelity,
                                const std::vector<std::string>& overrides) {
  if (fidelity != "event" && fidelity != "analytical")
    throw std::invalid_argument("validate: fidelity must be 'event' or 'analytical', got '" + fidelity + "'");
  ValidationReport r;
  r.fidelity = fidelity;
  r.overrides = overrides;
  struct Times {
    double predicted = 0, analytical = 0;
  };
  std::map<std::string, Times> time_of;  // by case stem
  // Every case loaded before any is simulated: a missing or broken file (or
  // --set) is named at once, not after minutes of event simulation.
  std::error_code ec;
  if (!std::filesystem::is_directory(scenario_dir, ec)) {
    throw std::invalid_argument(fmt::format("{} is not a folder of the paper's scenarios ({}, ...)",
                                            scenario_dir, paper_cases().front().file));
  }
  std::vector<model::Scenario> scenarios;
  for (const PaperCase& pc : paper_cases())
    scenarios.push_back(model::load_scenario(scenario_dir + "/" + pc.file, overrides));
  for (size_t i = 0; i < paper_cases().size(); ++i) {
    const PaperCase& pc = paper_cases()[i];
    const model::Scenario& s = scenarios[i];
    const model::Estimate a = model::estimate(s);
    const model::Estimate e = fidelity == "event" ? sim::event_estimate(s) : a;
    r.rows.push_back({stem(pc.file), pc.table, pc.label, "mfu", pc.published_mfu, e.mfu,
                      e.mfu - pc.published_mfu, a.mfu});
    if (pc.published_iteration_s > 0) {
      r.rows.push_back({stem(pc.file), pc.table, pc.label, "iteration_time_s",
                        pc.published_iteration_s, e.iteration_time_s,
                        e.iteration_time_s - pc.published_iteration_s, a.iteration_time_s});
    }
    time_of[stem(pc.file)] = {e.iteration_time_s, a.iteration_time_s};
  }
  // Speedup MegaScale / Megatron-LM per Table 2 row (ratio of iteration times).
  for (const PaperCase& pc : paper_cases()) {
    if (pc.table != "table2" || pc.file.find("megatron") == std::string::npos) continue;
    const std::string g = pc.file.substr(std::string("table2-megatron-").size());
    const PaperCase* other = nullptr;
    for (const PaperCase& q : paper_cases()) {
      if (q.file == "table2-megascale-" + g) other = &q;
    }
    if (other == nullptr) continue;
    const double pub = pc.published_iteration_s / other->published_iteration_s;
    const Times& slow = time_of[stem(pc.file)];
    const Times& fast = time_of[stem(other->file)];
    const double pred = slow.predicted / fast.predicted;
    r.rows.push_back({"table2-speedup-" + stem(g), "table2", "speedup " + stem(g) + " GPUs", "speedup", pub,
                      pred, pred - pub, slow.analytical / fast.analytical});
  }
  // Section 5: about 0.5% of machines ~10% slower in the forward pass; removing
  // them gained ~0.7% MFU (REFERENCE.md "Operations"). Event level only: the
  // closed form has no stragglers. Mean over 4 seeds of the GPU speed spread and
  // of which machines are slow.
  if (fidelity == "event") {
    {
      const std::string file = "table2-megascale-12288.toml";
      const model::Scenario s = model::load_scenario(scenario_dir + "/" + file, overrides);
      const double lost = sim::straggler_cost(s, 0.005, 0.10, 4);
      ValidationRow row{"stragglers-" + stem(file), "stragglers",
                        "MegaScale 12288 GPUs: MFU that 0.5% of machines ~10% slower forward cost", "mfu",
                        0.007, lost, lost - 0.007, 0};
      row.has_analytical = false;
      r.rows.push_back(row);
    }
  }
  r.summary = summarise(r.rows, false);
  r.analytical_summary = summarise(r.rows, true);
  return r;
}

namespace {

std::string summary_rows(const char* fidelity, const ValidationSummary& s) {
  return fmt::format("| {} | {:.2f} | {:.2f} | {:.3f} | {:.2f} | {:.2f} | {:.2f} | {} of 8 | {:.2f} | {:.2f} |\n", fidelity,
                     100 * s.table2_mean_abs_mfu_error, 100 * s.table2_max_abs_mfu_error,
                     s.table2_max_abs_speedup_error, 100 * s.table3_mean_abs_mfu_error,
                     100 * s.table3_max_abs_mfu_error, 100 * s.table3_max_abs_increment_error,
                     s.table3_wrong_sign_increments, 100 * s.fig9_mean_abs_mfu_error, 100 * s.fig9_max_abs_mfu_error);
}

}  // namespace

// Least-squares fit of iteration_s = x * per_share_s + fixed_s over rows of one
// system and one global batch, x = global batch / GPUs (samples per GPU).
// Published rows and predicted rows get the same arithmetic: a diagnosis of
// where the error lies (work that scales with the samples a GPU processes vs
// a per-step cost that does not), not a fit of any model parameter.
struct Decomposition {
  double per_sample_s = 0, fixed_s = 0;
};
Decomposition decompose(const std::vector<std::pair<double, double>>& x_t) {
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  const double n = static_cast<double>(x_t.size());
  for (const auto& [x, t] : x_t) {
    sx += x;
    st += t;
    sxx += x * x;
    sxt += x * t;
  }
  Decomposition d;
  const double den = n * sxx - sx * sx;
  if (n < 2 || den == 0) return d;
  d.per_sample_s = (n * sxt - sx * st) / den;
  d.fixed_s = (st - d.per_sample_s * sx) / n;
  return d;
}

std::string decomposition_table(const ValidationReport& r) {
  struct Group {
    const char* system;
    const char* prefix;
    int batch;
    std::vector<int> gpus;
  };
  const Group groups[] = {{"Megatron-LM", "table2-megatron-", 768, {256, 512, 768, 1024}},
                          {"MegaScale", "table2-megascale-", 768, {256, 512, 768, 1024}},
                          {"Megatron-LM", "table2-megatron-", 6144, {3072, 6144, 8192, 12288}},
                          {"MegaScale", "table2-megascale-", 6144, {3072, 6144, 8192, 12288}}};
  std::string out =
      "| system | global batch | GPUs | published s per sample-per-GPU | predicted | published fixed s "
      "per step | predicted |\n|---|---|---|---|---|---|---|\n";
  for (const Group& g : groups) {
    std::vector<std::pair<double, double>> pub, pred;
    for (int gpus : g.gpus) {
      for (const ValidationRow& row : r.rows) {
        if (row.metric != "iteration_time_s" || row.case_name != g.prefix + std::to_string(gpus)) continue;
        const double x = static_cast<double>(g.batch) / gpus;
        pub.emplace_back(x, row.published);
        pred.emplace_back(x, row.predicted);
      }
    }
    if (pub.size() < 2) continue;
    const Decomposition a = decompose(pub), b = decompose(pred);
    out += fmt::format("| {} | {} | {}-{} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", g.system, g.batch, g.gpus.front(),
                       g.gpus.back(), a.per_sample_s, b.per_sample_s, a.fixed_s, b.fixed_s);
  }
  return out;
}

std::string validation_markdown(const ValidationReport& r) {
  const bool event = r.fidelity == "event";
  const char* primary = event ? "event" : "analytical";
  std::string out;
  out +=
      "# Validation: predicted vs published (MegaScale, NSDI'24)\n\n"
      "Generated by `megascale validate --write` from the scenarios in `scenarios/paper/`.\n"
      "Published figures: MegaScale Tables 2 and 3 and Figure 9, as collected in\n"
      "`../shared/REFERENCE.md`. One hardware profile (A100-SXM4-80GB, spec sheets and\n"
      "public microbenchmarks, `calibrate/profiles/A100-SXM4-80GB.toml`) and one fabric\n"
      "serve every case; nothing is fitted to these figures.";
  {
    // The profile's fitted values, each with where it was fitted (issue 12: the
    // fit reported next to the result).
    const model::GpuProfile a100 = model::gpu_profile("A100-SXM4-80GB");
    const auto prov = a100.provenance.find("tp_gather_scatter_extra");
    if (a100.tp_gather_scatter_extra > 0 && prov != a100.provenance.end() && prov->second.source == "fitted") {
      out += fmt::format(
          " Its one fitted value,\ntp_gather_scatter_extra = {:.2f} (sequence-parallel all-gathers and reduce-scatters\n"
          "inside a node run {:.0f}% longer than the ring formula), is fitted on Korthikanti et al.'s\n"
          "published per-layer times (leave-one-out {:.1f}%;\n"
          "`results/calibration/A100-SXM4-80GB-tp-gather-scatter-fit.md`).",
          a100.tp_gather_scatter_extra, 100 * a100.tp_gather_scatter_extra, 100 * prov->second.loo_error);
    }
  }
  out += " Errors are predicted - published;\nMFU errors in percentage points.\n\n";
  if (!r.overrides.empty()) {
    out += "**What-if, not the reference report:** every paper scenario was changed by";
    for (const std::string& o : r.overrides) out += " `--set " + o + "`";
    out += ".\n\n";
  }
  out += fmt::format(
      "Fidelity of the `predicted` column: **{}**{}. The analytical estimate\n"
      "(`model/estimator.h`) is shown next to it.\n\n",
      primary,
      event ? " (`sim/`: the Schedule IR on SimGrid, communication from `network/` with\n"
              "ECMP and congestion control, GPU-to-GPU speed spread of\n"
              "`[hardware] gpu_speed_sigma`)"
            : "");
  out +=
      "## Summary\n\n"
      "| fidelity | Table 2 mean | Table 2 max | speedup max | Table 3 mean | Table 3 max | "
      "Table 3 increment max | wrong-sign increments | Fig. 9 mean | Fig. 9 max |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  out += summary_rows(primary, r.summary);
  if (event) out += summary_rows("analytical", r.analytical_summary);
  out +=
      "| **bound (issue 12)** | 2.00 | 4.00 | 0.050 | — | 2.00 | 1.00 | 0 of 8 | — | 3.00 |\n\n";
  const bool met = meets(r.summary, AccuracyBounds{});
  out += fmt::format("Bounds met by the {} fidelity: **{}** (`megascale validate` exits {}).\n\n", primary,
                     met ? "yes" : "no", met ? 0 : 1);
  const char* titles[][2] = {{"table2", "Table 2: 175B strong scaling"},
                             {"table3", "Table 3: 175B ablation on 256 GPUs (cumulative)"},
                             {"fig9", "Figure 9: 530B weak scaling"},
                             {"stragglers", "Section 5: computational stragglers (mean of 4 seeds)"}};
  for (const auto& t : titles) {
    const bool any = std::any_of(r.rows.begin(), r.rows.end(), [&](const ValidationRow& x) { return x.table == t[0]; });
    if (!any) continue;
    out += std::string("## ") + t[1] + "\n\n";
    if (event) {
      out += "| case | metric | published | event | error | analytical | error |\n|---|---|---|---|---|---|---|\n";
    } else {
      out += "| case | metric | published | predicted | error |\n|---|---|---|---|---|\n";
    }
    for (const ValidationRow& row : r.rows) {
      if (row.table != t[0]) continue;
      const char* metric = row.metric == "mfu" ? "MFU %" : row.metric == "iteration_time_s" ? "iteration s" : "speedup";
      const double scale = row.metric == "mfu" ? 100.0 : 1.0;
      const bool fine = row.table == "stragglers";  // a fraction of a point
      // Decimals: MFU points to 0.1 (0.01 for stragglers), seconds to 0.01, speedups to 0.001.
      const int digits = row.metric == "mfu" ? (fine ? 2 : 1) : row.metric == "iteration_time_s" ? 2 : 3;
      auto num = [&](double v) { return fmt::format("{:.{}f}", v, digits); };
      auto signed_num = [&](double v) { return fmt::format("{:+.{}f}", v, digits); };
      out += "| " + row.label + " | " + metric + " | " + num(scale * row.published) + " | " +
             num(scale * row.predicted) + " | " + signed_num(scale * row.error) + " |";
      if (event && !row.has_analytical) {
        out += " — | — |";
      } else if (event) {
        out += ' ';
        out += num(scale * row.analytical);
        out += " | ";
        out += signed_num(scale * (row.analytical - row.published));
        out += " |";
      }
      out += "\n";
    }
    out += "\n";
  }
  out +=
      "## Where the error lies: per-sample work vs per-step cost\n\n"
      "Within one global batch, Table 2 varies only the GPU count, so each system's\n"
      "iteration time splits into x * (seconds per sample per GPU) + (seconds per step that\n"
      "do not shrink with x), x = global batch / GPUs. The same least-squares split of\n"
      "the published and of the predicted times (a diagnosis of this report, nothing\n"
      "feeds back into the model):\n\n";
  out += decomposition_table(r);
  out += "\n";
  out += kWhyItMisses;
  return out;
}

}  // namespace megascale::calibrate
