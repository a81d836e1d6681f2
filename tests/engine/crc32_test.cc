// tests/engine/crc32_test.cc: CRC-32 check value and incremental use.
#include "engine/crc32.h"

#include <gtest/gtest.h>

#include <string>

namespace megascale::engine {
namespace {

TEST(Crc32, StandardCheckValue) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32(s.data(), s.size()), 0xCBF43926u);
  EXPECT_EQ(crc32(nullptr, 0), 0u);
}

TEST(Crc32, IncrementalEqualsWhole) {
  const std::string s = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32(s.data(), s.size());
  EXPECT_EQ(whole, 0x414FA339u);
  uint32_t c = crc32_update(0, s.data(), 10);
  c = crc32_update(c, s.data() + 10, s.size() - 10);
  EXPECT_EQ(c, whole);
}

}  // namespace
}  // namespace megascale::engine
