// model/toml_section.h: reading one table of a TOML input file (scenario,
// hardware profile) with errors that name the file, line, column, dotted key and
// reason.
//
// defines: Position, position_of, Section, and the reason helpers
// (unknown_name_reason with "did you mean", not_allowed_reason, range_reason).
//
// A Section wraps one toml::table with its dotted name and file. Readers return
// nullopt for an absent key and throw ScenarioError (model/scenario.h) for a
// present one of the wrong type or out of range; fail() names the position of
// a key, or of its nearest enclosing table when it is absent. Values set by a
// `--set` override (model/scenario_overrides.h) are named by that override
// instead of a line.
//
// Thread-safety: a Section refers to its table and file name; use it while they live.
#pragma once

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/scenario.h"
#include "model/scenario_overrides.h"

namespace megascale::model {

// "file:line:column: key: reason" (line/column left out when 0).
std::string format_message(const std::string& file, int line, int column, const std::string& key,
                           const std::string& reason);
// The TOML text of file `source` as a table; a syntax error is a ScenarioError
// at its line and column (scenarios and hardware profiles alike).
toml::table parse_toml(std::string_view toml_text, const std::string& source);
// "integer", "table", ... for error messages.
std::string_view type_name(toml::node_type type);
// Levenshtein distance: insertions, deletions and substitutions.
int edit_distance(std::string_view a, std::string_view b);
// "unknown key 'hiden' (did you mean 'hidden'?)": suggests the closest known
// name within edit distance 2, the first listed on a tie.
std::string unknown_name_reason(std::string_view kind, std::string_view name,
                                std::span<const std::string_view> known);
// "value "geluu" not allowed (allowed: "gelu", "swiglu")"
std::string not_allowed_reason(std::string_view value, std::span<const std::string_view> allowed);
std::string range_reason(int64_t value, int min_value, int max_value);

struct Position {
  int line = 0;
  int column = 0;
  std::string file;  // empty: the file being read; else the override that set it
};

inline Position position_of(const toml::node& node) {
  const toml::source_region& region = node.source();
  if (region.path && is_override_source(*region.path)) return {0, 0, *region.path};
  return {static_cast<int>(region.begin.line), static_cast<int>(region.begin.column), {}};
}

// One table of the scenario being read: its dotted name (empty for the root)
// and the file it came from, so that every error names file, line, column and
// key. Readers return nullopt for an absent key and throw ScenarioError for a
// present one of the wrong type or out of range.
class Section {
 public:
  Section(const toml::table& table, std::string name, const std::string& file)
      : table_(table), name_(std::move(name)), file_(file) {}

  const std::string& file() const { return file_; }
  // The node at `key`, or nullptr (for callers that need its position).
  const toml::node* node(std::string_view key) const { return table_.get(key); }
  // True when `key`'s value came from a --set override, not from the file.
  bool from_override(std::string_view key) const {
    const toml::node* n = table_.get(key);
    return n != nullptr && !position_of(*n).file.empty();
  }

  // The dotted key of `key` inside this table, e.g. "parallel.tp".
  std::string dotted(std::string_view key) const {
    return name_.empty() ? std::string(key) : name_ + "." + std::string(key);
  }

  // Fails at the position of `key` (a dotted path relative to this table), or
  // of its nearest enclosing table present in the file when it is absent.
  [[noreturn]] void fail(std::string_view key, std::string reason) const {
    const Position at = position_of_path(key);
    throw ScenarioError(at.file.empty() ? file_ : at.file, at.line, at.column, dotted(key), std::move(reason));
  }

  // Fails at the position of `node`, the value of `key` in this table.
  [[noreturn]] void fail_at(const toml::node& node, std::string_view key,
                            std::string reason) const {
    const Position at = position_of(node);
    throw ScenarioError(at.file.empty() ? file_ : at.file, at.line, at.column, dotted(key), std::move(reason));
  }

  [[noreturn]] void fail_missing(std::string_view key, std::string_view detail = {}) const {
    std::string reason = "required key missing";
    if (!detail.empty()) reason += ": " + std::string(detail);
    fail(key, std::move(reason));
  }

  void reject_unknown_keys(std::span<const std::string_view> known) const {
    for (auto&& [key, node] : table_) {
      if (std::find(known.begin(), known.end(), key.str()) != known.end()) continue;
      fail_at(node, key.str(),
              unknown_name_reason(node.is_table() ? "table" : "key", key.str(), known));
    }
  }

  // For the tables later versions will define: present is fine, any key is not.
  void reject_every_key() const {
    for (auto&& [key, node] : table_) {
      fail_at(node, key.str(), "key not supported yet by this version");
    }
  }

  std::optional<Section> subsection(std::string_view key) const {
    const toml::node* node = find(key, toml::node_type::table, "a table");
    if (node == nullptr) return std::nullopt;
    return Section(*node->as_table(), dotted(key), file_);
  }

  Section required_subsection(std::string_view key) const {
    std::optional<Section> section = subsection(key);
    if (!section) fail_missing(key);
    return *section;
  }

  std::optional<int> integer(std::string_view key, int min_value, int max_value = INT_MAX) const {
    const toml::node* node = find(key, toml::node_type::integer, "an integer");
    if (node == nullptr) return std::nullopt;
    const int64_t value = node->as_integer()->get();
    if (value < min_value || value > max_value) {
      fail_at(*node, key, range_reason(value, min_value, max_value));
    }
    return static_cast<int>(value);
  }

  int required_integer(std::string_view key, int min_value, int max_value = INT_MAX) const {
    std::optional<int> value = integer(key, min_value, max_value);
    if (!value) fail_missing(key);
    return *value;
  }

