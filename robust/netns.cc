// robust/netns.cc: see netns.h.
#include "robust/netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

namespace megascale::robust {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// Runs `ip ARGS`; throws std::runtime_error with the command and its output
// when it fails.
void ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  if (run_program(argv, &out) != 0) throw std::runtime_error("`" + joined(argv) + "` failed: " + trim(out));
}

// Best effort: cleanup goes on past a failure.
void ip_quiet(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  (void)run_program(argv, &out);
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "";
  p += ":/usr/sbin:/sbin";
  std::istringstream in(p);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool process_exists(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

std::vector<pid_t> ns_pids(const std::string& ns) {
  std::string out;
  std::vector<pid_t> pids;
  if (run_program({"ip", "netns", "pids", ns}, &out) != 0) return pids;
  std::istringstream in(out);
  long p = 0;
  while (in >> p) pids.push_back(static_cast<pid_t>(p));
  return pids;
}

// SIGKILLs what runs in `ns` and waits (up to 2 s) until it is gone.
std::vector<pid_t> kill_ns(const std::string& ns) {
  std::vector<pid_t> killed = ns_pids(ns);
  for (pid_t p : killed) ::kill(p, SIGKILL);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!ns_pids(ns).empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return killed;
}

// Runs fn on a thread that first entered namespace `ns` ("" = stay in this
// one): setns changes the calling thread only. False when it cannot enter.
template <typename Fn>
bool in_ns(const std::string& ns, Fn fn) {
  bool entered = false;
  std::thread t([&] {
    if (!ns.empty()) {
      const int fd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
      ::close(fd);
      if (!ok) return;
    }
    entered = true;
    fn();
  });
  t.join();
  return entered;
}

// A TCP connection from namespace `from` to a listener opened in namespace
// `to` on `address`, within timeout_s: "" when it is made, else why not.
std::string tcp_reaches(const std::string& from, const std::string& to, const std::string& address, double timeout_s) {
  int listener = -1, port = 0;
  in_ns(to, [&] {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    socklen_t len = sizeof a;
    if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) == 1 &&
        ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(listener, 4) == 0 &&
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
  });
  if (port == 0) {
    if (listener >= 0) ::close(listener);
    return "cannot listen on " + address + " in " + (to.empty() ? std::string("the root namespace") : to);
  }
  bool connected = false;
  in_ns(from, [&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      connected = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      connected = ::poll(&p, 1, static_cast<int>(timeout_s * 1000)) == 1 &&
                  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
    }
    ::close(fd);
  });
  ::close(listener);
  if (connected) return "";
  return fmt::format("no TCP connection from {} to {} ({}) within {:.1f} s", from.empty() ? "the root namespace" : from,
                     address, to.empty() ? "the root namespace" : to, timeout_s);
}

}  // namespace

int run_program(const std::vector<std::string>& argv, std::string* output) {
  int fds[2] = {-1, -1};
  if (output != nullptr && ::pipe2(fds, O_CLOEXEC) != 0) return 127;
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    if (output != nullptr) {
      ::close(fds[0]);
      ::close(fds[1]);
    }
    return 127;
  }
  if (child == 0) {
    if (output != nullptr) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
    } else {
      const int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) {
        ::dup2(null, STDOUT_FILENO);
        ::dup2(null, STDERR_FILENO);
      }
    }
    ::execvp(cargv[0], cargv.data());
    // iproute2 lives in /usr/sbin, which a non-login PATH may lack.
    const std::string sbin = std::string("/usr/sbin/") + cargv[0];
    ::execv(sbin.c_str(), cargv.data());
    ::_exit(127);
  }
  if (output != nullptr) {
    ::close(fds[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) output->append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string netns_unavailable_reason() {
  if (::geteuid() != 0) return "not root (network namespaces and veth pairs need CAP_NET_ADMIN)";
  if (!on_path("ip")) return "no `ip` command (iproute2 is not installed)";
  const std::string probe = "msn" + std::to_string(::getpid()) + "p";
  std::string out;
  if (run_program({"ip", "netns", "add", probe}, &out) != 0) return "`ip netns add` refused: " + trim(out);
  // A veth pair too: some containers allow namespaces but not links.
  std::string veth;
  const std::string a = "msn" + std::to_string(::getpid()) + "pa", b = "msn" + std::to_string(::getpid()) + "pb";
  const int rc = run_program({"ip", "link", "add", a, "type", "veth", "peer", "name", b}, &veth);
  ip_quiet({"link", "del", a});
  ip_quiet({"netns", "del", probe});
  if (rc != 0) return "`ip link add ... type veth` refused: " + trim(veth);
  return "";
}

int sweep_stale_netns() {
  int removed = 0;
  // Ours: "msn" PID then n<digits> | b | h<digits> | p | pa; stale when PID is gone.
  // (Parsed by hand: GCC 12 warns -Wmaybe-uninitialized inside std::regex at -O1.)
  auto digits = [](const std::string& s, size_t from, size_t to) {
    return to > from && s.find_first_not_of("0123456789", from) >= to;
  };
  auto stale = [&](const std::string& name) {
    if (name.rfind("msn", 0) != 0) return false;
    const size_t end = name.find_first_not_of("0123456789", 3);
    if (end == std::string::npos || !digits(name, 3, end)) return false;
    const std::string tail = name.substr(end);
    const bool ours = tail == "b" || tail == "p" || tail == "pa" ||
                      ((tail[0] == 'n' || tail[0] == 'h') && digits(tail, 1, tail.size()));
    return ours && !process_exists(std::atoi(name.substr(3, end - 3).c_str()));
  };
  std::string out;
  if (run_program({"ip", "netns", "list"}, &out) == 0) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      const std::string name = line.substr(0, line.find(' '));
      if (!stale(name)) continue;
      (void)kill_ns(name);
      ip_quiet({"netns", "del", name});
      ++removed;
    }
  }
  out.clear();
  if (run_program({"ip", "-o", "link", "show"}, &out) == 0) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      // "12: msn123h0@if11: <...>"
      const size_t colon = line.find(": ");
      if (colon == std::string::npos) continue;
      std::string name = line.substr(colon + 2);
      name = name.substr(0, name.find_first_of("@:"));
      if (!stale(name)) continue;
      ip_quiet({"link", "del", name});
      ++removed;
    }
  }
  return removed;
}

