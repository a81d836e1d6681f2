// robust/fault_injection.cc: see fault_injection.h.
#include "robust/fault_injection.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "model/toml_section.h"

namespace megascale::robust {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

long long whole(const std::string& text, const std::string& key, const std::string& value, long long min) {
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min || v > 1000000000) {
    throw std::invalid_argument("--inject \"" + text + "\": " + key + " expects a whole number >= " +
                                std::to_string(min) + ", got \"" + value + "\"");
  }
  return v;
}

}  // namespace

model::InjectSpec parse_inject(const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
  if (parts.empty() || parts[0].empty()) {
    throw std::invalid_argument("--inject \"" + text + "\": expected NAME:rank=R:step=S (e.g. kill:rank=1:step=5)");
  }
  model::InjectSpec f;
  f.fault = parts[0];
  bool known = false;
  for (std::string_view k : model::kInjectFaults) known = known || k == f.fault;
  if (!known) {
    throw std::invalid_argument("--inject \"" + text + "\": " +
                                model::unknown_name_reason("fault", f.fault, model::kInjectFaults));
  }
  bool has_step = false, has_rank = false, has_percent = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("--inject \"" + text + "\": expected key=value, got \"" + parts[i] + "\"");
    }
    const std::string key = parts[i].substr(0, eq), value = parts[i].substr(eq + 1);
    if (key == "rank") {
      f.rank = static_cast<int>(whole(text, key, value, 0));
      has_rank = true;
    } else if (key == "step") {
      f.step = static_cast<int>(whole(text, key, value, 1));
      has_step = true;
    } else if (key == "percent") {
      char* end = nullptr;
      f.percent = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(f.percent) || f.percent <= 0) {
        throw std::invalid_argument("--inject \"" + text + "\": percent expects a number > 0, got \"" + value + "\"");
      }
      has_percent = true;
    } else {
      static constexpr std::string_view kKeys[] = {"rank", "step", "percent"};
      throw std::invalid_argument("--inject \"" + text + "\": " + model::unknown_name_reason("key", key, kKeys));
    }
  }
  if (!has_step) throw std::invalid_argument("--inject \"" + text + "\": step=S is required");
  if (!has_rank && model::inject_takes_rank(f.fault)) {
    throw std::invalid_argument("--inject \"" + text + "\": rank=R is required");
  }
  if (has_rank && !model::inject_takes_rank(f.fault)) {
    throw std::invalid_argument("--inject \"" + text + "\": " + f.fault + " names no rank (it hits " +
                                (f.fault == "slow_all" ? "every rank" : "no rank") + ")");
  }
  if (!model::inject_takes_rank(f.fault)) f.rank = -1;
  if (model::inject_takes_percent(f.fault) && !has_percent) {
    throw std::invalid_argument("--inject \"" + text + "\": " + f.fault + " needs percent=P (extra time, % of compute)");
  }
  if (!model::inject_takes_percent(f.fault) && has_percent) {
    throw std::invalid_argument("--inject \"" + text + "\": only slow and slow_all take percent");
  }
  return f;
}

std::string format_inject(const model::InjectSpec& f) {
  std::string s = f.fault;
  if (model::inject_takes_rank(f.fault)) s += ":rank=" + std::to_string(f.rank);
  s += ":step=" + std::to_string(f.step);
  if (model::inject_takes_percent(f.fault)) {
    s += fmt::format(":percent={:g}", f.percent);
  }
  return s;
}

std::vector<model::InjectSpec> parse_inject_list(const std::string& text) {
  std::vector<model::InjectSpec> out;
  for (const std::string& part : split(text, ';')) {
    if (!part.empty()) out.push_back(parse_inject(part));
  }
  return out;
}

std::string format_inject_list(const std::vector<model::InjectSpec>& faults) {
  std::string s;
  for (size_t i = 0; i < faults.size(); ++i) {
    if (i > 0) s += ";";
    s += format_inject(faults[i]);
  }
  return s;
}

void check_inject(const model::InjectSpec& f, int ranks, int steps) {
  if (model::inject_takes_rank(f.fault) && f.rank >= ranks) {
    throw std::invalid_argument("fault " + format_inject(f) + ": rank " + std::to_string(f.rank) +
                                " is not below the job's " + std::to_string(ranks) + " ranks");
  }
  if (f.step > steps) {
    throw std::invalid_argument("fault " + format_inject(f) + ": step " + std::to_string(f.step) +
                                " is after the last step (" + std::to_string(steps) + ")");
  }
}

void corrupt_file(const std::string& path, long offset, int count) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  if (!f) throw std::runtime_error("corrupt_file: cannot open " + path);
  f.seekg(0, std::ios::end);
  const long size = static_cast<long>(f.tellg());
  if (offset < 0 || offset + count > size) {
    throw std::runtime_error("corrupt_file: " + path + " has " + std::to_string(size) + " bytes, fewer than " +
                             std::to_string(offset + count));
  }
  std::vector<char> buf(static_cast<size_t>(count));
  f.seekg(offset);
  f.read(buf.data(), count);
  for (char& c : buf) c = static_cast<char>(~c);
  f.seekp(offset);
  f.write(buf.data(), count);
  f.flush();
  if (!f) throw std::runtime_error("corrupt_file: cannot write " + path);
}

}  // namespace megascale::robust
