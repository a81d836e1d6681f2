// robust/attempt_dirs.cc: see attempt_dirs.h.
#include "robust/attempt_dirs.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>
#include <vector>

namespace megascale::robust {
namespace {

constexpr std::string_view kPrefix = "attempt_";

bool is_attempt_name(const std::string& name) {
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), name.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

std::string attempt_dir(const std::string& work_dir, int attempt) {
  return (std::filesystem::path(work_dir) / (std::string(kPrefix) + std::to_string(attempt))).string();
}

int remove_attempt_dirs(const std::string& work_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(work_dir, ec)) return 0;
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(work_dir)) {
    if (e.is_directory() && !e.is_symlink() && is_attempt_name(e.path().filename().string())) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) fs::remove_all(p);
  return static_cast<int>(stale.size());
}

}  // namespace megascale::robust
