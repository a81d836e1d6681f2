// Tests for model/megatron_layout.h: Megatron-Core's --pipeline-model-parallel-layout
// strings, read as megatron/core/transformer/pipeline_parallel_layer_layout.py does.
#include "model/megatron_layout.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::model {
namespace {

std::string error_of(const std::string& text, int layers) {
  try {
    parse_megatron_layout(text, layers);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// Megatron-Bridge's Llama 3 70B H100 FP8 recipe: PP 8 x VPP 5 = 40 virtual
// stages, 80 layers; virtual stage 35 (rank 3's last chunk) holds 3, the last
// (rank 7's, with the loss) 1, the others 2.
TEST(MegatronLayout, BridgeLlama3_70bRecipe) {
  const std::vector<int> v = parse_megatron_layout("Et*2|(t*2|)*34,t*3|(t*2|)*3,tL", 80);
  ASSERT_EQ(v.size(), 40u);
  for (size_t i = 0; i < v.size(); ++i) {
    const int want = i == 35 ? 3 : i == 39 ? 1 : 2;
    EXPECT_EQ(v[i], want) << "virtual stage " << i;
  }
}

// The docstring's example without its MTP layer, and the unrolling rules:
// "(ab)*n" repeats text, "x*n" one character ('|' included), commas vanish.
TEST(MegatronLayout, RepeatRules) {
  EXPECT_EQ(parse_megatron_layout("Ettt|(tt|)*29,t|L", 62), (std::vector<int>{[] {
              std::vector<int> v{3};
              for (int i = 0; i < 29; ++i) v.push_back(2);
              v.push_back(1);
              v.push_back(0);
              return v;
            }()}));
  EXPECT_EQ(parse_megatron_layout("E|*3tL", 1), (std::vector<int>{0, 0, 0, 1}));
  EXPECT_EQ(parse_megatron_layout("E,t,t|t,t,L", 4), (std::vector<int>{2, 2}));
  EXPECT_EQ(parse_megatron_layout("Et*12L", 12), (std::vector<int>{12}));
}

// Written back the way Megatron-Bridge's recipe spells it, and read back the same.
TEST(MegatronLayout, FormatIsTheRecipesSpellingAndRoundTrips) {
  std::vector<int> bridge(40, 2);
  bridge[35] = 3;
  bridge[39] = 1;
  EXPECT_EQ(format_megatron_layout(bridge), "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
  // Meta's Llama 3 405B split: 16 stages x 8 chunks, the embedding's and the
  // head's chunks without layers.
  std::vector<int> llama(128, 1);
  llama[0] = 0;
  llama[127] = 0;
  const std::string text = format_megatron_layout(llama);
  EXPECT_EQ(text, "E|(t|)*126,L");
  EXPECT_EQ(parse_megatron_layout(text, 126), llama);
  for (const std::vector<int>& v : {std::vector<int>{5}, {0, 3}, {2, 2}, {1, 0, 0, 2, 2, 1}, {3, 1, 3, 1, 0}}) {
    int layers = 0;
    for (int x : v) layers += x;
    EXPECT_EQ(parse_megatron_layout(format_megatron_layout(v), layers), v) << format_megatron_layout(v);
  }
  EXPECT_EQ(format_megatron_layout({5}), "Et*5L");
  EXPECT_EQ(format_megatron_layout({1, 0, 0, 2, 2, 1}), "Et|(|)*2,(t*2|)*2,tL");
}

TEST(MegatronLayout, BadStringsSayWhy) {
  EXPECT_NE(error_of("tE|tL", 2).find("'E' must come first"), std::string::npos);
  EXPECT_NE(error_of("Et|Lt", 2).find("'L' must come last"), std::string::npos);
  EXPECT_NE(error_of("t|tL", 2).find("start with the embedding"), std::string::npos);
  EXPECT_NE(error_of("Et|t", 2).find("end with the loss"), std::string::npos);
  EXPECT_NE(error_of("Et|tt|L", 2).find("holds 3 transformer layers"), std::string::npos);
  EXPECT_NE(error_of("Et|m|L", 1).find("not modelled"), std::string::npos);
  EXPECT_NE(error_of("Et|x|L", 1).find("'x' is no layer letter"), std::string::npos);
  EXPECT_NE(error_of("Et |L", 1).find("' ' is no layer letter"), std::string::npos);
  // A stray character after the loss is named, not the loss's place.
  EXPECT_NE(error_of("Et|tL ", 2).find("' ' is no layer letter"), std::string::npos);
  // Bytes outside printable ASCII are shown by value (the message stays ASCII).
  const std::string accented = error_of("\xC3\x89t|tL", 2);
  EXPECT_NE(accented.find("byte 0xC3 is no layer letter"), std::string::npos) << accented;
  EXPECT_NE(accented.find("'\\xC3\\x89t|tL'"), std::string::npos) << accented;
  EXPECT_NE(error_of("EEt|tL", 2).find("more than one embedding"), std::string::npos);
  EXPECT_NE(error_of("Et|tLL", 2).find("more than one loss"), std::string::npos);
  EXPECT_NE(error_of("E(t|L", 1).find("'(' at character 2 is not closed"), std::string::npos);
  EXPECT_NE(error_of("Et)|L", 1).find("')' at character 3 has no '('"), std::string::npos);
  EXPECT_NE(error_of("E((t|)*2)*2L", 4).find("do not nest"), std::string::npos);
  EXPECT_NE(error_of("E(t|)L", 1).find("must be followed by '*n'"), std::string::npos);
  EXPECT_NE(error_of("E(t|)*L", 1).find("must be followed by a count"), std::string::npos);
  EXPECT_NE(error_of("Et*0|L", 0).find("must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("Et*99999999L", 1).find("too large"), std::string::npos);
  EXPECT_NE(error_of("E*t", 1).find("must be followed by a count"), std::string::npos);
  EXPECT_NE(error_of("", 1).find("empty"), std::string::npos);
  EXPECT_NE(error_of("E()*2L", 0).find("empty"), std::string::npos);
  EXPECT_NE(error_of("E(t*999|)*999999L", 1).find("expands to more than"), std::string::npos);
}

}  // namespace
}  // namespace megascale::model
