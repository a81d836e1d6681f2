// calibrate/nccl_tests.cc: see nccl_tests.h (formats, op and rank resolution,
// the consistency check and its rounding allowance).
#include "calibrate/nccl_tests.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "base/number_text.h"
#include "model/profile_tables.h"
#include "base/text_file.h"

namespace megascale::calibrate {
namespace {

// ---------------------------------------------------------------- strings

using base::lower;
using base::trim;

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::vector<std::string> split_ws(std::string_view s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t b = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > b) out.emplace_back(s.substr(b, i - b));
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}


// Half a unit in the last printed place of a number as nccl-tests prints it
// ("123.45" -> 0.005, "47535" -> 0.5, "1.2e+05" -> 5000).
double half_unit(const std::string& s) {
  size_t e = s.find_first_of("eE");
  std::string mant = e == std::string::npos ? s : s.substr(0, e);
  int exp10 = e == std::string::npos ? 0 : std::atoi(s.c_str() + e + 1);
  size_t dot = mant.find('.');
  int decimals = dot == std::string::npos ? 0 : static_cast<int>(mant.size() - dot - 1);
  return 0.5 * std::pow(10.0, exp10 - decimals);
}

[[noreturn]] void fail(const std::string& source, int line, const std::string& why) {
  throw ImportError(source + ":" + std::to_string(line) + ": " + why);
}

std::string fmt(double v, int prec = 4) {
  std::ostringstream os;
  os.precision(prec);
  os << v;
  return os.str();
}

// ------------------------------------------------------------ line shapes

// mpirun --tag-output tags every chunk a rank writes ("[1,0]<stdout>:"); a
// nccl-tests row is written in three chunks, so tags also appear inside rows.
// Removes them all.
std::string remove_mpirun_tags(std::string_view s) {
  auto tag_length = [&](size_t i) -> size_t {  // 0 when no tag starts at i
    if (s[i] != '[') return 0;
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i + 1 || j >= s.size() || s[j] != ',') return 0;
    size_t k = j + 1;
    while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) ++k;
    if (k == j + 1) return 0;
    for (std::string_view tag : {std::string_view("]<stdout>:"), std::string_view("]<stderr>:")})
      if (s.substr(k, tag.size()) == tag) return k + tag.size() - i;
    return 0;
  };
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    size_t n = tag_length(i);
    if (n > 0) {
      i += n;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Removes wrappers that launchers and markdown put in front of each line
// (after remove_mpirun_tags): srun --label's "0: ", markdown quotes "> ".
std::string_view strip_prefixes(std::string_view s) {
  for (;;) {
    std::string_view t = s;
    size_t i = 0;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
    size_t j = i;
    while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
    if (j > i && j + 1 < t.size() && t[j] == ':' && t[j + 1] == ' ') {  // srun "12: "
      s = t.substr(j + 2);
      continue;
    }
    if (i < t.size() && t[i] == '>' && (i + 1 == t.size() || t[i + 1] == ' ')) {  // "> "
      s = t.substr(std::min(t.size(), i + 2));
      continue;
    }
    return s;
  }
}

// The text after leading '#' characters and blanks.
std::string_view comment_body(std::string_view s) {
  s = trim(s);
  while (!s.empty() && s.front() == '#') s.remove_prefix(1);
  return trim(s);
}

int type_size(const std::string& dtype) {
  static const std::map<std::string, int> sizes = {
      {"int8", 1},    {"uint8", 1},  {"char", 1},     {"f8e4m3", 1},   {"f8e5m2", 1},
      {"fp8_e4m3", 1}, {"fp8_e5m2", 1}, {"half", 2},  {"float16", 2},  {"bfloat16", 2},
      {"int32", 4},   {"uint32", 4}, {"int", 4},      {"float", 4},    {"float32", 4},
      {"int64", 8},   {"uint64", 8}, {"double", 8},   {"float64", 8}};
  auto it = sizes.find(lower(dtype));
  return it == sizes.end() ? 0 : it->second;
}

// Names of the known ops that appear as "<op>_perf" (or "<op>_perf_mpi") in a line.
std::set<std::string> perf_names_in(std::string_view line) {
  std::set<std::string> out;
  size_t pos = 0;
  while ((pos = line.find("_perf", pos)) != std::string_view::npos) {
    size_t b = pos;
    while (b > 0 && (std::isalnum(static_cast<unsigned char>(line[b - 1])) || line[b - 1] == '_')) --b;
    std::string op = canonical_nccl_op(line.substr(b, pos - b));
    if (!op.empty()) out.insert(op);
    pos += 5;
  }
  return out;
}

// Op named by a file's base name, "" if none or several.
std::string op_from_file_name(const std::string& source) {
  std::string base = lower(source.substr(source.find_last_of("/\\") == std::string::npos
                                             ? 0
                                             : source.find_last_of("/\\") + 1));
  static const std::vector<std::pair<std::string, std::string>> keys = {
      {"all_reduce", "all_reduce"},         {"allreduce", "all_reduce"},
      {"all_gather", "all_gather"},         {"allgather", "all_gather"},
      {"reduce_scatter", "reduce_scatter"}, {"reducescatter", "reduce_scatter"},
      {"sendrecv", "sendrecv"},             {"alltoall", "alltoall"},
      {"broadcast", "broadcast"}};
  std::set<std::string> found;
  for (const auto& [key, op] : keys)
    if (base.find(key) != std::string::npos) found.insert(op);
  if (found.empty() && base.find("reduce_perf") != std::string::npos) found.insert("reduce");
  return found.size() == 1 ? *found.begin() : "";
}

// ------------------------------------------------------------ table model

enum class Col { kSize, kCount, kType, kRedop, kRoot, kTime, kAlgbw, kBusbw, kWrong, kOther };

struct Header {
  int line = 0;
  size_t ntokens = 0;  // columns every data row must have (timestamp label excluded)
  // First (out-of-place) and second (in-place) occurrence of each column.
  std::map<Col, std::vector<size_t>> at;
  bool old_names = false;  // 2017 layout (bytes, N, op, res): time may be in ms
};

std::optional<Header> parse_header(std::string_view body, int line) {
  std::vector<std::string> toks = split_ws(body);
  auto has = [&](std::initializer_list<const char*> names) {
    for (const auto& t : toks)
      for (const char* n : names)
        if (t == n) return true;
    return false;
  };
  if (!has({"size", "bytes"}) || !has({"time", "cputime"}) || !has({"algbw"}) || !has({"busbw"}))
    return std::nullopt;
  Header h;
  h.line = line;
  for (size_t i = 0; i < toks.size(); ++i) {
    const std::string& t = toks[i];
    Col c = Col::kOther;
    if (t == "size" || t == "bytes") c = Col::kSize;
    else if (t == "count" || t == "N") c = Col::kCount;
    else if (t == "type") c = Col::kType;
    else if (t == "redop" || t == "op") c = Col::kRedop;
    else if (t == "root") c = Col::kRoot;
    else if (t == "time" || t == "cputime") c = Col::kTime;
    else if (t == "algbw") c = Col::kAlgbw;
    else if (t == "busbw") c = Col::kBusbw;
    else if (t == "#wrong" || t == "wrong" || t == "error" || t == "res") c = Col::kWrong;
    if (t == "bytes" || t == "N" || t == "res") h.old_names = true;
    if (t != "timestamp") h.ntokens = i + 1;
    h.at[c].push_back(i);
  }
  for (Col c : {Col::kSize, Col::kCount, Col::kTime, Col::kAlgbw, Col::kBusbw})
    if (h.at[c].empty()) return std::nullopt;
  return h;
}

// A point plus the printed strings the consistency check needs.
struct RawRow {
  NcclTestsPoint p;
  std::string time_s, alg_s, bus_s, itime_s, ialg_s, ibus_s;
};

struct RunText {
  int first_line = 0;
  std::optional<Header> header;
  bool table_open = false;
  bool units_ms = false;
  bool units_seen = false;
  std::vector<RawRow> rows;
  std::string starting_op;              // "# Collective test starting: X"
  int starting_line = 0;
  std::map<std::string, int> echo_ops;  // ops named by X_perf in other lines -> first line
  std::map<int, std::string> rank_host;  // rank -> host
  std::vector<std::string> devices;      // distinct, in order
  int header_threads = 0, header_gpus = 0;
  std::string version;
  double avg_busbw = 0;
  bool has_table() const { return header.has_value(); }
};

void parse_data_row(const std::string& source, int line, const std::vector<std::string>& toks,
                    const Header& h, RawRow& r) {
  if (toks.size() < h.ntokens)
    fail(source, line, "data row has " + std::to_string(toks.size()) + " columns, the header on line " +
                           std::to_string(h.line) + " has " + std::to_string(h.ntokens) +
                           " (truncated row?)");
  auto col = [&](Col c, size_t k) -> const std::string* {
    auto it = h.at.find(c);
    if (it == h.at.end() || it->second.size() <= k) return nullptr;
    return &toks[it->second[k]];
  };
  auto integer = [&](Col c, const char* name) -> int64_t {
    const std::string& s = *col(c, 0);
    if (!all_digits(s) || s.size() > 18)
      fail(source, line, std::string("column '") + name + "': '" + s + "' is not a non-negative integer");
    return std::stoll(s);
  };
  auto number = [&](const std::string& s, const char* name) -> double {
    auto v = base::finite_number(s);
    if (!v) fail(source, line, std::string("column '") + name + "': '" + s + "' is not a number");
    if (*v < 0) fail(source, line, std::string("column '") + name + "': '" + s + "' is negative");
    return *v;
  };
  r.p.line = line;
  r.p.bytes = integer(Col::kSize, "size");
  r.p.count = integer(Col::kCount, "count");
  if (const std::string* t = col(Col::kType, 0)) r.p.dtype = *t;
  if (const std::string* t = col(Col::kRedop, 0)) r.p.redop = *t;
  if (const std::string* t = col(Col::kRoot, 0)) {
    auto v = base::finite_number(*t);
    if (!v || *v != std::floor(*v)) fail(source, line, "column 'root': '" + *t + "' is not an integer");
    r.p.root = static_cast<int>(*v);
  }
  r.time_s = *col(Col::kTime, 0);
  r.alg_s = *col(Col::kAlgbw, 0);
  r.bus_s = *col(Col::kBusbw, 0);
  r.p.time_us = number(r.time_s, "time");
  r.p.algbw_gbs = number(r.alg_s, "algbw");
  r.p.busbw_gbs = number(r.bus_s, "busbw");
  // "#wrong" counts the elements whose result failed nccl-tests' check (-c 1,
  // the default): a row with any is a broken run (a bad GPU, NIC or cable, or
  // a buggy NCCL), and its times are not those of the machine it describes.
  for (size_t k : {size_t{0}, size_t{1}}) {
    const std::string* w = col(Col::kWrong, k);
    if (w == nullptr) continue;
    int64_t wrong = -1;
    if (all_digits(*w) && w->size() <= 18) wrong = std::stoll(*w);
    else if (*w != "N/A" && !base::finite_number(*w))
      fail(source, line, "column '#wrong': '" + *w + "' is neither a count nor N/A");
    if (wrong > 0) {
      fail(source, line,
           "column '#wrong'" + std::string(k == 0 ? "" : " (in-place)") + ": nccl-tests counted " + *w +
               " wrong element(s), so this run returned wrong data and its times are not a healthy system's; "
               "measure again on machines that pass, or remove the row");
    }
    if (k == 0) r.p.wrong = wrong;
  }
  const std::string* it = col(Col::kTime, 1);
  const std::string* ia = col(Col::kAlgbw, 1);
  const std::string* ib = col(Col::kBusbw, 1);
  if (it && ia && ib) {
    r.itime_s = *it;
    r.ialg_s = *ia;
    r.ibus_s = *ib;
    r.p.inplace_time_us = number(*it, "time (in-place)");
    r.p.inplace_algbw_gbs = number(*ia, "algbw (in-place)");
    r.p.inplace_busbw_gbs = number(*ib, "busbw (in-place)");
    r.p.has_inplace = true;
  }
}

bool is_rank_line(std::string_view body, std::string& host, std::string& device, int& rank) {
  // Rank  0 Group  0 Pid 1623025 on    host device  0 [0x1b] NVIDIA H100 80GB HBM3
  // Rank  0 Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB
  std::vector<std::string> t = split_ws(body);
  if (t.size() < 8 || t[0] != "Rank" || !all_digits(t[1]) || t[1].size() > 9) return false;
  size_t i = 2;
  if (t[i] == "Group") i += 2;
  if (i + 5 >= t.size() || t[i] != "Pid" || t[i + 2] != "on" || t[i + 4] != "device") return false;
  rank = std::stoi(t[1]);
  host = t[i + 3];
  size_t close = body.find(']');
  device = close == std::string_view::npos ? "" : std::string(trim(body.substr(close + 1)));
  return true;
}

bool is_run_marker(std::string_view body) {
  return starts_with(body, "nccl-tests version") || starts_with(body, "Collective test starting") ||
         starts_with(body, "nThread");
}

std::vector<RunText> scan(std::string_view text, const std::string& source) {
  std::vector<RunText> runs(1);
  runs[0].first_line = 1;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++line_no;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    std::string untagged = remove_mpirun_tags(raw);
    std::string_view line = strip_prefixes(untagged);
    std::string_view body = comment_body(line);
    bool comment = !trim(line).empty() && trim(line).front() == '#';

    if (is_run_marker(body) && (runs.back().has_table() || !runs.back().rows.empty())) {
      runs.emplace_back();
      runs.back().first_line = line_no;
    }
    RunText& r = runs.back();

    if (starts_with(body, "nccl-tests version")) {
      std::vector<std::string> t = split_ws(body);
      if (t.size() >= 3) r.version = t[2];
      continue;
    }
    if (starts_with(body, "Collective test starting")) {
      std::string op = canonical_nccl_op(trim(body.substr(body.find(':') + 1)));
      if (!op.empty() && r.starting_op.empty()) {
        r.starting_op = op;
        r.starting_line = line_no;
      }
      continue;
    }
    if (starts_with(body, "nThread")) {
      std::vector<std::string> t = split_ws(body);
      for (size_t i = 0; i + 1 < t.size(); ++i) {
        std::string k = t[i];
        if (!k.empty() && k.back() == ':') k.pop_back();
        if (t[i + 1].size() > 9) continue;
        if ((k == "nThread" || k == "nThreads") && all_digits(t[i + 1])) r.header_threads = std::stoi(t[i + 1]);
        if (k == "nGpus" && all_digits(t[i + 1])) r.header_gpus = std::stoi(t[i + 1]);
      }
      continue;
    }
    std::string host, device;
    int rank = 0;
    if (is_rank_line(body, host, device, rank)) {
      r.rank_host[rank] = host;
      if (!device.empty() && std::find(r.devices.begin(), r.devices.end(), device) == r.devices.end())
        r.devices.push_back(device);
      continue;
    }
    if (auto h = parse_header(body, line_no)) {
      if (r.has_table() && !r.rows.empty()) {  // a second table without a marker: a new run
        runs.emplace_back();
        runs.back().first_line = line_no;
      }
      RunText& rr = runs.back();
      rr.header = *h;
      rr.table_open = true;
      continue;
    }
    if (r.table_open && r.rows.empty() && starts_with(body, "(B)")) {  // the units line
      std::vector<std::string> t = split_ws(body);
      r.units_seen = true;
      r.units_ms = std::find(t.begin(), t.end(), "(ms)") != t.end() &&
                   std::find(t.begin(), t.end(), "(us)") == t.end();
      continue;
    }
    if (starts_with(body, "Avg bus bandwidth")) {
      size_t c = body.find(':');
      if (c != std::string_view::npos) {
        std::vector<std::string> t = split_ws(body.substr(c + 1));
        if (!t.empty())
          if (auto v = base::finite_number(t[0])) r.avg_busbw = *v;
      }
      r.table_open = false;
      continue;
    }
    if (starts_with(body, "Out of bounds values")) {
      r.table_open = false;
      continue;
    }
    std::vector<std::string> toks = split_ws(line);
    if (!comment && r.table_open && !toks.empty() && all_digits(toks[0])) {
      RawRow row;
      parse_data_row(source, line_no, toks, *r.header, row);
      r.rows.push_back(row);
      continue;
    }
    for (const std::string& op : perf_names_in(line))
      if (!r.echo_ops.count(op)) r.echo_ops[op] = line_no;
  }
  // A trailing part without a table belongs to no run.
  std::vector<RunText> out;
  for (auto& r : runs)
    if (r.has_table() || !r.rows.empty()) out.push_back(std::move(r));
    else if (!out.empty()) {
      for (auto& [op, l] : r.echo_ops)
        if (!out.back().echo_ops.count(op)) out.back().echo_ops[op] = l;
    }
  return out;
}

