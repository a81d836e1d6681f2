// base/number_text.h: the field helpers the text readers of users'
// measurements share (calibrate/nccl_tests.cc, calibrate/gemm_sweep.cc,
// calibrate/fit.cc): trim, lower case, a strict finite number, and a fraction
// written as a fraction or a percentage (the CLI's options).
// Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace megascale::base {

// `s` without leading and trailing white space.
inline std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The whole of `s` as a finite number (leading white space skipped, as strtod
// does); nullopt when empty, followed by other text, infinite or NaN.
inline std::optional<double> finite_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A fraction written either way: "10%" -> 0.1, "0.1" -> 0.1 (`search
// --min-headroom 10%`); nullopt when not a finite number (with at most one
// trailing '%').
inline std::optional<double> fraction_or_percent(std::string s) {
  const bool percent = !s.empty() && s.back() == '%';
  if (percent) s.pop_back();
  const std::optional<double> v = finite_number(s);
  if (!v) return std::nullopt;
  return percent ? *v / 100 : *v;
}

}  // namespace megascale::base
