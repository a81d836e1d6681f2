// base/text_file.h: writing a whole text file (a report, a profile) so that a
// reader never sees half of it and nothing at a predictable temporary name is
// followed: base/temp_file.h's fresh temporary beside `path`, then rename(2).
//
// defines: write_text_atomically, write_text_or_throw
#pragma once

#include <string>

namespace megascale::base {

// True when `path` now holds `text`; false (the temporary removed, `path`
// untouched) when it cannot be written.
bool write_text_atomically(const std::string& path, const std::string& text);

// write_text_atomically, or std::runtime_error "PATH: cannot write (REASON)"
// with the system's reason (no such directory, permission denied, disk full).
void write_text_or_throw(const std::string& path, const std::string& text);

}  // namespace megascale::base
