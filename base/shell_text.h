// base/shell_text.h: a string as one POSIX shell word (single-quoted, inner
// quotes as '\''), for the commands the CLI and calibrate/ hand to mpirun.
// Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: pure function.
#pragma once

#include <string>

namespace megascale::base {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace megascale::base
