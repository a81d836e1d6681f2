// calibrate/csv_line.cc: see csv_line.h.
#include "calibrate/csv_line.h"

#include "base/number_text.h"
#include "calibrate/nccl_tests.h"  // ImportError

namespace megascale::calibrate {

std::vector<std::string> split_csv_line(std::string_view line, const std::string& source, int line_no) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, was_quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"' && base::trim(cur).empty()) {
      quoted = was_quoted = true;
      cur.clear();
    } else if (was_quoted && (c == ' ' || c == '\t')) {
      // blanks between a closing quote and the comma are not part of the field
    } else if (c == ',') {
      out.push_back(was_quoted ? cur : std::string(base::trim(cur)));
      cur.clear();
      was_quoted = false;
    } else {
      cur += c;
    }
  }
  if (quoted) throw ImportError(source + ":" + std::to_string(line_no) + ": unterminated quoted field");
  out.push_back(was_quoted ? cur : std::string(base::trim(cur)));
  return out;
}

}  // namespace megascale::calibrate
