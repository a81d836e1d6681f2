// cli/calibrate_command.h: `megascale calibrate ...` (cli/calibrate_command.cc),
// in the `megascale` executable only (calibrate/ links sim/, SimGrid).
#pragma once

#include <ostream>
#include <string>

#include "cli/commands.h"

namespace megascale::cli {

int cmd_calibrate(const Args& args, std::ostream& out, std::ostream& err);
std::string calibrate_usage();

}  // namespace megascale::cli