NetnsCluster::NetnsCluster(int nodes, int tag) : nodes_(nodes), tag_(tag) {
  if (nodes < 1 || nodes > 200) throw std::runtime_error("NetnsCluster: nodes must be 1..200, got " + std::to_string(nodes));
  // A /24 of 10.0.0.0/8 from the tag, moved on while an address of this
  // machine is in it.
  std::string addrs;
  (void)run_program({"ip", "-o", "-4", "addr", "show"}, &addrs);
  int index = tag % 12800;
  for (int tries = 0; tries < 12800; ++tries, index = (index + 1) % 12800) {
    a_ = 200 + index / 256;
    b_ = index % 256;
    if (addrs.find(fmt::format(" 10.{}.{}.", a_, b_)) == std::string::npos) break;
  }
  try {
    const std::string br = fmt::format("msn{}b", tag_);
    ip({"link", "add", br, "type", "bridge"});
    bridge_made_ = true;
    ip({"addr", "add", host_address() + "/24", "dev", br});
    ip({"link", "set", br, "up"});
    for (int k = 0; k < nodes_; ++k) {
      const std::string inside = fmt::format("msn{}v{}", tag_, k);
      ip({"netns", "add", ns(k)});
      made_.push_back(k);
      ip({"link", "add", host_link(k), "type", "veth", "peer", "name", inside});
      ip({"link", "set", inside, "netns", ns(k)});
      ip({"link", "set", host_link(k), "master", br, "up"});
      ip({"-n", ns(k), "addr", "add", address(k) + "/24", "dev", inside});
      ip({"-n", ns(k), "link", "set", inside, "up"});
      ip({"-n", ns(k), "link", "set", "lo", "up"});
    }
    // The paths the job needs, tried: node -> bridge (Redis, mpirun) and
    // node -> node (MPI). A host whose bridge traffic goes through a
    // firewall that drops it (bridge netfilter with a DROP forward policy,
    // as Docker sets up) fails here, not as a stalled job.
    for (int k = 0; k < nodes_; ++k) {
      std::string why = tcp_reaches(ns(k), "", host_address(), 2.0);
      if (why.empty() && k > 0) why = tcp_reaches(ns(k), ns(0), address(0), 2.0);
      if (!why.empty()) throw std::runtime_error("the namespaces were made but cannot talk: " + why);
    }
  } catch (...) {
    cleanup();
    throw;
  }
}

NetnsCluster::~NetnsCluster() { cleanup(); }

void NetnsCluster::cleanup() {
  for (int k : made_) {
    if (removed(k)) continue;
    (void)kill_ns(ns(k));
    ip_quiet({"link", "del", host_link(k)});
    ip_quiet({"netns", "del", ns(k)});
  }
  made_.clear();
  if (bridge_made_) ip_quiet({"link", "del", fmt::format("msn{}b", tag_)});
  bridge_made_ = false;
}

std::string NetnsCluster::ns(int node) const { return fmt::format("msn{}n{}", tag_, node); }
std::string NetnsCluster::host_link(int node) const { return fmt::format("msn{}h{}", tag_, node); }
std::string NetnsCluster::address(int node) const { return fmt::format("10.{}.{}.{}", a_, b_, 10 + node); }
std::string NetnsCluster::host_address() const { return fmt::format("10.{}.{}.1", a_, b_); }
std::string NetnsCluster::subnet() const { return fmt::format("10.{}.{}.0/24", a_, b_); }

std::vector<std::string> NetnsCluster::command_prefix(int node) const {
  // By its path: mpirun and execvp look on PATH, which may lack /usr/sbin.
  const std::string ip = ::access("/usr/sbin/ip", X_OK) == 0 ? "/usr/sbin/ip" : ::access("/sbin/ip", X_OK) == 0 ? "/sbin/ip" : "ip";
  return {ip, "netns", "exec", ns(node)};
}

void NetnsCluster::cut_link(int node) { ip({"link", "set", host_link(node), "down"}); }
void NetnsCluster::restore_link(int node) {
  if (!removed(node)) ip_quiet({"link", "set", host_link(node), "up"});
}

std::vector<pid_t> NetnsCluster::remove_node(int node) {
  if (removed(node)) return {};
  std::vector<pid_t> killed = kill_ns(ns(node));
  ip_quiet({"link", "del", host_link(node)});
  ip_quiet({"netns", "del", ns(node)});
  removed_[node] = true;
  return killed;
}

std::vector<pid_t> NetnsCluster::pids(int node) const { return ns_pids(ns(node)); }

std::string NetnsCluster::describe() const {
  return fmt::format("{} network namespace(s) msn{}n0..{} on bridge msn{}b ({}), veth per node", nodes_, tag_,
                     nodes_ - 1, tag_, subnet());
}

std::vector<std::string> mpirun_network_args(const NetnsCluster& c) {
  return {"--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", c.subnet()};
}

std::map<std::string, std::string> mpirun_network_env(const NetnsCluster& c) {
  return {{"PMIX_MCA_ptl_tcp_if_include", c.subnet()}, {"PMIX_MCA_ptl_tcp_remote_connections", "1"}};
}

}  // namespace megascale::robust
