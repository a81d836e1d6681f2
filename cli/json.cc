// cli/json.cc: JSON rendering.
#include "cli/json.h"

#include "base/json_text.h"

#include <cmath>
#include <cstdio>

namespace megascale::cli {

std::string json_escape(const std::string& s) { return base::json_escape(s); }


std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

JsonObject& JsonObject::add(const std::string& key, double v) { return add_raw(key, json_number(v)); }
JsonObject& JsonObject::add(const std::string& key, int64_t v) { return add_raw(key, std::to_string(v)); }
JsonObject& JsonObject::add(const std::string& key, bool v) { return add_raw(key, v ? "true" : "false"); }
JsonObject& JsonObject::add(const std::string& key, const std::string& v) {
  return add_raw(key, json_escape(v));
}
JsonObject& JsonObject::add_raw(const std::string& key, const std::string& json) {
  fields_.emplace_back(key, json);
  return *this;
}

std::string JsonObject::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i > 0) out += ", ";
    out += json_escape(fields_[i].first) + ": " + fields_[i].second;
  }
  return out + "}";
}

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += items[i];
  }
  return out + "]";
}

}  // namespace megascale::cli