  // A float or an integer, finite and > 0.
  std::optional<double> positive_number(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    return number_value(*node, key, /*allow_zero=*/false);
  }

  // A float or an integer, finite and >= 0.
  std::optional<double> non_negative_number(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    return number_value(*node, key, /*allow_zero=*/true);
  }

  // One finite number > 0, or a non-empty array of them; each value with its
  // node, for errors about one element.
  struct NumberAt {
    double value;
    const toml::node* node;
  };
  std::optional<std::vector<NumberAt>> positive_numbers(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    std::vector<NumberAt> values;
    if (const toml::array* array = node->as_array()) {
      if (array->empty()) fail_at(*node, key, "expected a number or a non-empty array, got []");
      for (const toml::node& element : *array) {
        values.push_back({number_value(element, key, /*allow_zero=*/false), &element});
      }
    } else {
      if (!node->is_number()) fail_at(*node, key, expected("a number or an array", *node));
      values.push_back({number_value(*node, key, /*allow_zero=*/false), node});
    }
    return values;
  }

  // A duration: a number of seconds (>= 0) or a string "90s", "15m", "2h", "21d".
  std::optional<double> duration_s(std::string_view key) const {
    const toml::node* node = table_.get(key);
    if (node == nullptr) return std::nullopt;
    if (node->is_number()) return number_value(*node, key, /*allow_zero=*/true);
    if (!node->is_string()) fail_at(*node, key, expected("a duration (seconds or \"15m\")", *node));
    const std::optional<double> v = parse_duration_s(node->as_string()->get());
    if (!v) {
      fail_at(*node, key,
              "expected a duration like 90, \"90s\", \"15m\", \"2h\" or \"21d\", got \"" +
                  node->as_string()->get() + "\"");
    }
    return v;
  }

  // A number in [0, 1].
  std::optional<double> fraction(std::string_view key) const {
    const std::optional<double> v = non_negative_number(key);
    if (v && *v > 1.0) fail(key, "must be in [0, 1], got " + fmt::format("{}", *v));
    return v;
  }

  // The array of tables at `key` (e.g. [[failures.faults]]), each as a Section.
  std::vector<Section> table_array(std::string_view key) const {
    std::vector<Section> out;
    const toml::node* node = table_.get(key);
    if (node == nullptr) return out;
    const toml::array* array = node->as_array();
    if (array == nullptr) fail_at(*node, key, expected("an array of tables", *node));
    for (const toml::node& element : *array) {
      if (!element.is_table()) fail_at(element, key, expected("a table", element));
      out.emplace_back(*element.as_table(), dotted(key), file_);
    }
    return out;
  }

  std::optional<bool> boolean(std::string_view key) const {
    const toml::node* node = find(key, toml::node_type::boolean, "a boolean");
    if (node == nullptr) return std::nullopt;
    return node->as_boolean()->get();
  }

  std::optional<std::string> string(std::string_view key) const {
    const toml::node* node = find(key, toml::node_type::string, "a string");
    if (node == nullptr) return std::nullopt;
    return node->as_string()->get();
  }

  // A string that must be one of `allowed`.
  std::optional<std::string> choice(std::string_view key,
                                    std::span<const std::string_view> allowed) const {
    std::optional<std::string> value = string(key);
    if (value && std::find(allowed.begin(), allowed.end(), *value) == allowed.end()) {
      fail(key, not_allowed_reason(*value, allowed));
    }
    return value;
  }

  // An enum written as its to_string() name; `values` are the ones allowed.
  template <class Enum>
  std::optional<Enum> enum_choice(std::string_view key, std::initializer_list<Enum> values) const {
    std::vector<std::string_view> names;
    for (Enum value : values) names.push_back(to_string(value));
    const std::optional<std::string> name = choice(key, names);
    if (!name) return std::nullopt;
    return *(values.begin() + (std::find(names.begin(), names.end(), *name) - names.begin()));
  }

 private:
  // The node at `key` or nullptr; throws when it is not of type `type`.
  const toml::node* find(std::string_view key, toml::node_type type,
                         std::string_view type_with_article) const {
    const toml::node* node = table_.get(key);
    if (node != nullptr && node->type() != type) {
      fail_at(*node, key, expected(type_with_article, *node));
    }
    return node;
  }

  double number_value(const toml::node& node, std::string_view key, bool allow_zero) const {
    if (!node.is_number()) fail_at(node, key, expected("a number", node));
    const double value = node.is_integer() ? static_cast<double>(node.as_integer()->get())
                                           : node.as_floating_point()->get();
    if (!(std::isfinite(value) && (allow_zero ? value >= 0.0 : value > 0.0))) {
      fail_at(node, key,
              std::string("must be a finite number ") + (allow_zero ? ">= 0" : "> 0") + ", got " +
                  fmt::format("{}", value));  // as written: "0", "-5", "1e-300" (to_string: "0.000000")
    }
    return value;
  }

  static std::string expected(std::string_view type_with_article, const toml::node& got) {
    return "expected " + std::string(type_with_article) + ", got " +
           std::string(type_name(got.type()));
  }

  Position position_of_path(std::string_view path) const {
    while (true) {
      if (toml::node_view<const toml::node> node = table_.at_path(path)) {
        return position_of(*node.node());
      }
      const size_t dot = path.rfind('.');
      if (dot == std::string_view::npos) break;
      path = path.substr(0, dot);
    }
    const Position own = position_of(table_);
    return own.line > 0 || !own.file.empty() ? own : Position{1, 0, {}};
  }

  const toml::table& table_;
  std::string name_;
  const std::string& file_;
};
}  // namespace megascale::model
