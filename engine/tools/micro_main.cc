// engine/tools/micro_main.cc: `megascale-micro [--out FILE] [--quick] [--single] [SCENARIO...]`,
// one rank of `megascale calibrate micro`.
//
// Started under mpirun by `megascale calibrate micro` (cli/calibrate_command.cc);
// every rank runs engine/microbench.h's plan (the default sweep, or the quick
// one, plus the exact shapes of the scenarios given) on the engine's CpuDevice
// and MPI Comm, and world rank 0 writes the cpu profile (model/profile.h) to
// FILE (default: stdout) with progress on stderr. Exit 2 for bad input (a
// scenario, an option), 1 otherwise.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/options.h"
#include "base/text_file.h"
#include "engine/comm_mpi.h"
#include "engine/device_cpu.h"
#include "engine/device_factory.h"
#include "engine/engine_tables.h"
#include "engine/microbench.h"
#include "engine/microbench_cuda.h"
#include "model/profile.h"
#include "model/scenario.h"

namespace {

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// --device cuda: one process, no MPI; the kernels timed with CUDA events
// (engine/microbench_cuda.h); the report to --out (or stdout). Exit 2 without
// a GPU, naming why. --gemm-csv: the GEMM points also as a GEMM sweep CSV
// for `megascale calibrate import --gemm-csv`.
int cuda_micro(const std::string& out_path, const std::string& gemm_csv, bool quick) {
  using namespace megascale;
  const std::string why = engine::cuda_unavailable_reason();
  if (!why.empty()) {
    std::cerr << "megascale calibrate micro: --device cuda: no CUDA device: " << why << "\n";
    return 2;
  }
  try {
    const engine::CudaMicroResult r = engine::run_cuda_microbenchmarks(quick);
    // The bf16 dense peak of the shipped profile for this GPU when one matches
    // (H200 / H100: 989 TFLOP/s; A100: 312), else 0 (no fraction written).
    double peak = 0;
    if (r.device.find("H200") != std::string::npos || r.device.find("H100") != std::string::npos) peak = 989.0;
    if (r.device.find("A100") != std::string::npos) peak = 312.0;
    const std::string text = engine::write_cuda_micro_report(r, hostname(), today(), peak);
    if (out_path.empty() || out_path == "-") {
      std::cout << text;
    } else {
      if (!base::write_text_atomically(out_path, text)) {
        std::cerr << "megascale calibrate micro: cannot write " << out_path << "\n";
        return 1;
      }
    }
    if (!gemm_csv.empty()) {
      if (!base::write_text_atomically(gemm_csv, engine::write_cuda_gemm_sweep_csv(r, hostname(), today()))) {
        std::cerr << "megascale calibrate micro: cannot write " << gemm_csv << "\n";
        return 1;
      }
    }
    for (const engine::CudaMicroPoint& p : r.points) {
      fmt::print(stderr, "  {:<20} {:<33} {:10.3f} ms  {:8.1f} TFLOP/s  {:8.1f} GB/s\n", p.op, p.shape,
                 1e3 * p.seconds, p.flops > 0 ? p.flops / p.seconds / 1e12 : 0.0,
                 p.bytes > 0 ? p.bytes / p.seconds / 1e9 : 0.0);
    }
    std::cerr << "megascale calibrate micro: " << r.points.size() << " CUDA points on " << r.device
              << (out_path.empty() || out_path == "-" ? "" : "; wrote " + out_path) << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "megascale calibrate micro: --device cuda: " << e.what() << "\n";
    return 1;
  }
}

// --device cuda --engine-profile FILE SCENARIO...: the tables of the
// engine's own calls for those scenarios (engine/engine_tables.h), measured
// on the CudaDevice their [train] section asks for, as a GPU profile with
// engine_calls = 1 (`calibrate check` then predicts their runs call by call).
// Exit 2 for bad input (a scenario, mixed [train] devices) or no GPU.
int cuda_engine_profile(const std::string& out_path, const std::vector<std::string>& files) {
  using namespace megascale;
  std::vector<model::Scenario> scenarios;
  try {
    for (const std::string& f : files) {
      scenarios.push_back(model::load_scenario(f));
      model::check_trainable(scenarios.back());
    }
  } catch (const model::ScenarioError& e) {
    std::cerr << "megascale calibrate micro: " << e.what() << "\n";
    return 2;
  }
  if (scenarios.empty()) {
    std::cerr << "megascale calibrate micro: --engine-profile needs the SCENARIO files whose calls it measures\n";
    return 2;
  }
  const model::TrainConfig& t = scenarios.front().train;
  for (size_t i = 1; i < scenarios.size(); ++i) {
    const model::TrainConfig& u = scenarios[i].train;
    if (u.precision != t.precision || u.attention != t.attention ||
        model::hardware_profile(scenarios[i]).name != model::hardware_profile(scenarios.front()).name) {
      std::cerr << "megascale calibrate micro: --engine-profile: " << files[i] << " differs from " << files[0]
                << " in [train] precision / attention or [hardware] gpu: one profile measures one device set-up\n";
      return 2;
    }
  }
  const std::string why = engine::cuda_unavailable_reason();
  if (!why.empty()) {
    std::cerr << "megascale calibrate micro: --device cuda: no CUDA device: " << why << "\n";
    return 2;
  }
  try {
    engine::DeviceOptions o;
    o.name = "cuda";
    o.precision = t.precision;
    o.attention = t.attention;
    const std::unique_ptr<engine::Device> device = engine::make_device(o);
    const engine::EngineTables tables = engine::measure_engine_tables(*device, scenarios);
    const model::GpuProfile& base = model::hardware_profile(scenarios.front());
    const std::string device_name = engine::device_model_name(*device);
    const model::GpuProfile p =
        engine::engine_device_profile(tables, base, base.name + "-engine-" + t.precision, device_name, files,
                                      hostname(), today());
    const std::string text = model::write_profile(p);
    (void)model::parse_profile(text, out_path);  // never write what cannot be read back
    if (!base::write_text_atomically(out_path, text)) {
      std::cerr << "megascale calibrate micro: cannot write " << out_path << "\n";
      return 1;
    }
    std::cerr << "megascale calibrate micro: " << tables.gemm.size() << " GEMM, " << tables.attention.size()
              << " attention, " << tables.kernels.size() << " kernel points of the engine's calls on " << device_name
              << " in " << static_cast<int>(tables.seconds) << " s; wrote " << out_path << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "megascale calibrate micro: --engine-profile: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace megascale;
  const base::Command command = {
      "", "[--out FILE] [--quick] [--single] [--device cpu|cuda] [--gemm-csv FILE] [--engine-profile FILE] [SCENARIO...]",
      "the engine's kernels and collectives, timed (normally started by `megascale calibrate micro`)",
      {{"--out", base::Kind::kText, "FILE", "the profile (default: stdout)"},
       {"--quick", base::Kind::kFlag, "", "a coarser sweep"},
       {"--single", base::Kind::kFlag, "", "every rank alone only"},
       {"--device", base::Kind::kChoice, "cpu|cuda", "the device timed (default cpu)"},
       {"--gemm-csv", base::Kind::kText, "FILE", "cuda: the GEMM points also as a GEMM sweep CSV\n(for calibrate import --gemm-csv)"},
       {"--engine-profile", base::Kind::kText, "FILE",
        "cuda: the engine's own calls for the SCENARIOs, measured,\nas a GPU profile (engine_calls = 1) for calibrate check"},
       {"--help", base::Kind::kFlag, "", "this text"}}};
  base::ParsedArgs args;
  try {
    args = base::parse_args(command, std::vector<std::string>(argv + 1, argv + argc));
  } catch (const base::UsageError& e) {
    std::cerr << "megascale-micro: " << e.what() << "\n\n" << base::usage_text(command, "megascale-micro");
    return 2;
  }
  if (args.on("--help")) {
    std::cout << base::usage_text(command, "megascale-micro");
    return 0;
  }
  const std::string out_path = args.text("--out", ""), device = args.text("--device", "cpu");
  const bool quick = args.on("--quick"), single = args.on("--single");
  const std::vector<std::string>& scenarios = args.positional;
  const std::string gemm_csv = args.text("--gemm-csv", "");
  if (!gemm_csv.empty() && device != "cuda") {
    std::cerr << "megascale-micro: --gemm-csv needs --device cuda\n\n" << base::usage_text(command, "megascale-micro");
    return 2;
  }
  const std::string engine_profile = args.text("--engine-profile", "");
  if (!engine_profile.empty()) {
    if (device != "cuda") {
      std::cerr << "megascale-micro: --engine-profile needs --device cuda\n\n" << base::usage_text(command, "megascale-micro");
      return 2;
    }
    return cuda_engine_profile(engine_profile, scenarios);
  }
  if (device == "cuda") return cuda_micro(out_path, gemm_csv, quick);
  engine::MicroPlan plan = engine::default_micro_plan(quick);
  plan.concurrent = !single;
  try {
    for (const std::string& f : scenarios) {
      engine::add_scenario_shapes(model::load_scenario(f), &plan);
      plan.label += " + " + f;
    }
  } catch (const model::ScenarioError& e) {
    std::cerr << "megascale calibrate micro: " << e.what() << "\n";
    return 2;
  }
  engine::MpiEnvironment env(&argc, &argv);
  auto world = engine::MpiComm::world();
  const bool lead = world->rank() == 0;
  if (lead) {
    std::cerr << "megascale calibrate micro: " << world->size() << " rank(s), " << plan.gemms.size() << " GEMM shapes, "
              << plan.attention_seqs.size() * plan.attention_head_dims.size() << " attention shapes, "
              << plan.kernel_elements.size() << " kernel sizes, " << plan.collective_bytes.size()
              << " collective sizes (" << plan.label << ")\n";
  }
  try {
    const engine::MicroResult r = engine::run_microbenchmarks(
        engine::cpu_device(), *world, plan, [](const std::string& line) { std::cerr << "  " << line << "\n"; });
    if (lead) {
      const model::GpuProfile p = engine::micro_profile(r, plan, hostname(), today());
      const std::string text = model::write_profile(p);
      // Never write what cannot be read back.
      (void)model::parse_profile(text, out_path.empty() ? "<stdout>" : out_path);
      if (out_path.empty()) {
        std::cout << text;
      } else {
        if (!base::write_text_atomically(out_path, text)) {
          std::cerr << "megascale calibrate micro: cannot write " << out_path << "\n";
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
      std::cerr << "megascale calibrate micro: " << r.gemm.size() << " GEMM, " << r.attention.size()
                << " attention, " << r.kernels.size() << " kernel, " << r.collectives.size()
                << " collective points in " << static_cast<int>(r.seconds) << " s; peak "
                << p.peak_tflops * 1e3 << " GFLOP/s per core"
                << (out_path.empty() ? "" : "; wrote " + out_path) << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "megascale calibrate micro: rank " << world->rank() << ": " << e.what() << "\n" << std::flush;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 0;
}
