// base/number_text.h: the field helpers the text readers of users'
// measurements share (calibrate/nccl_tests.cc, calibrate/gemm_sweep.cc,
// calibrate/fit.cc): trim, lower case, a strict finite number, and a fraction
// written as a fraction or a percentage, and a size with a unit (the CLI's
// options); and fixed(), a report's number with its decimals.
// Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: pure functions.
#pragma once

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>

#include <fmt/format.h>

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

// `v` with `decimals` decimals for a report ("12.35"); from 1e15 up in
// magnitude in scientific notation ("1.200e+297"), where fixed notation would
// print hundreds of digits (an input far outside any real machine's range).
inline std::string fixed(double v, int decimals) {
  if (std::isfinite(v) && std::fabs(v) >= 1e15) return fmt::format("{:.3e}", v);
  return fmt::format("{:.{}f}", v, decimals);
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

// A size in bytes: a number with an optional unit. K, M, G, T and KiB, MiB, GiB,
// TiB are powers of 1024 (nccl-tests' -b/-e convention: 1G = 2^30); KB, MB, GB,
// TB powers of 1000; B or nothing, bytes. Units are case-insensitive. Throws
// std::invalid_argument with the reason (`net collective --bytes 1G`), also
// for a size that is not a whole number of bytes (1.5, 0.1K).
inline double size_bytes(const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument("'" + text + "' is not a size (e.g. 1G, 256M, 1GiB, 4096)");
  }
  std::string unit;
  for (size_t i = used; i < text.size(); ++i) {
    unit.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(text[i]))));
  }
  static const std::map<std::string, double> kUnits = {
      {"", 1.0},          {"B", 1.0},
      {"K", 0x1p10},      {"KIB", 0x1p10},  {"KB", 1e3},
      {"M", 0x1p20},      {"MIB", 0x1p20},  {"MB", 1e6},
      {"G", 0x1p30},      {"GIB", 0x1p30},  {"GB", 1e9},
      {"T", 0x1p40},      {"TIB", 0x1p40},  {"TB", 1e12}};
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    throw std::invalid_argument("'" + text + "': unknown unit '" + text.substr(used) +
                                "' (K, M, G, T = powers of 1024, also KiB..TiB; KB..TB = powers of 1000)");
  }
  const double bytes = v * it->second;
  if (!(bytes > 0) || !std::isfinite(bytes) || bytes > 0x1p60) {
    throw std::invalid_argument("'" + text + "' must be a positive size of at most 1 EiB");
  }
  // A fraction of a byte was rounded before (1.5 ran as 2 B, 1e-3G as 1073742).
  if (bytes != std::floor(bytes)) {
    throw std::invalid_argument(fmt::format("'{}' is {} bytes: a size is a whole number of bytes", text, bytes));
  }
  return bytes;
}

}  // namespace megascale::base
