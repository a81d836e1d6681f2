// tests/base/options_test.cc: parse_args (base/options.h, on CLI11) keeps the command
// line's contract: positionals anywhere, `--opt value` and `--opt=value`, every
// value of a repeated option, negative numbers as values, numbers checked by
// kind and range (decimal, not octal), UsageErrors that name the option; and
// the usage text lists every row of the table.
#include "base/options.h"

#include <gtest/gtest.h>

namespace megascale::base {
namespace {

const Command kCommand = {"test", "FILE [options]", "a test command",
                          {{"--json", Kind::kFlag, "", "JSON"},
                           {"--update", Kind::kFlag, "", "update"},
                           {"--set", Kind::kRepeated, "KEY=VALUE", "override"},
                           {"--fail-at", Kind::kNumber, "T", "seconds"},
                           {"--gpus", Kind::kInt, "N", "GPUs", 1, kMaxInt},
                           {"--paths", Kind::kInt, "N", "paths", 1, 256},
                           {"--jitter", Kind::kNumber, "SIGMA", "noise", 0, 0.25, "a sigma in 0..0.25"},
                           {"--headroom", Kind::kFraction, "10%", "memory kept free", 0, 0.9},
                           {"--fidelity", Kind::kChoice, "event|analytical", "which model"},
                           {"--write", Kind::kOutFile, "FILE", "the report"}}};

// The message of the `Error` parse_args throws for `args`.
template <typename Error = UsageError>
std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_args(kCommand, args);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string usage_error(const std::vector<std::string>& args) { return error_of(args); }

TEST(ParseArgsTest, PositionalsSwitchesAndRepeatedOptions) {
  const ParsedArgs p = parse_args(kCommand, {"a.toml", "--set", "x=1", "b.toml", "--set=y=2", "--json", "--gpus=8"});
  EXPECT_EQ(p.positional, (std::vector<std::string>{"a.toml", "b.toml"}));
  EXPECT_TRUE(p.on("--json"));
  EXPECT_FALSE(p.on("--update"));
  EXPECT_EQ(p.all("--set"), (std::vector<std::string>{"x=1", "y=2"}));
  EXPECT_EQ(p.text("--set"), "y=2");  // the last one
  EXPECT_EQ(p.integer("--gpus", 0), 8);
  EXPECT_FALSE(p.has("--fail-at"));
  EXPECT_EQ(p.number("--fail-at", 2.5), 2.5);
  EXPECT_TRUE(p.all("--fail-at").empty());
}

TEST(ParseArgsTest, NegativeNumberIsTheOptionsValue) {
  ParsedArgs p = parse_args(kCommand, {"--fail-at", "-1", "s.toml"});
  EXPECT_EQ(p.number("--fail-at", 0), -1);
  EXPECT_EQ(p.positional, (std::vector<std::string>{"s.toml"}));
  p = parse_args(kCommand, {"--fail-at", "-0.1"});
  EXPECT_EQ(p.number("--fail-at", 0), -0.1);
}

TEST(ParseArgsTest, NumbersAreCheckedByKindAndRange) {
  EXPECT_EQ(parse_args(kCommand, {"--gpus", "010"}).integer("--gpus", 0), 10);  // not octal
  EXPECT_EQ(parse_args(kCommand, {"--headroom", "10%"}).number("--headroom", 0), 0.1);
  EXPECT_EQ(parse_args(kCommand, {"--headroom", "0.2"}).number("--headroom", 0), 0.2);
  EXPECT_EQ(usage_error({"--gpus", "0"}), "--gpus expects a positive integer, got '0'");
  EXPECT_EQ(usage_error({"--gpus", "8x"}), "--gpus expects a positive integer, got '8x'");
  EXPECT_EQ(usage_error({"--gpus", "99999999999999999999"}),
            "--gpus expects a positive integer, got '99999999999999999999'");
  EXPECT_EQ(usage_error({"--paths", "257"}), "--paths expects an integer in 1..256, got '257'");
  EXPECT_EQ(usage_error({"--jitter", "0.3"}), "--jitter expects a sigma in 0..0.25, got '0.3'");
  EXPECT_EQ(usage_error({"--fail-at", "nan"}), "--fail-at expects a number, got 'nan'");
  EXPECT_EQ(usage_error({"--headroom", "95%"}), "--headroom expects a share such as 0.1 or 10% in 0..0.9, got '95%'");
  EXPECT_EQ(usage_error({"--fidelity", "exact"}), "--fidelity must be event or analytical, got 'exact'");
}

TEST(ParseArgsTest, ErrorsNameTheOption) {
  EXPECT_EQ(usage_error({"--frobnicate", "3"}), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error({"-x"}), "unknown option '-x'");
  EXPECT_EQ(usage_error({"--gpus"}), "--gpus needs a value");
  EXPECT_EQ(usage_error({"--set", "a=1", "--gpus"}), "--gpus needs a value");
  EXPECT_EQ(usage_error({"--json=1"}), "--json takes no value");
  EXPECT_EQ(usage_error({"--help"}), "unknown option '--help'");  // run_cli prints usage before parsing
}

// A file the command writes is checked before the command runs, not after its
// work (a chart after a simulation, a profile after minutes of timing).
TEST(ParseArgsTest, AnOutputFileMustBeWritable) {
  EXPECT_EQ(parse_args(kCommand, {"--write", "/tmp/megascale-options-test.md"}).text("--write"),
            "/tmp/megascale-options-test.md");
  EXPECT_EQ(parse_args(kCommand, {"--write", "-"}).text("--write"), "-");  // stdout, where a command takes it
  const auto path_error = [](const std::string& path) { return error_of<OutputOptionError>({"--write", path}); };
  EXPECT_EQ(path_error("/tmp"), "--write /tmp: cannot write (Is a directory)");
  EXPECT_EQ(path_error("/no-such-folder/r.md"), "--write /no-such-folder/r.md: cannot write (No such file or directory)");
  EXPECT_EQ(path_error("/etc/hostname/r.md"), "--write /etc/hostname/r.md: cannot write (Not a directory)");
}

// GPU rank lists (--straggler-gpus): ranks >= 0, each once.
TEST(IntListTest, RanksAreWholeNonNegativeAndDistinct) {
  EXPECT_EQ(int_list("--straggler-gpus", "3,17,,250"), (std::vector<int>{3, 17, 250}));
  auto error = [](const std::string& text) {
    try {
      int_list("--straggler-gpus", text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error("3,17,3"), "--straggler-gpus: GPU rank 3 is given twice in '3,17,3'");
  EXPECT_EQ(error("1,-2"), "--straggler-gpus expects comma-separated GPU ranks (integers >= 0), got '1,-2'");
  EXPECT_EQ(error(","), "--straggler-gpus expects at least one GPU rank");
}

TEST(ParseArgsTest, UsageListsEveryOption) {
  const std::string usage = usage_text(kCommand);
  EXPECT_EQ(usage.rfind("usage: megascale test FILE [options]\n    a test command\n", 0), 0u) << usage;
  for (const Option& o : kCommand.options) EXPECT_NE(usage.find("  " + o.name), std::string::npos) << o.name;
  EXPECT_NE(usage.find("--fidelity event|analytical"), std::string::npos) << usage;
}

}  // namespace
}  // namespace megascale::base
