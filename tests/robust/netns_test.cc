// robust/netns.h against the real thing: network namespaces, veth pairs and a
// bridge made with iproute2 (root only; skipped, with the reason, elsewhere).
// A TCP connection between two namespaces crosses the veths (their byte
// counters move), a cut link stops it, a removed node leaves no namespace,
// and a run killed before its cleanup is swept by the next.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "robust/netns.h"

namespace megascale::robust {
namespace {

// Enters namespace `ns` on the calling thread (setns affects one thread).
bool enter(const std::string& ns) {
  const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  ::close(fd);
  return ok;
}

uint64_t counter(const std::string& link, const std::string& what) {
  std::ifstream in("/sys/class/net/" + link + "/statistics/" + what);
  uint64_t v = 0;
  in >> v;
  return v;
}

// In namespace `from`: connect to host:port within timeout_s and send `bytes`
// bytes; true when all were sent and the peer closed (it read them all).
bool send_from(const std::string& from, const std::string& host, int port, size_t bytes, double timeout_s) {
  bool ok = false;
  std::thread t([&] {
    if (!enter(from)) return;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
    ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    pollfd p{fd, POLLOUT, 0};
    std::string data(bytes, 'x');
    size_t sent = 0;
    const int ms = static_cast<int>(timeout_s * 1000);
    while (sent < bytes && ::poll(&p, 1, ms) == 1 && (p.revents & POLLOUT)) {
      const ssize_t n = ::send(fd, data.data() + sent, bytes - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    // Done when the peer has read it all and closed: then every byte has
    // crossed the links (send() returns once the bytes are in our buffer).
    bool closed = false;
    if (sent == bytes && ::shutdown(fd, SHUT_WR) == 0) {
      pollfd in{fd, POLLIN, 0};
      char buf[256];
      while (!closed && ::poll(&in, 1, ms) == 1) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) closed = n == 0;
      }
    }
    ok = sent == bytes && closed;
    ::close(fd);
  });
  t.join();
  return ok;
}

class Netns : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = netns_unavailable_reason();
    if (!why.empty()) GTEST_SKIP() << "network namespaces unavailable here: " << why;
  }
};

TEST_F(Netns, TrafficCrossesTheVethAndStopsWhenTheLinkIsCut) {
  NetnsCluster c(2, static_cast<int>(::getpid()));
  EXPECT_EQ(c.address(1).substr(0, 3), "10.");
  // A listener in node 0, on its own address.
  int listen_fd = -1, port = 0;
  std::thread server_setup([&] {
    if (!enter(c.ns(0))) return;
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, c.address(0).c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(listen_fd, 4) == 0 &&
        ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
  });
  server_setup.join();
  ASSERT_GT(port, 0) << "no listener in " << c.ns(0);
  // The listening socket lives in node 0's namespace whatever thread accepts.
  std::thread server([&] {
    for (int i = 0; i < 2; ++i) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 3000) != 1) return;
      const int conn = ::accept(listen_fd, nullptr, nullptr);
      char buf[65536];
      while (::recv(conn, buf, sizeof buf, 0) > 0) {
      }
      ::close(conn);
    }
  });
  const uint64_t before = counter(c.host_link(1), "rx_bytes");
  constexpr size_t kBytes = 4 << 20;
  EXPECT_TRUE(send_from(c.ns(1), c.address(0), port, kBytes, 3.0));
  EXPECT_GE(counter(c.host_link(1), "rx_bytes") - before, kBytes) << "the bytes did not cross node 1's veth";
  // Loopback of the root namespace does not reach into a node.
  EXPECT_FALSE(send_from(c.ns(1), "127.0.0.1", port, 1024, 0.3));

  c.cut_link(1);
  EXPECT_FALSE(send_from(c.ns(1), c.address(0), port, kBytes, 0.5)) << "node 1 still reaches node 0 after the cut";
  c.restore_link(1);
  EXPECT_TRUE(send_from(c.ns(1), c.address(0), port, 1024, 3.0)) << "the link came back up";
  server.join();
  ::close(listen_fd);

  const std::string ns1 = c.ns(1);
  c.remove_node(1);
  EXPECT_TRUE(c.removed(1));
  std::string list;
  run_program({"ip", "netns", "list"}, &list);
  EXPECT_EQ(list.find(ns1), std::string::npos) << list;
  EXPECT_NE(list.find(c.ns(0)), std::string::npos) << list;
}

TEST_F(Netns, DestructorAndSweepLeaveNothingBehind) {
  std::string ns0;
  {
    NetnsCluster c(1, static_cast<int>(::getpid()));
    ns0 = c.ns(0);
  }
  std::string list;
  run_program({"ip", "netns", "list"}, &list);
  EXPECT_EQ(list.find(ns0), std::string::npos) << list;
  // A run SIGKILLed before its cleanup: names whose tag is a process that is gone.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string tag = std::to_string(child);
  ASSERT_EQ(run_program({"ip", "netns", "add", "msn" + tag + "n0"}), 0);
  ASSERT_EQ(run_program({"ip", "link", "add", "msn" + tag + "b", "type", "bridge"}), 0);
  EXPECT_GE(sweep_stale_netns(), 2);
  list.clear();
  run_program({"ip", "netns", "list"}, &list);
  EXPECT_EQ(list.find("msn" + tag + "n0"), std::string::npos) << list;
  std::string links;
  run_program({"ip", "-o", "link", "show"}, &links);
  EXPECT_EQ(links.find("msn" + tag + "b"), std::string::npos);
}

}  // namespace
}  // namespace megascale::robust
