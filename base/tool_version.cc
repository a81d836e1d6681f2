// base/tool_version.cc: the build's version and commit (cmake/BuildInfo.cmake
// generates base/build_info.h; only this file includes it, so a new commit
// recompiles one file).
#include "base/json.h"

#include "base/build_info.h"

namespace megascale::base {

std::string git_commit() { return MEGASCALE_GIT_COMMIT; }

std::string tool_version() {
  return std::string("megascale ") + MEGASCALE_VERSION_STRING + " (git " + MEGASCALE_GIT_COMMIT + ")";
}

}  // namespace megascale::base
