// engine/micro_launch.cc: see micro_launch.h.
#include "engine/micro_launch.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace megascale::engine {

std::vector<std::string> micro_mpirun_args(const std::string& micro_binary, const MicroLaunch& m) {
  if (!m.cuda && !m.gemm_csv.empty()) throw std::invalid_argument("--gemm-csv needs --device cuda");
  if (!m.cuda && !m.engine_profile.empty()) throw std::invalid_argument("--engine-profile needs --device cuda");
  if (!m.engine_profile.empty() && m.scenarios.empty())
    throw std::invalid_argument("--engine-profile needs the SCENARIO files whose calls it measures");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int ranks = m.cuda ? 1 : m.ranks > 0 ? m.ranks : std::min(cores, 8);
  std::vector<std::string> a = {"--oversubscribe", "-np", std::to_string(ranks), micro_binary};
  if (m.cuda) a.insert(a.end(), {"--device", "cuda"});
  if (!m.gemm_csv.empty()) a.insert(a.end(), {"--gemm-csv", m.gemm_csv});
  if (!m.engine_profile.empty()) {  // the engine's calls alone: no sweep, no profile file
    a.insert(a.end(), {"--engine-profile", m.engine_profile});
    a.insert(a.end(), m.scenarios.begin(), m.scenarios.end());
    return a;
  }
  // "-" writes the cpu profile to stdout; the default is a file (it is ~2 MB).
  const std::string out = !m.out_file.empty() ? m.out_file : m.cuda ? "cuda-micro.toml" : "cpu-profile.toml";
  if (m.cuda || out != "-") a.insert(a.end(), {"--out", out});
  if (m.quick) a.push_back("--quick");
  if (!m.cuda && m.single) a.push_back("--single");
  if (!m.cuda) a.insert(a.end(), m.scenarios.begin(), m.scenarios.end());
  return a;
}

}  // namespace megascale::engine