// ---------------------------------------------------------- resolution

struct Check {
  bool ok = true;
  std::string why;
};

// algbw = size / time, busbw = factor x algbw, within 2% plus printed rounding.
// `ut_us`: half a unit in the last printed place of the time, in us.
Check check_row(const std::string& op, int ranks, int64_t bytes, double t_us, double ut_us,
                double alg, const std::string& alg_s, double bus, const std::string& bus_s) {
  if (t_us <= 0 || ranks <= 0) return {};
  double f = nccl_busbw_factor(op, ranks);
  double a = static_cast<double>(bytes) / t_us / 1e3;  // GB/s
  double ua = half_unit(alg_s), ub = half_unit(bus_s), rt = ut_us / t_us;
  auto close = [](double x, double y, double tol) { return std::abs(x - y) <= tol; };
  bool alg_new = close(alg, a, 0.02 * a + ua + a * rt);
  bool bus_new = close(bus, f * alg, 0.02 * f * alg + ub + f * ua);
  if (alg_new && bus_new) return {};
  if (op == "all_gather" || op == "reduce_scatter") {  // before nccl-tests#45 (2020)
    bool alg_old = close(alg, f * a, 0.02 * f * a + ua + f * a * rt);
    bool bus_old = close(bus, alg, 0.02 * alg + ub + ua);
    if (alg_old && bus_old) return {};
  }
  Check c;
  c.ok = false;
  if (!alg_new)
    c.why = "algbw " + alg_s + " GB/s does not match size / time = " + fmt(a) + " GB/s";
  else
    c.why = "busbw " + bus_s + " GB/s is not " + op + "'s factor " + fmt(f) + " x algbw " + alg_s +
            " GB/s over " + std::to_string(ranks) + " ranks (= " + fmt(f * alg) + ")";
  return c;
}

