// base/options.cc: a command's table -> CLI11 app -> checked values; and its usage.
//
// One CLI::App per call: a flag per kFlag row, an option per other row taking one
// string each time it is given (TakeAll keeps every occurrence, in order), and a
// catch-all positional. CLI11 reads a value that looks like a negative number
// (`--fail-at -1`, `--jitter -0.1`) as the value, not as an option. Its errors
// become UsageErrors naming the option.
#include "base/options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>
#include <utility>

#include "base/number_text.h"
#include "base/text_file.h"

namespace megascale::base {

namespace {

// CLI11's ArgumentMismatch names the option but not in our words: "--gpus: 1
// required TEXT missing" (no value) or "json was given a disallowed flag
// override" (`--json=1`).
UsageError usage_error(const CLI::Error& e, const Command& command) {
  const std::string what = e.what();
  for (const Option& o : command.options) {
    if (o.kind != Kind::kFlag && what.rfind(o.name + ":", 0) == 0) return UsageError(o.name + " needs a value");
    if (o.kind == Kind::kFlag && what.rfind(o.name.substr(2) + " ", 0) == 0 &&
        what.find("flag override") != std::string::npos)
      return UsageError(o.name + " takes no value");
  }
  return UsageError(what);
}

// A whole-string decimal integer ("010" is ten, not octal).
std::optional<int64_t> whole_integer(const std::string& s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// What a rejected value of `o` should have been: "an integer in 1..256".
std::string expected(const Option& o) {
  if (!o.expects.empty()) return o.expects;
  const bool positive = o.min == kAboveZero || (o.kind == Kind::kInt && o.min == 1);
  const bool unbounded = o.max == kNoLimit || (o.kind == Kind::kInt && o.max >= kMaxInt);
  const std::string noun = o.kind == Kind::kInt      ? "integer"
                           : o.kind == Kind::kNumber ? "number"
                                                     : "share such as 0.1 or 10%";
  if (positive && unbounded) return "a positive " + noun;
  if (o.min == 0 && unbounded) return "an " + noun + " >= 0";
  if (o.min == -kNoLimit && unbounded) return (o.kind == Kind::kInt ? "an " : "a ") + noun;
  const std::string article = o.kind == Kind::kInt ? "an " : "a ";
  if (o.min == kAboveZero) return fmt::format("{}{} in (0, {}]", article, noun, o.max);
  return fmt::format("{}{} in {}..{}", article, noun, o.min, o.max);
}

// Checks `value` against its row; numbers go to `p`.
void check_value(const Option& o, const std::string& value, ParsedArgs& p) {
  if (o.kind == Kind::kChoice) {
    std::string list;
    std::istringstream in(o.value);
    std::string word;
    bool found = false;
    for (int i = 0; std::getline(in, word, '|'); ++i) {
      found = found || word == value;
      list += (i == 0 ? "" : in.peek() == EOF ? " or " : ", ") + word;
    }
    if (!found) throw UsageError(o.name + " must be " + list + ", got '" + value + "'");
    return;
  }
  if (o.kind == Kind::kOutFile) {
    if (value == "-") return;
    try {
      check_output_path(value);
    } catch (const OutputFileError& e) {
      throw OutputOptionError(o.name + " " + e.what());
    }
    return;
  }
  if (o.kind != Kind::kInt && o.kind != Kind::kNumber && o.kind != Kind::kFraction) return;
  const std::optional<double> v = o.kind == Kind::kInt      ? std::optional<double>()
                                   : o.kind == Kind::kNumber ? base::finite_number(value)
                                                             : base::fraction_or_percent(value);
  const std::optional<int64_t> n = o.kind == Kind::kInt ? whole_integer(value) : std::nullopt;
  const double x = n ? static_cast<double>(*n) : v.value_or(0);
  if ((o.kind == Kind::kInt ? !n : !v) || x < o.min || x > o.max)
    throw UsageError(o.name + " expects " + expected(o) + ", got '" + value + "'");
  if (n) p.integers[o.name] = *n;
  p.numbers[o.name] = x;
}

}  // namespace

ParsedArgs parse_args(const Command& command, const std::vector<std::string>& args) {
  CLI::App app;
  app.set_help_flag();     // --help is handled by run_cli (the usage text)
  app.allow_extras(true);  // unknown options are reported below, in our words
  std::vector<std::pair<const Option*, CLI::Option*>> added;
  for (const Option& o : command.options) {
    added.emplace_back(&o, o.kind == Kind::kFlag ? app.add_flag(o.name)->disable_flag_override()
                                                 : app.add_option(o.name)->expected(1)->multi_option_policy(
                                                       CLI::MultiOptionPolicy::TakeAll));
  }
  ParsedArgs p;
  p.args = args;
  app.add_option("positional", p.positional);

  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::Error& e) {
    throw usage_error(e, command);
  }
  const std::vector<std::string> extra = app.remaining();
  if (!extra.empty()) throw UsageError("unknown option '" + extra.front() + "'");

  for (const auto& [row, option] : added) {
    if (option->count() == 0) continue;
    if (row->kind == Kind::kFlag) {
      p.flags.insert(row->name);
      continue;
    }
    p.repeated[row->name] = option->results();
    p.values[row->name] = option->results().back();
    check_value(*row, p.values[row->name], p);
  }
  return p;
}

std::string usage_text(const Command& command, const std::string& program) {
  std::string text = "usage: " + program + (command.name.empty() ? "" : " " + command.name) + " " + command.synopsis + "\n";
  std::istringstream summary(command.summary);
  for (std::string line; std::getline(summary, line);) text += "    " + line + "\n";
  constexpr size_t kColumn = 32;  // where the options' help starts
  for (const Option& o : command.options) {
    std::string head = "  " + o.name + (o.value.empty() ? "" : " " + o.value);
    head = head.size() + 1 < kColumn ? head + std::string(kColumn - head.size(), ' ') : head + "\n" +
                                                                                        std::string(kColumn, ' ');
    std::istringstream help(o.help);
    std::string line;
    for (bool first = true; std::getline(help, line); first = false)
      text += (first ? head : std::string(kColumn, ' ')) + line + "\n";
  }
  return text;
}

std::vector<int> int_list(const std::string& name, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list(text)) {
    const std::optional<int64_t> v = whole_integer(item);
    if (!v || *v < 0 || *v > kMaxInt)
      throw UsageError(name + " expects comma-separated GPU ranks (integers >= 0), got '" + text + "'");
    if (std::find(out.begin(), out.end(), *v) != out.end())
      throw UsageError(name + ": GPU rank " + item + " is given twice in '" + text + "'");
    out.push_back(static_cast<int>(*v));
  }
  if (out.empty()) throw UsageError(name + " expects at least one GPU rank");
  return out;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace megascale::base
