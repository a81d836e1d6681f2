// model/scenario_overrides.h: `--set dotted.key=value` overrides of a scenario's
// TOML, applied before it is read (model/scenario.h load_scenario with overrides).
//
// Each override's value is parsed as TOML (a value that is not valid TOML is taken
// as a string) with the source name "--set <override>", and moved into the tree,
// so its node keeps that name and an error about it names the override rather
// than a line of the file. Internal to model/ (scenario.cc).
#pragma once

#include <toml++/toml.h>

#include <string>
#include <string_view>
#include <vector>

namespace megascale::model {

// True for the source names apply_overrides gives to the values it sets.
bool is_override_source(std::string_view source);

// Applies `overrides` in order to `root`, creating missing tables. Throws
// ScenarioError (file = the override) for one without '=', an empty key or key
// part, or a key that goes through a value that is not a table.
void apply_overrides(const std::vector<std::string>& overrides, toml::table* root);

}  // namespace megascale::model
