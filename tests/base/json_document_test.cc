// tests/base/json_document_test.cc: a JSON file's syntax error at its line and column.
#include "base/json_document.h"

#include <gtest/gtest.h>

namespace megascale::base {
namespace {

JsonSyntaxError error_of(const std::string& text) {
  try {
    parse_json_document(text, "f.json");
  } catch (const JsonSyntaxError& e) {
    return e;
  }
  ADD_FAILURE() << "parsed: " << text;
  return JsonSyntaxError("", 0, 0, "");
}

TEST(JsonDocument, ParsesAWholeDocument) {
  const Json j = parse_json_document("{\n  \"a\": [1, 2]\n}\n", "f.json");
  EXPECT_EQ(j["a"][1], 2);
}

TEST(JsonDocument, SyntaxErrorsNameTheirLineAndColumn) {
  // The stray 'x' on line 3, column 8.
  const JsonSyntaxError bad = error_of("{\n  \"a\": 1,\n  \"b\": x\n}\n");
  EXPECT_EQ(bad.line(), 3);
  EXPECT_EQ(bad.column(), 8);
  EXPECT_EQ(std::string(bad.what()).rfind("f.json:3:8: not valid JSON (syntax error", 0), 0u) << bad.what();
  // Cut short: the error is at the end of the text, on its last line.
  const JsonSyntaxError cut = error_of("{\n  \"a\": [1,\n  2");
  EXPECT_EQ(cut.line(), 3);
  EXPECT_EQ(cut.column(), 4);
  // Text after the document.
  EXPECT_EQ(error_of("{}\n{}").line(), 2);
  EXPECT_EQ(std::string(error_of("\n  \n").what()), "f.json:3:1: not valid JSON (the file is empty)");
  // A number no double holds: nlohmann gives no offset, the number is found.
  const JsonSyntaxError big = error_of("{\n  \"a\": 1e400\n}");
  EXPECT_EQ(std::string(big.what()), "f.json:2:8: not valid JSON (number overflow parsing '1e400')");
}

}  // namespace
}  // namespace megascale::base
