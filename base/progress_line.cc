// base/progress_line.cc: see progress_line.h.
#include "base/progress_line.h"

#include <unistd.h>

#include <iostream>

namespace megascale::base {

bool is_terminal(const std::ostream& os) {
  if (&os == &std::cout) return isatty(STDOUT_FILENO) == 1;
  if (&os == &std::cerr || &os == &std::clog) return isatty(STDERR_FILENO) == 1;
  return false;
}

void ProgressLine::update(const std::string& text, int64_t done, int64_t total) {
  const bool last = done >= total;
  if (terminal_) {
    out_ << '\r' << text << (last ? "\n" : "") << std::flush;
    return;
  }
  const int64_t tenth = total > 0 ? done * 10 / total : 10;
  if (!last && tenth <= last_tenth_) return;
  last_tenth_ = last ? 10 : tenth;
  out_ << text << '\n' << std::flush;
}

}  // namespace megascale::base
