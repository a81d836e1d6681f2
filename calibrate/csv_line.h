// calibrate/csv_line.h: one CSV record split into its fields, the one splitter
// every CSV reader of calibrate/ uses (measured runs, GEMM sweeps, published
// per-layer times).
//
// defines: split_csv_line
//
// RFC 4180 quoting within one line: a field that starts with '"' (after blanks)
// runs to the closing quote, "" inside it is one quote, commas inside it are
// text, blanks after its closing quote are dropped; unquoted fields are trimmed
// of blanks; a trailing '\r' ends the line. Quotes do not span lines (no reader
// here has multi-line fields).
//
// Errors: ImportError "SOURCE:LINE: unterminated quoted field".
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace megascale::calibrate {

std::vector<std::string> split_csv_line(std::string_view line, const std::string& source, int line_no);

}  // namespace megascale::calibrate
