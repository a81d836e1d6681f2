// tests/fuzz/mutator.h: deterministic mutations of scenario TOML text for the
// fuzz tests (tests/fuzz/scenario_fuzz_test.cc).
//
// defines: Mutator (mutate(): one to three edits of a seed scenario),
//          hostile_value(), scenario_keys()
//
// Every edit is drawn from base::SplitMix64 (the same numbers on every
// platform, unlike std:: distributions), so a case index and the seed files
// name the exact input: a failure reproduces by its index alone. The edits
// mix what breaks the parser (truncation, random bytes, wrong types, unknown
// keys) with what passes it and reaches the models (a single value set to 0,
// 1, a huge or tiny number, a line borrowed from another scenario's table):
// a fuzzer whose inputs all fail to parse tests only the parser.
//
// Thread-safety: a Mutator is used by one thread.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/splitmix64.h"

namespace megascale::fuzz {

// Values an edited key takes: the edges of TOML's integers and floats,
// non-finite floats, values a layout divides by (0, 1, -1, primes), and every
// wrong type (strings, booleans, arrays, inline tables, dates).
inline const std::vector<std::string>& hostile_values() {
  static const std::vector<std::string> values = {
      "0", "-1", "1", "2", "3", "7", "13", "64", "1000", "65536", "1e308", "-1e308", "1e-308", "5e-324",
      "nan", "-nan", "inf", "-inf", "0.5", "-0.0", "0.999999", "1.0000001", "1e9", "1e18", "123456789",
      "2147483647", "2147483648", "-2147483648", "4294967296", "9223372036854775807",
      "-9223372036854775808", "\"\"", "\"x\"", "\"megascale\"", "\"megatron\"", "\"none\"",
      "\"A100-SXM4-80GB\"", "\"cpu\"", "true", "false", "[]", "[1, 2]", "{}", "{ a = 1 }", "1979-05-27",
      "07:32:00", "\"" + std::string(300, 'a') + "\"", "\"\\u0000\""};
  return values;
}

// Numbers a mutated value takes when the aim is a scenario that still parses:
// small layouts and batch sizes the checks accept for some models.
inline const std::vector<std::string>& plausible_values() {
  static const std::vector<std::string> values = {"1", "2", "3", "4", "6", "8", "12", "16", "24", "32", "48",
                                                  "96", "128", "0.1", "0.9", "1.5", "1e-3", "true", "false"};
  return values;
}

// The "table.key" names a scenario text sets (lines `key = ...` under `[table]`),
// for --set overrides of known keys.
inline std::vector<std::string> scenario_keys(const std::string& text) {
  std::vector<std::string> keys;
  std::string table;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    at = end + 1;
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    if (line[0] == '[') {
      const size_t close = line.find(']');
      table = close == std::string::npos ? "" : line.substr(1, close - 1);
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    if (!key.empty()) keys.push_back(table.empty() ? key : table + "." + key);
  }
  return keys;
}

class Mutator {
 public:
  // `seeds`: the texts lines are borrowed from (cross-over between scenarios).
  Mutator(uint64_t seed, const std::vector<std::string>* seeds) : rng_(seed), seeds_(seeds) {}

  uint64_t next() { return rng_.next(); }
  // Uniform in [0, n); n > 0.
  size_t below(size_t n) { return static_cast<size_t>(rng_.next() % n); }
  bool one_in(size_t n) { return below(n) == 0; }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }

  // One to three edits of `text` (see the file comment), each named in *log.
  std::string mutate(std::string text, std::vector<std::string>* log) {
    const size_t edits = 1 + below(3);
    for (size_t i = 0; i < edits; ++i) text = edit(std::move(text), log);
    return text;
  }