int infer_ranks_from_ratio(const std::string& op, const std::vector<RawRow>& rows) {
  const RawRow* best = nullptr;
  for (const auto& r : rows)
    if (r.p.algbw_gbs >= 1.0 && (!best || r.p.busbw_gbs > best->p.busbw_gbs)) best = &r;
  if (!best) return 0;
  double ratio = best->p.busbw_gbs / best->p.algbw_gbs;
  double n = 0;
  if (op == "all_reduce" && ratio < 1.999) n = 2.0 / (2.0 - ratio);
  else if ((op == "all_gather" || op == "reduce_scatter" || op == "alltoall") && ratio < 0.9995)
    n = 1.0 / (1.0 - ratio);
  if (n < 1.5 || n > 1e6) return 0;
  return static_cast<int>(std::lround(n));
}

// Op from the columns alone (see the header); "" when undecidable.
std::string op_from_columns(const RunText& r, int ranks, std::string& why) {
  const NcclTestsPoint* p = nullptr;
  for (const auto& row : r.rows)
    if (row.p.bytes > 0 && (!p || row.p.bytes > p->bytes)) p = &row.p;
  if (!p) {
    why = "no row with a non-zero size";
    return "";
  }
  if (p->root >= 0) return p->redop == "none" ? "broadcast" : (p->redop.empty() ? "" : "reduce");
  int ts = type_size(p->dtype);
  if (ts == 0) {
    why = "unknown element type '" + p->dtype + "'";
    return "";
  }
  if (p->count * ts == p->bytes) {
    if (ranks > 2) {
      double ratio = p->algbw_gbs > 0 ? p->busbw_gbs / p->algbw_gbs : 0;
      double ar = nccl_busbw_factor("all_reduce", ranks);
      if (std::abs(ratio - ar) < 0.05 * ar) return "all_reduce";
      if (std::abs(ratio - 1.0) < 0.05) return "sendrecv";
    }
    why = "count x type size = size fits all_reduce and sendrecv";
    return "";
  }
  if (ranks > 0 && p->count * ts * ranks == p->bytes) {
    if (p->redop == "none" || p->redop.empty()) {
      why = "all_gather and alltoall print the same columns";
      return "";
    }
    return "reduce_scatter";
  }
  why = "the columns match no collective";
  return "";
}

