// base/json_document.h: a JSON file's text parsed, with the line and column of
// the first syntax error.
//
// nlohmann-json's parse_error reports a byte offset ("at line 1, column 301"
// for a one-line file, the byte count for others); a user fixing a golden file or
// a recovery profile by hand needs the line of the file in their editor.
//
// Thread-safety: a pure function.
#pragma once

#include <stdexcept>
#include <string>

#include "base/json.h"

namespace megascale::base {

// what(): "PATH:LINE:COLUMN: not valid JSON (REASON)"; line() and column() are 1-based.
class JsonSyntaxError : public std::invalid_argument {
 public:
  JsonSyntaxError(const std::string& path, int line, int column, const std::string& reason);
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& reason() const { return reason_; }

 private:
  int line_;
  int column_;
  std::string reason_;
};

// Parses `text` (read from `path`, named in the error) as one JSON document.
// Throws JsonSyntaxError where it is not one (truncated, empty, trailing text).
Json parse_json_document(const std::string& text, const std::string& path);

}  // namespace megascale::base
