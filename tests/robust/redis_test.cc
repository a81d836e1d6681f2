// Redis client and private server against a real redis-server (skipped,
// visibly, when it is not installed).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "robust/redis_client.h"
#include "robust/redis_server.h"

namespace megascale::robust {
namespace {

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("megascale-robust-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(HostPort, ParsesAndRejects) {
  EXPECT_EQ(parse_host_port("127.0.0.1:6379"), std::make_pair(std::string("127.0.0.1"), 6379));
  EXPECT_THROW(parse_host_port("localhost"), std::invalid_argument);
  EXPECT_THROW(parse_host_port(":6379"), std::invalid_argument);
  EXPECT_THROW(parse_host_port("h:70000"), std::invalid_argument);
  EXPECT_THROW(parse_host_port("h:12x"), std::invalid_argument);
}

TEST(RedisClient, UnreachableServerFailsFastWithoutThrowing) {
  RedisClient c("127.0.0.1", free_local_port(), 0.2);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.ping());
  EXPECT_FALSE(c.set("k", "v"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_NE(c.error().find("cannot connect"), std::string::npos) << c.error();
}

TEST(RedisServer, CommandsKillAndReconnect) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisServer server(free_local_port(), temp_dir("server"));
  server.start();
  ASSERT_TRUE(server.running());
  RedisClient c("127.0.0.1", server.port(), 0.5);
  ASSERT_TRUE(c.ping());
  ASSERT_TRUE(c.set("a", "1"));
  EXPECT_EQ(c.get("a").value_or(""), "1");
  EXPECT_FALSE(c.get("absent").has_value());
  ASSERT_TRUE(c.hset("h", {{"x", "10"}, {"y", "with space"}}));
  bool ok = false;
  const auto h = c.hgetall("h", &ok);
  EXPECT_TRUE(ok);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.at("y"), "with space");
  ASSERT_TRUE(c.rpush("l", "p"));
  ASSERT_TRUE(c.rpush("l", "q"));
  EXPECT_EQ(c.lrange("l"), (std::vector<std::string>{"p", "q"}));
  // A crash: commands fail (no hang, no throw) ...
  server.kill();
  EXPECT_FALSE(server.running());
  EXPECT_FALSE(c.ping());
  EXPECT_FALSE(c.connected());
  // ... and the same client works again once a server is back on the port
  // (an empty one: the control plane's state is rewritten by its writers).
  server.start();
  EXPECT_TRUE(c.ping());
  EXPECT_FALSE(c.get("a").has_value());
  server.stop();
  EXPECT_FALSE(server.running());
}

TEST(RedisServer, PortInUseIsAClearError) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisServer first(free_local_port(), temp_dir("first"));
  first.start();
  RedisServer second(first.port(), temp_dir("second"));
  try {
    second.start(2.0);
    FAIL() << "a second server on a taken port started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first.port())), std::string::npos) << e.what();
  }
}

// Running and not a zombie (an orphan's exit may wait for a reaper).
bool process_alive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state != 'Z' && state != 'X';
}

// A driver SIGKILLed before stop() (no destructor runs) takes its server
// with it: nothing else would ever stop that redis-server.
TEST(RedisServer, DiesWithAKilledDriver) {
  if (!redis_server_available()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const int port = free_local_port();
  const std::string dir = temp_dir("orphan");
  const pid_t driver = ::fork();
  ASSERT_GE(driver, 0);
  if (driver == 0) {  // the driver: starts its server, then waits to be killed
    ::close(fds[0]);
    pid_t pid = -1;
    try {
      RedisServer server(port, dir);
      server.start();
      pid = server.pid();
      if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(1);
      while (true) ::pause();
    } catch (...) {
      ::_exit(1);
    }
  }
  ::close(fds[1]);
  pid_t server_pid = -1;
  const bool got = ::read(fds[0], &server_pid, sizeof server_pid) == sizeof server_pid;
  ::close(fds[0]);
  ::kill(driver, SIGKILL);
  ::waitpid(driver, nullptr, 0);
  ASSERT_TRUE(got) << "the driver did not start its redis-server";
  ASSERT_GT(server_pid, 0);
  const auto t0 = std::chrono::steady_clock::now();
  double waited_s = 0;
  while (process_alive(server_pid) && waited_s < 3.0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  const bool gone = !process_alive(server_pid);
  if (!gone) ::kill(server_pid, SIGKILL);  // leave nothing behind either way
  EXPECT_TRUE(gone) << "redis-server pid " << server_pid << " outlived its SIGKILLed driver by " << waited_s << " s";
  EXPECT_LT(waited_s, 2.0);
  RedisClient c("127.0.0.1", port, 0.2);
  EXPECT_FALSE(c.ping());
}

}  // namespace
}  // namespace megascale::robust