NcclTestsRun resolve(const RunText& r, const std::string& source, const std::string& hint_in) {
  NcclTestsRun run;
  run.source = source;
  run.first_line = r.first_line;
  run.nccl_tests_version = r.version;
  run.avg_busbw_gbs = r.avg_busbw;
  if (!r.header) fail(source, r.first_line, "no nccl-tests result table (no header line naming size, count, time, algbw, busbw)");
  if (r.rows.empty()) fail(source, r.header->line, "no data rows under this table header");

  // Time unit: us unless the units line says ms, or (2017 layout without a
  // units line) algbw only makes sense with ms.
  bool ms = r.units_ms;
  if (!r.units_seen && r.header->old_names) {
    const RawRow* big = &r.rows.front();
    for (const auto& row : r.rows)
      if (row.p.bytes > big->p.bytes) big = &row;
    if (big->p.time_us > 0) {
      double a_us = static_cast<double>(big->p.bytes) / big->p.time_us / 1e3, a_ms = a_us / 1e3;
      ms = std::abs(std::log((big->p.algbw_gbs + 1e-9) / a_ms)) < std::abs(std::log((big->p.algbw_gbs + 1e-9) / a_us));
    }
  }
  std::vector<RawRow> rows = r.rows;
  if (ms)
    for (auto& row : rows) {
      row.p.time_us *= 1e3;
      row.p.inplace_time_us *= 1e3;
    }

  // Ranks and nodes from the Rank lines.
  if (!r.rank_host.empty()) {
    run.ranks = r.rank_host.rbegin()->first + 1;
    run.ranks_from = "rank lines";
    std::set<std::string> hosts;
    for (const auto& [rank, host] : r.rank_host) hosts.insert(host);
    run.nodes = static_cast<int>(hosts.size());
  }
  for (size_t i = 0; i < r.devices.size(); ++i) run.device += (i ? " + " : "") + r.devices[i];

  // The op.
  std::string hint = hint_in.empty() ? "" : canonical_nccl_op(hint_in);
  if (!hint_in.empty() && hint.empty())
    fail(source, r.first_line, "unknown collective '" + hint_in + "' (all_reduce, all_gather, reduce_scatter, sendrecv, alltoall, broadcast, reduce)");
  std::string text_op;
  int text_line = 0;
  if (!r.starting_op.empty()) {
    text_op = r.starting_op;
    text_line = r.starting_line;
  } else if (r.echo_ops.size() == 1) {
    text_op = r.echo_ops.begin()->first;
    text_line = r.echo_ops.begin()->second;
  } else if (r.echo_ops.size() > 1) {
    std::string names;
    for (const auto& [op, l] : r.echo_ops) names += (names.empty() ? "" : ", ") + op + "_perf (line " + std::to_string(l) + ")";
    if (hint.empty() || !r.echo_ops.count(hint))
      fail(source, r.first_line, "the text names several tests (" + names + "); pass the op explicitly");
  }
  if (!text_op.empty() && !hint.empty() && text_op != hint)
    fail(source, text_line, "the output is " + text_op + "_perf but the op given is '" + hint + "'");
  if (!text_op.empty()) {
    run.op = text_op;
    run.op_from = "text";
  } else if (!hint.empty()) {
    run.op = hint;
    run.op_from = "hint";
  } else if (std::string f = op_from_file_name(source); !f.empty()) {
    run.op = f;
    run.op_from = "file name";
  }

  // Ranks without Rank lines.
  if (run.ranks == 0 && !run.op.empty()) {
    if (int n = infer_ranks_from_ratio(run.op, rows); n > 0) {
      run.ranks = n;
      run.ranks_from = "busbw/algbw";
    }
  }
  if (run.ranks == 0 && r.header_gpus > 0 &&
      (run.op.empty() || run.op == "sendrecv" || run.op == "broadcast" || run.op == "reduce")) {
    run.ranks = r.header_gpus * std::max(1, r.header_threads);
    run.ranks_from = "header";
  }
  if (run.op.empty()) {
    std::string why;
    run.op = op_from_columns(r, run.ranks, why);
    run.op_from = "columns";
    if (run.op.empty())
      fail(source, r.header->line,
           "cannot tell which collective this is (" + why +
               "); name the file after the nccl-tests binary (all_gather_perf_*.txt) or pass the op");
  }
  if (run.ranks == 0) {
    if (nccl_busbw_factor(run.op, 2) != 1.0 || nccl_busbw_factor(run.op, 8) != 1.0)
      fail(source, r.header->line,
           "cannot tell how many ranks ran " + run.op + " (no '#  Rank' lines, busbw/algbw unusable)");
    run.ranks_from = "unknown";
  }

  // Factor-1 ops with unknown ranks are still checked (busbw = algbw = size / time).
  int check_ranks = run.ranks > 0 ? run.ranks : 1;
  double unit = ms ? 1e3 : 1.0;
  for (const auto& row : rows) {
    Check c = check_row(run.op, check_ranks, row.p.bytes, row.p.time_us, half_unit(row.time_s) * unit,
                        row.p.algbw_gbs, row.alg_s, row.p.busbw_gbs, row.bus_s);
    if (c.ok && row.p.has_inplace)
      c = check_row(run.op, check_ranks, row.p.bytes, row.p.inplace_time_us, half_unit(row.itime_s) * unit,
                    row.p.inplace_algbw_gbs, row.ialg_s, row.p.inplace_busbw_gbs, row.ibus_s);
    if (!c.ok) fail(source, row.p.line, c.why);
    run.points.push_back(row.p);
  }
  return run;
}

}  // namespace

