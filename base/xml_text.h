// base/xml_text.h: text as XML / SVG character data or attribute value (&, <,
// >, " escaped), for every SVG the project writes (all through base/svg.h).
// Header-only, below every layer (see splitmix64.h).
//
// Thread-safety: pure function.
#pragma once

#include <string>

namespace megascale::base {

inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace megascale::base
