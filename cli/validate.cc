// cli/validate.cc: run the paper's scenarios and compare with published figures.
#include "cli/validate.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "model/estimator.h"
#include "model/scenario.h"

namespace megascale::cli {
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

ValidationReport run_validation(const std::string& scenario_dir) {
  ValidationReport r;
  Stats t2, t3, f9;
  std::map<std::string, double> predicted_time;   // by case stem
  std::vector<double> t3_pred, t3_pub;
  for (const PaperCase& pc : paper_cases()) {
    const model::Scenario s = model::load_scenario(scenario_dir + "/" + pc.file);
    const model::Estimate e = model::estimate(s);
    r.rows.push_back({stem(pc.file), pc.table, pc.label, "mfu", pc.published_mfu, e.mfu,
                      e.mfu - pc.published_mfu});
    if (pc.published_iteration_s > 0) {
      r.rows.push_back({stem(pc.file), pc.table, pc.label, "iteration_time_s",
                        pc.published_iteration_s, e.iteration_time_s,
                        e.iteration_time_s - pc.published_iteration_s});
    }
    predicted_time[stem(pc.file)] = e.iteration_time_s;
    const double err = e.mfu - pc.published_mfu;
    if (pc.table == "table2") t2.add(err);
    if (pc.table == "table3") {
      t3.add(err);
      t3_pred.push_back(e.mfu);
      t3_pub.push_back(pc.published_mfu);
    }
    if (pc.table == "fig9") f9.add(err);
  }
  // Speedup MegaScale / Megatron-LM per Table 2 row (ratio of iteration times).
  Stats speedup;
  for (const PaperCase& pc : paper_cases()) {
    if (pc.table != "table2" || pc.file.find("megatron") == std::string::npos) continue;
    const std::string g = pc.file.substr(std::string("table2-megatron-").size());
    const PaperCase* other = nullptr;
    for (const PaperCase& q : paper_cases()) {
      if (q.file == "table2-megascale-" + g) other = &q;
    }
    if (other == nullptr) continue;
    const double pub = pc.published_iteration_s / other->published_iteration_s;
    const double pred = predicted_time[stem(pc.file)] / predicted_time[stem(other->file)];
    r.rows.push_back({"table2-speedup-" + stem(g), "table2", "speedup " + stem(g) + " GPUs",
                      "speedup", pub, pred, pred - pub});
    speedup.add(pred - pub);
  }
  ValidationSummary& sm = r.summary;
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
  }
  return r;
}

std::string validation_markdown(const ValidationReport& r) {
  std::string out;
  char buf[512];
  out +=
      "# Validation: predicted vs published (MegaScale, NSDI'24)\n\n"
      "Generated by `megascale validate --write` from the scenarios in `scenarios/paper/`\n"
      "(analytical fidelity, `model/estimator.h`). Published figures: MegaScale Tables 2\n"
      "and 3 and Figure 9, as collected in `../shared/REFERENCE.md`. One hardware profile\n"
      "(A100-SXM4-80GB, spec sheets and public microbenchmarks, `model/hardware.cc`) serves\n"
      "every case; nothing is fitted to these figures. Errors are predicted - published;\n"
      "MFU errors in percentage points.\n\n";
  const ValidationSummary& s = r.summary;
  out += "## Summary\n\n| set | mean abs MFU error (points) | max abs (points) |\n|---|---|---|\n";
  std::snprintf(buf, sizeof buf, "| Table 2 (16 cells) | %.2f | %.2f |\n", 100 * s.table2_mean_abs_mfu_error,
                100 * s.table2_max_abs_mfu_error);
  out += buf;
  std::snprintf(buf, sizeof buf, "| Table 3 (9 rows) | %.2f | %.2f |\n", 100 * s.table3_mean_abs_mfu_error,
                100 * s.table3_max_abs_mfu_error);
  out += buf;
  std::snprintf(buf, sizeof buf, "| Figure 9 (6 values) | %.2f | %.2f |\n\n", 100 * s.fig9_mean_abs_mfu_error,
                100 * s.fig9_max_abs_mfu_error);
  out += buf;
  std::snprintf(buf, sizeof buf,
                "Table 2 speedup (MegaScale / Megatron-LM) max abs error: %.3f. Table 3 increments "
                "with the wrong sign: %d of 8.\n\n",
                s.table2_max_abs_speedup_error, s.table3_wrong_sign_increments);
  out += buf;
  const char* titles[][2] = {{"table2", "Table 2: 175B strong scaling"},
                             {"table3", "Table 3: 175B ablation on 256 GPUs (cumulative)"},
                             {"fig9", "Figure 9: 530B weak scaling"}};
  for (const auto& t : titles) {
    out += std::string("## ") + t[1] + "\n\n| case | metric | published | predicted | error |\n|---|---|---|---|---|\n";
    for (const ValidationRow& row : r.rows) {
      if (row.table != t[0]) continue;
      if (row.metric == "mfu") {
        std::snprintf(buf, sizeof buf, "| %s | MFU %% | %.1f | %.1f | %+.1f |\n", row.label.c_str(),
                      100 * row.published, 100 * row.predicted, 100 * row.error);
      } else if (row.metric == "iteration_time_s") {
        std::snprintf(buf, sizeof buf, "| %s | iteration s | %.2f | %.2f | %+.2f |\n", row.label.c_str(),
                      row.published, row.predicted, row.error);
      } else {
        std::snprintf(buf, sizeof buf, "| %s | speedup | %.3f | %.3f | %+.3f |\n", row.label.c_str(),
                      row.published, row.predicted, row.error);
      }
      out += buf;
    }
    out += "\n";
  }
  out +=
      "## Why the analytical fidelity misses\n\n"
      "- **No fabric contention, no stragglers.** Data-parallel and pipeline traffic run\n"
      "  at the NIC's contention-free NCCL bus bandwidth (24 GB/s per 200G NIC); ECMP\n"
      "  collisions, congestion control and the slowest of thousands of GPUs gating every\n"
      "  step are left to the event fidelity (`megascale simulate --fidelity event`,\n"
      "  sim/ with network/). These effects grow with the job, and so does the error\n"
      "  (compare the 256- and 12,288-GPU rows of Table 2): at 8,192-12,288 GPUs the\n"
      "  published MFU falls while the analytical one barely moves.\n"
      "- **Compute efficiency from microbenchmarks.** GEMMs reach at most 85% of peak\n"
      "  (cuBLAS microbenchmarks) minus tile/wave quantisation; real training kernels also\n"
      "  suffer from clock throttling and from communication kernels sharing SMs, which\n"
      "  the analytical model ignores.\n"
      "- **Assumed inputs.** The sliding window (1,024 tokens) is not printed in the paper;\n"
      "  synchronous data loading costs an assumed 1 ms per sample (`HostModel`).\n"
      "- **MFU accounting.** Our MFU uses 72 B s L h^2 (1 + s/6h + V/12Lh) for both systems.\n"
      "  The published Megatron-LM MFUs match this formula applied to the published iteration\n"
      "  times to within 0.2 points; the published MegaScale MFUs are 0.2-1.0 points lower\n"
      "  than the formula gives for their own iteration times (their FLOPs count for the\n"
      "  sliding-window model is slightly smaller), so part of each MegaScale error is\n"
      "  accounting, not timing; the iteration-time rows show the timing error alone.\n";
  return out;
}

}  // namespace megascale::cli
