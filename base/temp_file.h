// base/temp_file.h: a fresh temporary file beside a destination, for writes that
// end in rename(2) (datasets, checkpoint shards).
//
// defines: create_temp_beside
//
// mkstemp(3) creates "<path>.tmp.XXXXXX" with O_CREAT | O_EXCL and mode 0600:
// a name no other process chose, never an existing file or a symlink planted at
// a predictable name (a fixed "<path>.tmp" opened with O_TRUNC followed a link
// and overwrote its target; issue 13), and two writers of one path do not
// truncate each other's temporary. The caller writes, closes, and renames the
// temporary over `path` (or removes it on failure).
//
// Thread-safety: reentrant.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>

#include <string>
#include <vector>

namespace megascale::base {

// Returns an open file descriptor (mode 0644 once created) and sets *tmp_path to
// its name, or returns -1 with errno set.
inline int create_temp_beside(const std::string& path, std::string* tmp_path) {
  std::vector<char> name(path.begin(), path.end());
  const std::string suffix = ".tmp.XXXXXX";
  name.insert(name.end(), suffix.begin(), suffix.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) return -1;
  ::fchmod(fd, 0644);  // readable like the files it replaces (mkstemp makes 0600)
  *tmp_path = name.data();
  return fd;
}

}  // namespace megascale::base
