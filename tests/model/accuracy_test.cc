// tests/model/accuracy_test.cc: the MFU error figures of model/accuracy.h are
// the ones results/validation.md reports (its "Summary" table, column "Table 2
// mean", per fidelity): regenerating the report without updating them fails.
#include "model/accuracy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace megascale::model {
namespace {

// The first number cell of the summary row "| FIDELITY | ..." (Table 2 mean).
double table2_mean(const std::string& report, const std::string& fidelity) {
  const std::string row = "\n| " + fidelity + " | ";
  const size_t at = report.find(row);
  if (at == std::string::npos) return -1;
  return std::strtod(report.c_str() + at + row.size(), nullptr);
}

TEST(Accuracy, ErrorFiguresAreTheValidationReports) {
  std::ifstream in(std::string(MEGASCALE_SOURCE_DIR) + "/results/validation.md");
  ASSERT_TRUE(in) << "results/validation.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string report = text.str();
  ASSERT_NE(report.find("| fidelity | Table 2 mean |"), std::string::npos) << "the summary's columns changed";
  EXPECT_NEAR(table2_mean(report, "analytical"), kAnalyticalMfuErrorPoints, 0.005)
      << "update kAnalyticalMfuErrorPoints in model/accuracy.h";
  EXPECT_NEAR(table2_mean(report, "event"), kEventMfuErrorPoints, 0.005)
      << "update kEventMfuErrorPoints in model/accuracy.h";
}

}  // namespace
}  // namespace megascale::model
