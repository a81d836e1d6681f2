// base/json_document.cc: see json_document.h.
#include "base/json_document.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace megascale::base {

JsonSyntaxError::JsonSyntaxError(const std::string& path, int line, int column, const std::string& reason)
    : std::invalid_argument(fmt::format("{}:{}:{}: not valid JSON ({})", path, line, column, reason)),
      line_(line),
      column_(column),
      reason_(reason) {}

namespace {

// 1-based line and column of byte `at` (0-based) of `text`.
std::pair<int, int> line_column(const std::string& text, size_t at) {
  at = std::min(at, text.size());
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  const size_t line_start = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
  const int column = static_cast<int>(at - (line_start == std::string::npos ? 0 : line_start + 1)) + 1;
  return {line, column};
}

// nlohmann's what() without its "[json.exception.parse_error.101] parse error
// at line 1, column 3: " prefix: what was read and what was expected.
std::string reason_of(const nlohmann::json::exception& e) {
  std::string reason = e.what();
  if (const size_t tag = reason.find("] "); tag != std::string::npos) reason = reason.substr(tag + 2);
  if (reason.rfind("parse error", 0) == 0) {
    if (const size_t colon = reason.find(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
  }
  return reason;
}

}  // namespace

Json parse_json_document(const std::string& text, const std::string& path) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte: 1-based offset of the character the parser stopped at (the text's
    // length + 1 at its end).
    const auto [line, column] = line_column(text, e.byte > 0 ? static_cast<size_t>(e.byte - 1) : 0);
    const bool empty = text.find_first_not_of(" \t\r\n") == std::string::npos;
    throw JsonSyntaxError(path, line, column, empty ? "the file is empty" : reason_of(e));
  } catch (const nlohmann::json::exception& e) {
    // A number too large for a double ("number overflow parsing '1e400'"): no
    // offset is given, so the error points at the number's first occurrence.
    const std::string reason = reason_of(e);
    size_t at = 0;
    if (const size_t q = reason.find('\''); q != std::string::npos) {
      if (const size_t q2 = reason.find('\'', q + 1); q2 != std::string::npos) {
        at = text.find(reason.substr(q + 1, q2 - q - 1));
      }
    }
    if (at == std::string::npos) at = 0;
    const auto [line, column] = line_column(text, at);
    throw JsonSyntaxError(path, line, column, reason);
  }
}

}  // namespace megascale::base