 private:
  static std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    size_t at = 0;
    while (at <= text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      lines.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    return lines;
  }
  static std::string join_lines(const std::vector<std::string>& lines) {
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
    return out;
  }
  // Indices of the lines that set a key (`key = value`, not a comment or header).
  static std::vector<size_t> key_lines(const std::vector<std::string>& lines) {
    std::vector<size_t> out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const size_t first = lines[i].find_first_not_of(" \t");
      if (first == std::string::npos || lines[i][first] == '#' || lines[i][first] == '[') continue;
      if (lines[i].find('=') != std::string::npos) out.push_back(i);
    }
    return out;
  }

  std::string edit(std::string text, std::vector<std::string>* log) {
    std::vector<std::string> lines = split_lines(text);
    const std::vector<size_t> keyed = key_lines(lines);
    // Weights: value edits (kinds 0-2) are the most frequent, as they reach
    // the models; the rest mostly exercise the parser's errors.
    switch (below(14)) {
      case 0:
      case 1:
      case 2: {  // a value -> a hostile or a plausible one
        if (keyed.empty()) break;
        const size_t i = pick(keyed);
        const std::string& v = one_in(2) ? pick(hostile_values()) : pick(plausible_values());
        lines[i] = lines[i].substr(0, lines[i].find('=')) + "= " + v;
        log->push_back("line " + std::to_string(i + 1) + " value -> " + v.substr(0, 40));
        return join_lines(lines);
      }
      case 3: {  // delete a line
        const size_t i = below(lines.size());
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        log->push_back("delete line " + std::to_string(i + 1));
        return join_lines(lines);
      }
      case 4: {  // duplicate a line (a key set twice, a table opened twice)
        const size_t i = below(lines.size());
        const size_t to = below(lines.size() + 1);
        const std::string copy = lines[i];
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(to), copy);
        log->push_back("copy line " + std::to_string(i + 1) + " to " + std::to_string(to + 1));
        return join_lines(lines);
      }
      case 5: {  // swap two lines (a key moves to another table)
        const size_t i = below(lines.size()), j = below(lines.size());
        std::swap(lines[i], lines[j]);
        log->push_back("swap lines " + std::to_string(i + 1) + ", " + std::to_string(j + 1));
        return join_lines(lines);
      }
      case 6: {  // an unknown key, or an unknown table
        const size_t to = below(lines.size() + 1);
        const std::string line = one_in(2) ? "fuzz_unknown_key = 1" : "[fuzz_unknown_table]";
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(to), line);
        log->push_back("insert '" + line + "' at line " + std::to_string(to + 1));
        return join_lines(lines);
      }
      case 7:
      case 8: {  // a line of another scenario (a key of a table this one lacks)
        if (seeds_ == nullptr || seeds_->empty()) break;
        const std::vector<std::string> other = split_lines(pick(*seeds_));
        const std::vector<size_t> other_keyed = key_lines(other);
        if (other_keyed.empty()) break;
        const size_t from = pick(other_keyed);
        // Half the time with its table header, so the key lands in its own table.
        std::string table;
        for (size_t k = from; k-- > 0;) {
          if (other[k].rfind("[", 0) == 0) {
            table = other[k];
            break;
          }
        }
        const size_t to = below(lines.size() + 1);
        std::vector<std::string> add = {other[from]};
        if (!table.empty() && one_in(2)) add.insert(add.begin(), table);
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(to), add.begin(), add.end());
        log->push_back("borrow '" + (add.size() > 1 ? add[0] + " " : "") + other[from].substr(0, 60) +
                       "' at line " + std::to_string(to + 1));
        return join_lines(lines);
      }
      case 9: {  // truncate
        const size_t at = below(text.size() + 1);
        log->push_back("truncate at byte " + std::to_string(at));
        return text.substr(0, at);
      }
      case 10: {  // random bytes (any of the 256), inserted
        const size_t at = below(text.size() + 1);
        const size_t n = 1 + below(8);
        std::string bytes;
        for (size_t k = 0; k < n; ++k) bytes.push_back(static_cast<char>(next() & 0xff));
        log->push_back(std::to_string(n) + " random bytes at byte " + std::to_string(at));
        return text.insert(at, bytes);
      }
      case 11: {  // one byte replaced
        if (text.empty()) break;
        const size_t at = below(text.size());
        text[at] = static_cast<char>(next() & 0xff);
        log->push_back("byte " + std::to_string(at) + " replaced");
        return text;
      }
      case 12: {  // a digit run -> a hostile number (reaches numbers in arrays and inline tables)
        std::vector<std::pair<size_t, size_t>> runs;  // (start, length)
        for (size_t k = 0; k < text.size();) {
          if (!std::isdigit(static_cast<unsigned char>(text[k]))) {
            ++k;
            continue;
          }
          size_t e = k;
          while (e < text.size() && (std::isdigit(static_cast<unsigned char>(text[e])) || text[e] == '.')) ++e;
          runs.emplace_back(k, e - k);
          k = e;
        }
        if (runs.empty()) break;
        const auto [start, length] = pick(runs);
        const std::string& v = pick(hostile_values());
        log->push_back("number at byte " + std::to_string(start) + " -> " + v.substr(0, 40));
        return text.replace(start, length, v);
      }
      case 13: {  // a key renamed (a typo: last letter dropped or doubled)
        if (keyed.empty()) break;
        const size_t i = pick(keyed);
        const size_t eq = lines[i].find('=');
        size_t end = eq;
        while (end > 0 && std::isspace(static_cast<unsigned char>(lines[i][end - 1]))) --end;
        if (end == 0) break;
        if (one_in(2)) {
          lines[i].erase(end - 1, 1);
        } else {
          lines[i].insert(end, 1, lines[i][end - 1]);
        }
        log->push_back("rename the key of line " + std::to_string(i + 1));
        return join_lines(lines);
      }
    }
    // The chosen edit did not apply (no key line, no digits): delete a line.
    if (!lines.empty()) {
      const size_t i = below(lines.size());
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
      log->push_back("delete line " + std::to_string(i + 1));
    }
    return join_lines(lines);
  }

  base::SplitMix64 rng_;
  const std::vector<std::string>* seeds_;
};

}  // namespace megascale::fuzz
