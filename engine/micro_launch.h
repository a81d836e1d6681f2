// engine/micro_launch.h: the mpirun command line that `megascale calibrate
// micro` hands to base::run_mpirun: megascale-micro (engine/tools/micro_main.cc)
// on the CPU, one MPI rank per core (at most 8), or as one process on the GPU
// (engine/microbench_cuda.h; megascale-micro says why when there is none).
//
// defines: MicroLaunch, micro_mpirun_args
#pragma once

#include <string>
#include <vector>

namespace megascale::engine {

struct MicroLaunch {
  bool cuda = false;
  int ranks = 0;                       // cpu: MPI ranks, 0 = the cores, at most 8; cuda: one process
  std::string out_file;                // "": cpu-profile.toml / cuda-micro.toml; "-": the cpu profile on stdout
  bool quick = false, single = false;  // a coarser sweep; (cpu) every rank alone only
  std::string gemm_csv;                // cuda: the GEMM points also as a GEMM sweep CSV
  std::string engine_profile;          // cuda: the scenarios' own calls as a GPU profile
  std::vector<std::string> scenarios;  // their exact shapes (cpu), or the calls measured (engine_profile)
};

// mpirun's arguments (options, then the program and its own). Throws
// std::invalid_argument for what megascale-micro does not run: --gemm-csv or
// --engine-profile without cuda, --engine-profile without scenarios.
std::vector<std::string> micro_mpirun_args(const std::string& micro_binary, const MicroLaunch& m);

}  // namespace megascale::engine
