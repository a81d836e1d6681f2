// cli/main.cc: `megascale <command> ...` (see cli/commands.h, README.md).
#include <iostream>

#include "cli/calibrate_command.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  megascale::cli::Args args(argv + 1, argv + argc);
  // `calibrate` lives in this executable only (it links the event simulator).
  if (!args.empty() && args[0] == "calibrate") {
    return megascale::cli::cmd_calibrate(megascale::cli::Args(args.begin() + 1, args.end()), std::cout, std::cerr);
  }
  return megascale::cli::run_cli(args, std::cout, std::cerr);
}
