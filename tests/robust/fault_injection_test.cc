// Fault specs: text form, errors, and the byte flip behind corrupt_checkpoint.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "robust/fault_injection.h"

namespace megascale::robust {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_inject(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(FaultInjection, ParsesEveryFaultAndRoundTrips) {
  const model::InjectSpec k = parse_inject("kill:rank=1:step=5");
  EXPECT_EQ(k.fault, "kill");
  EXPECT_EQ(k.rank, 1);
  EXPECT_EQ(k.step, 5);
  const model::InjectSpec s = parse_inject("slow:rank=0:step=3:percent=250");
  EXPECT_DOUBLE_EQ(s.percent, 250);
  const model::InjectSpec r = parse_inject("redis_kill:step=4");
  EXPECT_EQ(r.fault, "redis_kill");
  for (const char* t : {"kill:rank=1:step=5", "hang:rank=0:step=2", "slow:rank=1:step=3:percent=250",
                        "traffic_stop:rank=1:step=7", "corrupt_checkpoint:rank=0:step=9", "redis_kill:step=4",
                        "slow_all:step=6:percent=400", "link_cut:rank=1:step=5", "node_down:rank=0:step=3"}) {
    EXPECT_EQ(format_inject(parse_inject(t)), t);
  }
  const auto list = parse_inject_list("kill:rank=1:step=5;redis_kill:step=2");
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(format_inject_list(list), "kill:rank=1:step=5;redis_kill:step=2");
  EXPECT_TRUE(parse_inject_list("").empty());
}

TEST(FaultInjection, BadTextNamesThePartAndTheReason) {
  EXPECT_NE(error_of("kil:rank=1:step=5").find("did you mean 'kill'"), std::string::npos) << error_of("kil:rank=1:step=5");
  EXPECT_NE(error_of("kill:rank=1").find("step=S is required"), std::string::npos);
  EXPECT_NE(error_of("kill:step=1").find("rank=R is required"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1:step=0").find("step expects a whole number >= 1"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=x:step=2").find("rank expects"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1:step=2:percent=5").find("only slow and slow_all take percent"), std::string::npos);
  EXPECT_NE(error_of("slow_all:step=2").find("slow_all needs percent=P"), std::string::npos);
  EXPECT_NE(error_of("slow_all:rank=1:step=2:percent=100").find("slow_all names no rank"), std::string::npos);
  EXPECT_NE(error_of("link_cut:step=2").find("rank=R is required"), std::string::npos);
  EXPECT_NE(error_of("link_cu:rank=1:step=2").find("did you mean 'link_cut'"), std::string::npos);
  EXPECT_NE(error_of("slow:rank=1:step=2").find("percent=P"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1:stp=2").find("did you mean 'step'"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1:step").find("key=value"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1:step=2").size(), 1u);  // valid: no error
  EXPECT_EQ(error_of("kill:rank=1:step=2"), "");
}

TEST(FaultInjection, CheckAgainstTheJob) {
  EXPECT_NO_THROW(check_inject(parse_inject("kill:rank=1:step=5"), 2, 10));
  EXPECT_THROW(check_inject(parse_inject("kill:rank=2:step=5"), 2, 10), std::invalid_argument);
  EXPECT_THROW(check_inject(parse_inject("kill:rank=1:step=11"), 2, 10), std::invalid_argument);
  EXPECT_NO_THROW(check_inject(parse_inject("redis_kill:step=3"), 2, 10));
  EXPECT_EQ(parse_inject("slow_all:step=3:percent=100").rank, -1);
  EXPECT_NO_THROW(check_inject(parse_inject("slow_all:step=3:percent=100"), 2, 10));
  EXPECT_THROW(check_inject(parse_inject("node_down:rank=2:step=3"), 2, 10), std::invalid_argument);
}

TEST(FaultInjection, CorruptFileFlipsExactlyTheBytes) {
  const std::string path = (std::filesystem::temp_directory_path() / ("megascale-corrupt-" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(path, std::ios::binary);
    for (int i = 0; i < 64; ++i) f.put(static_cast<char>(i));
  }
  corrupt_file(path, 10, 4);
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 64u);
  for (int i = 0; i < 64; ++i) {
    const char want = (i >= 10 && i < 14) ? static_cast<char>(~i) : static_cast<char>(i);
    EXPECT_EQ(bytes[static_cast<size_t>(i)], want) << "byte " << i;
  }
  EXPECT_THROW(corrupt_file(path, 62, 4), std::runtime_error);
  EXPECT_THROW(corrupt_file(path + ".absent", 0, 1), std::runtime_error);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace megascale::robust
