// base/text_file.cc: see text_file.h.
#include "base/text_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
  throw OutputFileError(path, why != 0 ? std::strerror(why) : "unknown reason");
}

void check_output_path(const std::string& path, bool create_folders) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw OutputFileError(path, std::strerror(EISDIR));
  fs::path folder = fs::path(path).parent_path();
  if (create_folders) {
    // The nearest folder that exists: the writer makes the ones below it (a
    // relative path's top folder is made in the working folder).
    while (!folder.empty() && !fs::exists(folder, ec) && folder.parent_path() != folder) {
      folder = folder.parent_path();
    }
  }
  if (folder.empty()) folder = ".";
  if (!fs::exists(folder, ec)) throw OutputFileError(path, std::strerror(ENOENT));
  if (!fs::is_directory(folder, ec)) throw OutputFileError(path, std::strerror(ENOTDIR));
  // A file made there and removed: access(2) says yes to root on /proc or a
  // read-only mount, where the writer then failed after the work (minutes of
  // `calibrate micro`).
  std::string probe;
  const int fd = create_temp_beside((folder / ".megascale-write-probe").string(), &probe);
  if (fd < 0) throw OutputFileError(path, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void make_folder_or_throw(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (!ec && std::filesystem::is_directory(path, ec)) return;
  throw FileError(path, "make this folder", ec ? ec.message() : std::string("a file is in the way"));
}

std::string file_identity(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  return ec ? path : canonical.string();
}

void refuse_repeated_files(const std::vector<std::string>& files, const std::string& why, const std::string& label) {
  for (size_t i = 0; i < files.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (file_identity(files[j]) != file_identity(files[i])) continue;
      throw std::invalid_argument((label.empty() ? "" : label + " ") + files[i] + " is given twice (as " + files[j] +
                                  "): " + why);
    }
  }
}

std::string read_text_or_throw(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw InputFileError(path, std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int why = errno;  // EISDIR for a directory
      ::close(fd);
      throw InputFileError(path, std::strerror(why));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      throw InputFileError(path, "more than " + std::to_string(max_bytes) + " bytes: not a text input");
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace megascale::base
