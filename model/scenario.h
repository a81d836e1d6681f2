// model/scenario.h: reading and validating scenario files (TOML, via TOML++).
//
// A scenario file describes one training job (DESIGN.md, contract 1). Every key
// is documented in scenarios/README.md. Unknown tables or keys, values of the
// wrong type or out of range, and impossible combinations (heads not divisible
// by tp, gpus != tp*pp*dp, ...) raise ScenarioError, whose message names the
// file, the line, the key and the reason, e.g.
//   scenarios/x.toml:12:1: parallel.tp: heads (128) not divisible by tp (3)
// Nothing is silently defaulted except the documented defaults.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"

namespace megascale::model {

class ScenarioError : public std::runtime_error {
 public:
  // line/column are 1-based; 0 means "not known" (e.g. a missing key, whose
  // position is that of its table, or a programmatic scenario).
  ScenarioError(std::string file, int line, int column, std::string key, std::string reason);

  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& key() const { return key_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string key_;
  std::string reason_;
};

// The line a scenario error read with --set `overrides` adds, "  (FILE as
// changed by --set K=V, --set ...)\n", when the error is located in the file: a
// rule between keys names one of them at its line there while another came from
// --set (`--set model.seq_len=3` against tp was reported at parallel.tp's line
// only). Empty without overrides or for an error located in an override.
std::string overrides_note(const ScenarioError& e, const std::vector<std::string>& overrides);

// Reads and validates a scenario file. Throws ScenarioError (also when the file
// cannot be read or is not valid TOML).
Scenario load_scenario(const std::string& path);

// Same, from text already in memory; `source` is the name used in errors.
Scenario parse_scenario(std::string_view toml_text, const std::string& source);

// With command-line overrides (`--set`), each "dotted.key=value", applied in order
// over the file's keys before anything is validated, so an override goes through
// the same checks as the file. The value is TOML ("parallel.dp=96",
// "hardware.gpu_speed_sigma=0.0", "optimizations.tp_overlap=false",
// 'hardware.gpu="H100-SXM5-80GB"'); a value that is not valid TOML is taken as a
// string ("hardware.gpu=H100-SXM5-80GB"). Missing tables are created. An error
// about an overridden value names the override ("--set parallel.dp=7: parallel.dp:
// ..."); a malformed override is a ScenarioError naming it.
Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides);
Scenario parse_scenario(std::string_view toml_text, const std::string& source,
                        const std::vector<std::string>& overrides);

// What the training engine (engine/pipeline_executor.h) cannot run in a layout
// the simulator accepts, as the key and the reason, or nullopt: recomputation
// (the engine keeps every activation), ZeRO-3, and more micro-batches x chunks
// than MPI's guaranteed p2p tags (32767) can number. The executor refuses the
// same on every rank; check_trainable says it before anything is launched.
struct EngineLimit {
  std::string key;
  std::string reason;
};
std::optional<EngineLimit> engine_limit(const ParallelConfig& p);

// Throws ScenarioError when the engine cannot train the scenario as written:
// the CPU engine (train.device = "cpu") needs gpu = "cpu" (its MFU is against a
// core's measured peak), the CUDA one a GPU profile (key hardware.gpu); dropout
// the engine would not apply; and engine_limit's layouts.
void check_trainable(const Scenario& s);

// The reason a parallel layout is impossible for this model, batch and cluster,
// or nullopt when it is possible. Used by the parser (which adds file/line/key)
// and by the parallelism search. Checks, in order: positive sizes; tp divides
// heads and kv_heads; tp <= gpus_per_node is NOT required here (search filters
// it); layers % (pp*vpp) == 0; gpus == tp*pp*dp; global_batch % (dp*micro_batch)
// == 0; when vpp > 1: pp > 1 and microbatches % pp == 0; sequence_parallel
// requires tp > 1 is NOT required (sp with tp=1 is a no-op); zero_stage in 0..3.
// `key` receives the dotted key the reason is about (e.g. "parallel.tp").
std::optional<std::string> check_layout(const ModelConfig& m, const ParallelConfig& p,
                                        int cluster_gpus, std::string* key = nullptr);

// Context parallelism is folded when a scenario is read (model/config.h
// ParallelConfig). The model one CP rank of `cp` runs, from a model folded for
// `folded_cp` (1: as written): seq_len / cp tokens whose attention spans the
// whole sequence (attention_span; 0 when cp = 1).
ModelConfig context_parallel_model(const ModelConfig& m, int folded_cp, int cp);

// `s` laid out as `p` (folded: p.dp and p.global_batch carry p.cp, as the
// parser leaves them), its model refolded for p.cp: what the search and its
// event-level refinement time for a layout.
Scenario with_layout(const Scenario& s, const ParallelConfig& p);

// The built-in default scenario: the 175B model of MegaScale Table 1 on 12,288
// A100-SXM4-80GB GPUs (TP 8, PP 8, VPP 6, DP 192, global batch 6144) with the
// given system ("megatron" or "megascale", model/system_preset.h).
Scenario default_scenario(const std::string& preset);

// Applies a preset's switch values to `o` (all switches and the optimizer).
// Throws std::invalid_argument for an unknown preset name.
void apply_preset(const std::string& preset, Optimizations* o);

}  // namespace megascale::model