bool out_of_place_disturbed(const NcclTestsPoint& p) {
  return p.has_inplace && p.inplace_time_us > 0 && p.time_us > kDisturbedRatio * p.inplace_time_us;
}

double undisturbed_time_us(const NcclTestsPoint& p) {
  return out_of_place_disturbed(p) ? p.inplace_time_us : p.time_us;
}

std::string gpu_model(const std::string& name) {
  // A word that starts with A, B, H, L or V and 2-3 digits, no digit after
  // them (a plain scan: std::regex drew GCC 12's -Wmaybe-uninitialized false
  // positive from <regex> in this file).
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < name.size(); ++i) {
    if (std::string_view("ABHLV").find(name[i]) == std::string_view::npos || (i > 0 && alnum(name[i - 1]))) continue;
    size_t j = i + 1;
    while (j < name.size() && digit(name[j])) ++j;
    if (j - i - 1 >= 2 && j - i - 1 <= 3) return name.substr(i, j - i);
  }
  return "";
}

std::string canonical_nccl_op(std::string_view name) {
  std::string s = lower(trim(name));
  auto strip_suffix = [&](std::string_view suf) {
    if (s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0)
      s.erase(s.size() - suf.size());
  };
  strip_suffix("_mpi");
  strip_suffix("_perf");
  std::string key;
  for (char c : s)
    if (c != '_' && c != '-' && c != ' ') key += c;
  static const std::map<std::string, std::string> ops = {
      {"allreduce", "all_reduce"}, {"allgather", "all_gather"}, {"reducescatter", "reduce_scatter"},
      {"sendrecv", "sendrecv"},    {"alltoall", "alltoall"},    {"broadcast", "broadcast"},
      {"reduce", "reduce"}};
  auto it = ops.find(key);
  return it == ops.end() ? "" : it->second;
}

