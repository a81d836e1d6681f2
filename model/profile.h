// model/profile.h: hardware profiles as data files, each value with its provenance.
//
// defines: Provenance, load_profile, parse_profile, write_profile,
// builtin_profile, builtin_profile_names, hardware_profile, kCpuKernels, kernel_has_backward,
// ProfileNumber, profile_numbers
//
// A profile describes one device the simulator can time work on: a GPU SKU
// (calibrate/profiles/A100-SXM4-80GB.toml, ...) or the CPU the engine runs on
// (calibrate/profiles/cpu.toml, written by `megascale calibrate micro`). The
// shipped profiles are compiled into the binary from those files (CMake embeds
// them), so `[hardware] gpu = "NAME"` works from any directory;
// `[hardware] profile = "PATH"` loads any profile file instead (a user's own
// measurements). The schema, documented in calibrate/profiles/README.md:
//
//   [profile]   name, kind ("gpu" | "cpu"), dtype ("bf16" | "fp32"), description
//   [values]    every scalar as { value = X, source = "spec" | "measured" |
//               "fitted" | "assumption", ... }: spec and assumption need `ref`
//               (the datasheet, or why); measured needs `ref` (the
//               microbenchmark), `host` and `date`; fitted needs `runs` (the
//               named runs it was fitted on) and `loo_error` (its leave-one-out
//               relative error).
//   [tables.X]  measured tables (model/profile_tables.h): gemm, attention,
//               kernels, collectives, protocols; each with its provenance keys,
//               `columns` (names) and `rows` (arrays in that order).
//
// A missing or malformed entry is a ScenarioError naming the profile file, the
// line, the dotted key and the reason, exactly as for scenario files.
//
// Thread-safety: builtin_profile() parses each embedded file once, on first use,
// under a mutex; profiles are immutable values afterwards.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/hardware.h"

namespace megascale::model {

// Reads and validates a profile file (ScenarioError on any problem).
GpuProfile load_profile(const std::string& path);
// Same, from text already in memory; `source` names it in errors.
GpuProfile parse_profile(std::string_view toml_text, const std::string& source);

// The profile as TOML in the schema above (every value with its provenance,
// every table); parse_profile(write_profile(p)) reproduces p.
std::string write_profile(const GpuProfile& p);

// A shipped profile by name; throws std::invalid_argument naming the known ones.
const GpuProfile& builtin_profile(const std::string& name);
// What an option documented as NAME|FILE names: the profile file when
// `name_or_file` is a regular file, else the shipped profile of that name.
GpuProfile profile_named_or_file(const std::string& name_or_file);
// Names of the shipped profiles (file stems under calibrate/profiles/).
std::vector<std::string> builtin_profile_names();
// The shipped files' text by name (what builtin_profile parsed).
std::string_view builtin_profile_text(const std::string& name);

// The profile a scenario runs on: hardware.profile when the scenario loaded
// one, else the shipped profile hardware.gpu names.
const GpuProfile& hardware_profile(const HardwareConfig& hw);
inline const GpuProfile& hardware_profile(const Scenario& s) { return hardware_profile(s.hardware); }

// The real-valued [values] entries of the schema (counts such as sm_count are
// left out), in the schema's order: key, member and meaning. What
// model/sensitivity.h changes one at a time.
struct ProfileNumber {
  std::string_view key;
  double GpuProfile::*member = nullptr;
  std::string_view meaning;
};
std::vector<ProfileNumber> profile_numbers();

// The kernels a CPU profile must measure (the engine's CpuDevice work outside
// GEMMs and attention), by the names model/op_cost.h gives them.
extern const std::vector<std::string> kCpuKernels;
// Kernels of kCpuKernels whose backward is a measurement of its own (the
// others are forward-only work).
bool kernel_has_backward(const std::string& kernel);

}  // namespace megascale::model
