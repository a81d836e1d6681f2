// cli/main.cc: `megascale <command> ...` (see cli/commands.h, README.md).
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  return megascale::cli::run_cli(megascale::cli::Args(argv + 1, argv + argc), std::cout, std::cerr);
}
