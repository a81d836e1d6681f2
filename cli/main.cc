// cli/main.cc: `megascale <command> ...` (see cli/commands.h, README.md).
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  megascale::cli::Args args(argv + 1, argv + argc);
  return megascale::cli::run_cli(args, std::cout, std::cerr);
}
