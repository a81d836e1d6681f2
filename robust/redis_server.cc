// robust/redis_server.cc: see redis_server.h.
#include "robust/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "robust/redis_client.h"

namespace megascale::robust {
namespace {

// waitpid with a deadline; true when reaped.
bool reap(pid_t pid, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error("cannot find a free port: " + why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool redis_server_available() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p = path;
  size_t at = 0;
  while (at <= p.size()) {
    const size_t end = p.find(':', at);
    const std::string dir = p.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!dir.empty() && ::access((dir + "/redis-server").c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return false;
}

RedisServer::RedisServer(int port, std::string dir, std::string also_bind)
    : port_(port), also_bind_(std::move(also_bind)), dir_(std::move(dir)) {}

RedisServer::~RedisServer() { stop(); }

void RedisServer::start(double timeout_s) {
  if (running()) return;
  std::filesystem::create_directories(dir_);
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> args = {"redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1"};
  if (!also_bind_.empty()) args.push_back(also_bind_);
  for (const std::string& a : {std::string("--dir"), dir_, std::string("--save"), std::string(), std::string("--appendonly"),
                               std::string("no"), std::string("--daemonize"), std::string("no"), std::string("--logfile"),
                               log, std::string("--protected-mode"), std::string("no")}) {
    args.push_back(a);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("cannot start redis-server: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);  // a Ctrl-C meant for the driver reaches it through stop(), not directly
    // A driver killed before stop() (SIGKILL, a crash) takes its server with
    // it: SIGTERM when the forking thread ends (kept across execvp). A parent
    // that died before this line is seen by getppid().
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  pid_ = child;
  RedisClient probe("127.0.0.1", port_, 0.2);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    // The answer must come from our server, not another one on the port.
    if (const std::optional<RedisReply> info = probe.command({"INFO", "server"})) {
      if (info->str.find("process_id:" + std::to_string(pid_) + "\r") != std::string::npos) return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redis-server on port " + std::to_string(port_) +
                               (WIFEXITED(status) && WEXITSTATUS(status) == 127
                                    ? std::string(" could not run (is redis-server installed? scripts/setup.sh)")
                                    : " exited at start; see " + log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill();
  throw std::runtime_error("redis-server on port " + std::to_string(port_) + " did not answer PING within " +
                           std::to_string(timeout_s) + " s; see " + log);
}

void RedisServer::kill() {
  if (!running()) return;
  ::kill(pid_, SIGKILL);
  reap(pid_, 5.0);
  pid_ = -1;
}

void RedisServer::stop() {
  if (!running()) return;
  ::kill(pid_, SIGTERM);
  if (!reap(pid_, 2.0)) {
    ::kill(pid_, SIGKILL);
    reap(pid_, 5.0);
  }
  pid_ = -1;
}

}  // namespace megascale::robust