double nccl_busbw_factor(const std::string& op, int ranks) {
  if (ranks < 1) throw std::invalid_argument("nccl_busbw_factor: ranks must be >= 1, got " + std::to_string(ranks));
  const std::string c = canonical_nccl_op(op);
  if (c.empty()) throw std::invalid_argument("nccl_busbw_factor: unknown collective '" + op + "'");
  return model::busbw_factor(c, ranks);  // the one home of the conversion
}

std::vector<NcclTestsRun> parse_nccl_tests_runs(std::string_view text, const std::string& source,
                                                std::string op_hint) {
  if (trim(text).empty()) fail(source, 1, "empty input");
  std::vector<RunText> runs = scan(text, source);
  if (runs.empty())
    fail(source, 1, "no nccl-tests result table (no header line naming size, count, time, algbw, busbw)");
  std::vector<NcclTestsRun> out;
  for (const auto& r : runs) out.push_back(resolve(r, source, op_hint));
  return out;
}

NcclTestsRun parse_nccl_tests(std::string_view text, const std::string& source, std::string op_hint) {
  if (trim(text).empty()) fail(source, 1, "empty input");
  std::vector<RunText> runs = scan(text, source);
  if (runs.size() > 1)
    fail(source, runs[1].first_line,
         "the text holds " + std::to_string(runs.size()) + " nccl-tests runs; import them with parse_nccl_tests_runs");
  if (runs.empty())
    fail(source, 1, "no nccl-tests result table (no header line naming size, count, time, algbw, busbw)");
  return resolve(runs[0], source, op_hint);
}

NcclTestsRun read_nccl_tests_file(const std::string& path, std::string op_hint) {
  return parse_nccl_tests(base::read_text_or_throw(path), path, std::move(op_hint));
}

}  // namespace megascale::calibrate
