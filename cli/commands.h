// cli/commands.h: the `megascale` subcommands. Each takes its arguments (after the
// subcommand name) and the output streams, and returns the process exit code:
// 0 success, 1 a prediction that cannot be made (e.g. nothing fits), 2 bad input
// (usage, scenario errors; the message names file, line, key and reason).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace megascale::cli {

using Args = std::vector<std::string>;

int cmd_simulate(const Args& args, std::ostream& out, std::ostream& err);
int cmd_compare(const Args& args, std::ostream& out, std::ostream& err);
int cmd_search(const Args& args, std::ostream& out, std::ostream& err);
int cmd_validate(const Args& args, std::ostream& out, std::ostream& err);
// `megascale net collective|ecmp|incast ...` (cli/net_command.cc).
int cmd_net(const Args& args, std::ostream& out, std::ostream& err);
// `megascale train FILE [--json]` (cli/train_command.cc).
int cmd_train(const Args& args, std::ostream& out, std::ostream& err);
// `megascale run FILE [--inject SPEC]... [--set K=V]... [--out FILE]` (cli/run_command.cc):
// robust training with fault injection and a measured recovery profile.
int cmd_run(const Args& args, std::ostream& out, std::ostream& err);
// `megascale plan FILE [--json] [--runs N] [--seed S] [--sweep ...] [--plot F.svg]`
// (cli/plan_command.cc): failures, recovery and ETTR of a multi-week run.
int cmd_plan(const Args& args, std::ostream& out, std::ostream& err);

// `megascale check DIR|FILE... --golden FILE [--tolerance 2%] [--update]`
// (cli/check_command.cc): scenarios against stored results, a CI gate. Throws
// UsageError / std::invalid_argument / model::ScenarioError (run_cli turns them
// into exit 2).
int cmd_check(const Args& args, std::ostream& out, std::ostream& err);

// `megascale calibrate micro|import|check|fit|net-check|runs-check ...`
// (cli/calibrate_command.cc) and its usage.
int cmd_calibrate(const Args& args, std::ostream& out, std::ostream& err);
std::string calibrate_usage();

// Dispatches argv[1] to a command; prints usage for --help or an unknown command.
int run_cli(const Args& argv, std::ostream& out, std::ostream& err);

std::string usage();
// One command's lines of usage() ("usage: megascale COMMAND ..."), for usage
// errors; the whole usage for a command it does not list.
std::string command_usage(const std::string& command);

}  // namespace megascale::cli
