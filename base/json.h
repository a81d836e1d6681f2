// base/json.h: the project's JSON type and the stamp every JSON report carries.
//
// All JSON the project writes or reads goes through nlohmann-json (Debian
// nlohmann-json3-dev): `Json` keeps keys in insertion order, so reports are
// stable and diffable, and it writes NaN and infinities as null. Every report
// printed with `--json` starts with report_header(): `schema_version` (bumped
// when a key is renamed or removed or its meaning changes; adding keys keeps it)
// and `tool_version` (version and git commit of the build, cmake/BuildInfo.cmake).
//
// Thread-safety: plain values; tool_version() is a pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace megascale::base {

using Json = nlohmann::ordered_json;

// Version of the layout of every `--json` report (README, "JSON reports").
constexpr int kReportSchemaVersion = 1;

// "megascale 0.1.0 (git 1a2b3c4d5e6f)"; "-dirty" marks uncommitted changes,
// "unknown" a build outside a git checkout.
std::string tool_version();
// "1a2b3c4d5e6f" (or "unknown").
std::string git_commit();

// {"schema_version": 1, "tool_version": "..."}: the first keys of a report.
inline Json report_header() {
  Json j;
  j["schema_version"] = kReportSchemaVersion;
  j["tool_version"] = tool_version();
  return j;
}

// Appends `body`'s keys (in their order) after `head`'s.
inline Json with_header(const Json& body) {
  Json j = report_header();
  for (const auto& [k, v] : body.items()) j[k] = v;
  return j;
}

}  // namespace megascale::base
