// cli/commands.h: the `megascale` commands. Each is a table (base/options.h: its
// usage line, summary and options) and a function that takes the parsed
// arguments and the output streams and returns the process exit code: 0
// success, 1 a prediction that cannot be made (e.g. nothing fits), 2 bad input.
// Bad input is thrown: UsageError (exit 2 with the command's usage),
// model::ScenarioError, network::FabricError, std::invalid_argument (exit 2
// with the message, which names file, line, key and reason).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "base/options.h"

namespace megascale::cli {

using Args = std::vector<std::string>;

// The option tables (base/options.h), by their short names here.
using base::Command;
using base::int_list;
using base::Kind;
using base::kAboveZero;
using base::kMaxInt;
using base::kNoLimit;
using base::Option;
using base::ParsedArgs;
using base::read_option;
using base::split_list;
using base::UsageError;

struct CommandEntry {
  Command command;
  int (*run)(const ParsedArgs& p, std::ostream& out, std::ostream& err);
  // calibrate's commands run the engine and read measurements: any other
  // exception is a failed run (exit 1 with its message); elsewhere it escapes
  // (a bug, which the fuzz tests look for).
  bool other_errors_exit_1 = false;
};

// compare and validate are in cli/commands.cc.
CommandEntry simulate_command();                 // cli/simulate_command.cc
CommandEntry search_command();                   // cli/search_command.cc
CommandEntry check_command();                    // cli/check_command.cc
std::vector<CommandEntry> net_commands();        // cli/net_command.cc: net collective|ecmp|incast
CommandEntry train_command();                    // cli/train_command.cc
CommandEntry run_command();                      // cli/run_command.cc
CommandEntry plan_command();                     // cli/plan_command.cc
std::vector<CommandEntry> calibrate_commands();  // cli/calibrate_command.cc: calibrate micro|import|...

// Rows several commands share.
Option json_flag(const std::string& help = "the report as one JSON object");
Option fidelity_option(const std::string& help);
Option set_option();

// Dispatches argv[0] (and argv[1] for net and calibrate) to its command; prints
// the usage for --help or an unknown command.
int run_cli(const Args& argv, std::ostream& out, std::ostream& err);

// Every command's usage (`megascale --help`).
std::string usage();

}  // namespace megascale::cli
