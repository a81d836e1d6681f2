// tests/cli/args_test.cc: parse_args (cli/args.h, on CLI11) keeps the command
// line's contract: positionals anywhere, `--opt value` and `--opt=value`, every
// value of a repeated option, negative numbers as values, and UsageErrors that
// name the option.
#include "cli/args.h"

#include <gtest/gtest.h>

namespace megascale::cli {
namespace {

const std::set<std::string> kSwitches = {"--json", "--update"};
const std::set<std::string> kValued = {"--set", "--fail-at", "--gpus"};

std::string usage_error(const std::vector<std::string>& args) {
  try {
    parse_args(args, kSwitches, kValued);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ParseArgsTest, PositionalsSwitchesAndRepeatedOptions) {
  const ParsedArgs p = parse_args({"a.toml", "--set", "x=1", "b.toml", "--set=y=2", "--json", "--gpus=8"}, kSwitches,
                                  kValued);
  EXPECT_EQ(p.positional, (std::vector<std::string>{"a.toml", "b.toml"}));
  EXPECT_TRUE(p.on("--json"));
  EXPECT_FALSE(p.on("--update"));
  EXPECT_EQ(p.all("--set"), (std::vector<std::string>{"x=1", "y=2"}));
  EXPECT_EQ(p.values.at("--set"), "y=2");  // the last one
  EXPECT_EQ(p.values.at("--gpus"), "8");
  EXPECT_FALSE(p.has("--fail-at"));
  EXPECT_TRUE(p.all("--fail-at").empty());
}

TEST(ParseArgsTest, NegativeNumberIsTheOptionsValue) {
  ParsedArgs p = parse_args({"--fail-at", "-1", "s.toml"}, kSwitches, kValued);
  EXPECT_EQ(p.values.at("--fail-at"), "-1");
  EXPECT_EQ(p.positional, (std::vector<std::string>{"s.toml"}));
  p = parse_args({"--fail-at", "-0.1"}, kSwitches, kValued);
  EXPECT_EQ(p.values.at("--fail-at"), "-0.1");
}

TEST(ParseArgsTest, ErrorsNameTheOption) {
  EXPECT_EQ(usage_error({"--frobnicate", "3"}), "unknown option '--frobnicate'");
  EXPECT_EQ(usage_error({"-x"}), "unknown option '-x'");
  EXPECT_EQ(usage_error({"--gpus"}), "--gpus needs a value");
  EXPECT_EQ(usage_error({"--set", "a=1", "--gpus"}), "--gpus needs a value");
  EXPECT_EQ(usage_error({"--json=1"}), "--json takes no value");
  EXPECT_EQ(usage_error({"--help"}), "unknown option '--help'");  // commands print usage before parsing
}

}  // namespace
}  // namespace megascale::cli
