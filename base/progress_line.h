// base/progress_line.h: one progress report on a stream that may or may not be
// a terminal. On a terminal each update rewrites the line in place ("\r");
// written to a file or a pipe (a CI log, `2> log`) a carriage return would
// pile every update onto one unreadable line, so there an update becomes a
// line of its own, at most one per tenth of the work and always the last.
//
// defines: ProgressLine, is_terminal
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace megascale::base {

// True when `os` is std::cout or std::cerr (or std::clog) and that file
// descriptor is a terminal; false for any other stream.
bool is_terminal(const std::ostream& os);

class ProgressLine {
 public:
  // `terminal`: rewrite in place; otherwise one line per tenth of the work.
  ProgressLine(std::ostream& out, bool terminal) : out_(out), terminal_(terminal) {}
  explicit ProgressLine(std::ostream& out) : ProgressLine(out, is_terminal(out)) {}

  // `text` (no newline) describes `done` of `total` units of work.
  void update(const std::string& text, int64_t done, int64_t total);

 private:
  std::ostream& out_;
  bool terminal_;
  int64_t last_tenth_ = -1;  // the tenth of the work last written off a terminal
};

}  // namespace megascale::base
