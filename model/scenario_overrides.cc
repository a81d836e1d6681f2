// model/scenario_overrides.cc: see scenario_overrides.h.
#include "model/scenario_overrides.h"

#include <cctype>
#include <utility>

#include "model/scenario.h"

namespace megascale::model {
namespace {

constexpr std::string_view kPrefix = "--set ";

bool bare_key_part(const std::string& part) {
  if (part.empty()) return false;
  for (char c : part) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  }
  return true;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

// `key = value` as TOML under the source name `source` (dotted keys create the
// tables, which then carry that source too); a value that is not valid TOML is
// taken as a string.
toml::table parse_override(const std::string& key, const std::string& value, const std::string& source) {
  try {
    return toml::parse(key + " = " + value, std::string_view(source));
  } catch (const toml::parse_error&) {
    try {
      return toml::parse(key + " = " + quoted(value), std::string_view(source));
    } catch (const toml::parse_error& e) {
      throw ScenarioError(source, 0, 0, key, "cannot read the value: " + std::string(e.description()));
    }
  }
}

// Moves every key of `from` into `into`: tables present in both are merged, any
// other node replaces what was there (keeping its source).
void merge(toml::table&& from, toml::table* into, const std::string& prefix, const std::string& source) {
  for (auto&& [k, node] : from) {
    const std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    toml::node* existing = into->get(k.str());
    if (node.is_table() && existing != nullptr && existing->is_table()) {
      merge(std::move(*node.as_table()), existing->as_table(), key, source);
      continue;
    }
    if (existing != nullptr && existing->is_table() != node.is_table()) {
      throw ScenarioError(source, 0, 0, key,
                          existing->is_table() ? "is a table in the scenario; set one of its keys"
                                               : "is a value in the scenario, not a table");
    }
    node.visit([&](auto&& n) { into->insert_or_assign(k.str(), std::move(n)); });
  }
}

}  // namespace

bool is_override_source(std::string_view source) { return source.rfind(kPrefix, 0) == 0; }

void apply_overrides(const std::vector<std::string>& overrides, toml::table* root) {
  for (const std::string& o : overrides) {
    const std::string source = std::string(kPrefix) + o;
    const size_t eq = o.find('=');
    if (eq == std::string::npos) {
      throw ScenarioError(source, 0, 0, "", "an override is KEY=VALUE, e.g. parallel.dp=96");
    }
    const std::string key = o.substr(0, eq);
    size_t begin = 0;
    while (true) {
      const size_t dot = key.find('.', begin);
      const std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
      if (!bare_key_part(part)) {
        throw ScenarioError(source, 0, 0, key,
                            "key parts are letters, digits, '_' and '-', separated by '.' (e.g. parallel.dp)");
      }
      if (dot == std::string::npos) break;
      begin = dot + 1;
    }
    merge(parse_override(key, o.substr(eq + 1), source), root, "", source);
  }
}

}  // namespace megascale::model
