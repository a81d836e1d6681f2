// base/text_file.h: writing a whole text file (a report, a profile) so that a
// reader never sees half of it and nothing at a predictable temporary name is
// followed: base/temp_file.h's fresh temporary beside `path`, then rename(2).
// And reading a whole input file (a measurement, a manifest, a profile) so
// that a directory, an unreadable file or an endless one (/dev/zero) is an
// error naming the path and the reason, not an empty input.
//
// defines: write_text_atomically, write_text_or_throw, FileError,
//          OutputFileError, check_output_path, make_folder_or_throw, file_identity,
//          refuse_repeated_files, InputFileError,
//          read_text_or_throw, kMaxInputBytes
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::base {

// True when `path` now holds `text`; false (the temporary removed, `path`
// untouched) when it cannot be written.
bool write_text_atomically(const std::string& path, const std::string& text);

// A file that cannot be read or written: what() is "PATH: cannot ACTION
// (REASON)" with the system's reason (no such directory, permission denied,
// a directory, disk full). An invalid_argument: the CLI reports it as a bad
// option value or input (exit 2).
class FileError : public std::invalid_argument {
 public:
  FileError(const std::string& path, const std::string& action, const std::string& reason)
      : std::invalid_argument(path + ": cannot " + action + " (" + reason + ")"), path_(path), reason_(reason) {}
  const std::string& path() const { return path_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string path_, reason_;
};

// An output that cannot be written: "PATH: cannot write (REASON)".
class OutputFileError : public FileError {
 public:
  OutputFileError(const std::string& path, const std::string& reason) : FileError(path, "write", reason) {}
};

// write_text_atomically, or OutputFileError.
void write_text_or_throw(const std::string& path, const std::string& text);

// Before a long job whose result goes to `path` (a benchmark of minutes, a
// training run): throws the OutputFileError its write would meet, so the
// work is not lost at the end. Refused: `path` is a directory; its folder is
// missing ("No such file or directory"; with `create_folders`, the nearest
// existing folder above it is checked instead, as the writer makes the rest),
// not a folder ("Not a directory") or not writable (the system's reason: a
// file is made there and removed, as access(2) says yes to root on /proc or a
// read-only mount). What it cannot foresee (a full disk) is still the
// writer's error.
void check_output_path(const std::string& path, bool create_folders = false);

// Makes the folder `path` and its parents, as a writer into it would later;
// throws FileError "PATH: cannot make this folder (REASON)" where it cannot be
// one (a file in the way, no permission, a read-only or virtual file system),
// so that a run fails on it before its work, not after.
void make_folder_or_throw(const std::string& path);

// The one name of a file however its path is spelled ("x", "./x", "d/../x", a
// symbolic link): its canonical path, or `path` as given where it cannot be
// resolved. Two inputs of one identity are one file given twice (a file scored,
// run or imported twice weighs twice).
std::string file_identity(const std::string& path);

// Throws std::invalid_argument "LABEL FILE is given twice (as EARLIER): WHY"
// for the first of `files` that is an earlier one (file_identity); `label`, if
// any, names the option they came from ("--gemm-csv").
void refuse_repeated_files(const std::vector<std::string>& files, const std::string& why,
                           const std::string& label = "");

// An input that cannot be read: "PATH: cannot read (REASON)".
class InputFileError : public FileError {
 public:
  InputFileError(const std::string& path, const std::string& reason) : FileError(path, "read", reason) {}
};

// Far above any text input of this project (the largest, a simulated trace of
// a 12,288-GPU step, is tens of MB), and a bound on what /dev/zero costs.
inline constexpr size_t kMaxInputBytes = size_t{1} << 30;

// The whole file at `path`. Throws InputFileError when it cannot be opened or
// read (missing, permission, a directory: the system's reason) or holds more
// than `max_bytes` (a device or a pipe without end).
std::string read_text_or_throw(const std::string& path, size_t max_bytes = kMaxInputBytes);

}  // namespace megascale::base
