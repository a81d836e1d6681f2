// calibrate/gemm_sweep.cc: see gemm_sweep.h.
#include "calibrate/gemm_sweep.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include "base/number_text.h"
#include "calibrate/csv_line.h"
#include "base/text_file.h"

namespace megascale::calibrate {
namespace {

[[noreturn]] void fail(const std::string& source, int line, const std::string& why) {
  throw ImportError(source + ":" + std::to_string(line) + ": " + why);
}

[[noreturn]] void fail_col(const std::string& source, int line, const std::string& col,
                           const std::string& why) {
  fail(source, line, "column '" + col + "': " + why);
}

std::string trim(std::string_view s) { return std::string(base::trim(s)); }
using base::lower;

std::string normalise_dtype(const std::string& raw) {
  static const std::map<std::string, std::string> names = {
      {"fp32", "fp32"},         {"f32", "fp32"},         {"float", "fp32"},    {"float32", "fp32"},
      {"tf32", "tf32"},         {"fp16", "fp16"},        {"f16", "fp16"},      {"half", "fp16"},
      {"float16", "fp16"},      {"bf16", "bf16"},        {"bfloat16", "bf16"}, {"fp8_e4m3", "fp8_e4m3"},
      {"fp8e4m3", "fp8_e4m3"},  {"e4m3", "fp8_e4m3"},    {"f8e4m3", "fp8_e4m3"}, {"fp8_e5m2", "fp8_e5m2"},
      {"fp8e5m2", "fp8_e5m2"},  {"e5m2", "fp8_e5m2"},    {"f8e5m2", "fp8_e5m2"}, {"fp64", "fp64"},
      {"f64", "fp64"},          {"double", "fp64"},      {"float64", "fp64"},  {"int8", "int8"},
      {"i8", "int8"}};
  auto it = names.find(lower(raw));
  return it == names.end() ? "" : it->second;
}

}  // namespace

double gemm_flops(int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
}

std::vector<GemmSweepRow> parse_gemm_sweep(std::string_view csv, const std::string& source) {
  // Time columns and their factor to seconds.
  static const std::vector<std::pair<std::string, double>> time_cols = {
      {"seconds", 1.0}, {"time_s", 1.0}, {"ms", 1e-3}, {"time_us", 1e-6}};

  std::map<std::string, size_t> col;
  std::vector<std::string> header;
  int header_line = 0;
  std::string time_name;
  double to_seconds = 0;
  bool has_tflops = false, has_layout = false;

  std::vector<GemmSweepRow> rows;
  std::map<std::tuple<int64_t, int64_t, int64_t, std::string, std::string>, size_t> index;

  int line_no = 0;
  size_t pos = 0;
  while (pos < csv.size()) {
    size_t nl = csv.find('\n', pos);
    std::string_view raw = csv.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? csv.size() : nl + 1;
    ++line_no;
    std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f = split_csv_line(line, source, line_no);

    if (header.empty()) {
      header_line = line_no;
      for (size_t i = 0; i < f.size(); ++i) {
        std::string name = lower(f[i]);
        if (name.empty()) fail(source, line_no, "header field " + std::to_string(i + 1) + " is empty");
        if (col.count(name)) fail_col(source, line_no, name, "appears twice in the header");
        col[name] = i;
        header.push_back(name);
      }
      for (const char* need : {"m", "n", "k", "dtype"})
        if (!col.count(need)) fail_col(source, line_no, need, "missing from the header row");
      for (const auto& [name, factor] : time_cols)
        if (col.count(name)) {
          if (!time_name.empty())
            fail_col(source, line_no, name, "a second time column (already '" + time_name + "'); keep one");
          time_name = name;
          to_seconds = factor;
        }
      has_tflops = col.count("tflops") > 0;
      has_layout = col.count("layout") > 0;
      if (time_name.empty() && !has_tflops)
        fail_col(source, line_no, "seconds", "missing: give seconds, time_s, ms, time_us or tflops");
      continue;
    }

    if (f.size() != header.size())
      fail(source, line_no, "expected " + std::to_string(header.size()) + " fields (as the header on line " +
                                std::to_string(header_line) + "), got " + std::to_string(f.size()));
    auto field = [&](const std::string& name) -> const std::string& { return f[col.at(name)]; };
    auto dim = [&](const std::string& name) -> int64_t {
      const std::string& s = field(name);
      auto v = base::finite_number(s);
      if (!v) fail_col(source, line_no, name, "'" + s + "' is not a number");
      if (*v <= 0 || *v != std::floor(*v) || *v > 9e15)
        fail_col(source, line_no, name, "must be a positive integer, got '" + s + "'");
      return static_cast<int64_t>(*v);
    };
    GemmSweepRow r;
    r.line = line_no;
    r.m = dim("m");
    r.n = dim("n");
    r.k = dim("k");
    r.dtype = normalise_dtype(field("dtype"));
    if (r.dtype.empty()) fail_col(source, line_no, "dtype", "unknown type '" + field("dtype") + "'");
    if (has_layout) {
      r.layout = lower(field("layout"));
      if (r.layout != "nn" && r.layout != "nt" && r.layout != "tn" && r.layout != "tt")
        fail_col(source, line_no, "layout", "'" + field("layout") + "' is not one of nn, nt, tn, tt");
    }
    auto positive = [&](const std::string& name) -> double {
      const std::string& s = field(name);
      auto v = base::finite_number(s);
      if (!v) fail_col(source, line_no, name, "'" + s + "' is not a number");
      if (*v <= 0) fail_col(source, line_no, name, "must be positive, got '" + s + "'");
      return *v;
    };
    double from_tflops = has_tflops ? gemm_flops(r.m, r.n, r.k) / (positive("tflops") * 1e12) : 0;
    if (!time_name.empty()) {
      r.seconds = positive(time_name) * to_seconds;
      if (has_tflops && std::abs(from_tflops / r.seconds - 1.0) > 0.02)
        fail_col(source, line_no, "tflops",
                 "'" + field("tflops") + "' disagrees with " + time_name + " '" + field(time_name) +
                     "' (2mnk / time = " + std::to_string(gemm_flops(r.m, r.n, r.k) / r.seconds / 1e12) +
                     " TFLOP/s)");
    } else {
      r.seconds = from_tflops;
    }

    auto key = std::make_tuple(r.m, r.n, r.k, r.dtype, r.layout);
    auto it = index.find(key);
    if (it == index.end()) {
      index[key] = rows.size();
      rows.push_back(r);
    } else {
      GemmSweepRow& d = rows[it->second];
      d.seconds = (d.seconds * d.samples + r.seconds) / (d.samples + 1);
      ++d.samples;
    }
  }
  if (header.empty()) fail(source, 1, "empty GEMM sweep (no header row)");
  if (rows.empty()) fail(source, header_line, "no data rows under the header");
  return rows;
}

std::vector<GemmSweepRow> read_gemm_sweep_file(const std::string& path) {
  return parse_gemm_sweep(base::read_text_or_throw(path), path);
}

}  // namespace megascale::calibrate
