// base/json_text.h: a string as a JSON string literal (quotes, backslash,
// control characters escaped), for every writer of JSON in the project (CLI
// reports, Chrome traces). Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: pure function.
#pragma once

#include <cstdio>
#include <string>

namespace megascale::base {

inline std::string json_escape(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace megascale::base
