// model/toml_section.cc: see toml_section.h.
#include "model/toml_section.h"

namespace megascale::model {

toml::table parse_toml(std::string_view toml_text, const std::string& source) {
  try {
    return toml::parse(toml_text, std::string_view(source));
  } catch (const toml::parse_error& e) {
    const toml::source_position& at = e.source().begin;
    throw ScenarioError(source, static_cast<int>(at.line), static_cast<int>(at.column), "",
                        std::string(e.description()));
  }
}

std::string format_message(const std::string& file, int line, int column, const std::string& key,
                           const std::string& reason) {
  // Appended piece by piece: g++ 12 warns -Wrestrict (a false positive, GCC
  // bug 105329) on `s += ":" + std::to_string(n)` once this is inlined.
  std::string message = file;
  if (line > 0) message.append(":").append(std::to_string(line));
  if (line > 0 && column > 0) message.append(":").append(std::to_string(column));
  message.append(": ");
  if (!key.empty()) message.append(key).append(": ");
  return message.append(reason);
}

std::string_view type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::none: return "nothing";
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
  }
  return "unknown type";
}

// Levenshtein distance: insertions, deletions and substitutions.
int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j < row.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = above;
    }
  }
  return row.back();
}

// "unknown key 'hiden' (did you mean 'hidden'?)": suggests the closest known
// name within edit distance 2, the first listed on a tie.
std::string unknown_name_reason(std::string_view kind, std::string_view name,
                                std::span<const std::string_view> known) {
  constexpr int kMaxSuggestionDistance = 2;
  std::string reason = "unknown " + std::string(kind) + " '" + std::string(name) + "'";
  std::string_view closest;
  int closest_distance = kMaxSuggestionDistance + 1;
  for (std::string_view candidate : known) {
    const int distance = edit_distance(name, candidate);
    if (distance < closest_distance) {
      closest = candidate;
      closest_distance = distance;
    }
  }
  if (!closest.empty()) reason += " (did you mean '" + std::string(closest) + "'?)";
  return reason;
}

// "value "geluu" not allowed (allowed: "gelu", "swiglu")"
std::string not_allowed_reason(std::string_view value, std::span<const std::string_view> allowed) {
  std::string reason = "value \"" + std::string(value) + "\" not allowed (allowed: ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) reason += ", ";
    reason.append("\"").append(allowed[i]).append("\"");
  }
  return reason + ")";
}

std::string range_reason(int64_t value, int min_value, int max_value) {
  const std::string got = ", got " + std::to_string(value);
  if (max_value != INT_MAX) {
    return "must be in " + std::to_string(min_value) + ".." + std::to_string(max_value) + got;
  }
  if (value < min_value) return "must be >= " + std::to_string(min_value) + got;
  return "must be <= " + std::to_string(INT_MAX) + got;
}

}  // namespace megascale::model
