// base/text_file.cc: see text_file.h.
#include "base/text_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "base/temp_file.h"

namespace megascale::base {

bool write_text_atomically(const std::string& path, const std::string& text) {
  std::string tmp;
  const int fd = create_temp_beside(path, &tmp);
  if (fd < 0) return false;
  size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    ok = w > 0;
    if (ok) done += static_cast<size_t>(w);
  }
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = errno;  // the failure's, not remove()'s
    std::remove(tmp.c_str());
    errno = why;
    return false;
  }
  return true;
}

void write_text_or_throw(const std::string& path, const std::string& text) {
  errno = 0;
  if (write_text_atomically(path, text)) return;
  const int why = errno;
  throw std::runtime_error(path + ": cannot write (" + (why != 0 ? std::strerror(why) : "unknown reason") + ")");
}

}  // namespace megascale::base
