// cli/json.h: a small JSON writer for the reports (DESIGN.md, contract 4).
//
// Values are rendered as they are added; objects keep insertion order so the
// output is stable and diffable. Non-finite numbers are written as null.
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace megascale::cli {

std::string json_escape(const std::string& s);
std::string json_number(double v);

class JsonObject {
 public:
  JsonObject& add(const std::string& key, double v);
  JsonObject& add(const std::string& key, int64_t v);
  JsonObject& add(const std::string& key, int v) { return add(key, static_cast<int64_t>(v)); }
  JsonObject& add(const std::string& key, bool v);
  JsonObject& add(const std::string& key, const std::string& v);
  JsonObject& add(const std::string& key, const char* v) { return add(key, std::string(v)); }
  JsonObject& add(const std::string& key, const JsonObject& v) { return add_raw(key, v.str()); }
  // `json` must already be valid JSON text.
  JsonObject& add_raw(const std::string& key, const std::string& json);
  std::string str() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

// "[a,b,...]" from already-rendered JSON values.
std::string json_array(const std::vector<std::string>& items);

}  // namespace megascale::cli
