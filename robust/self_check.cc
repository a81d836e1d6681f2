// robust/self_check.cc: see self_check.h.
#include "robust/self_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "robust/keys.h"
#include "robust/redis_client.h"

namespace megascale::robust {
namespace {

double field(const std::map<std::string, std::string>& h, const std::string& k, double fallback = 0) {
  const auto it = h.find(k);
  return it == h.end() ? fallback : std::atof(it->second.c_str());
}

std::string text_field(const std::map<std::string, std::string>& h, const std::string& k) {
  const auto it = h.find(k);
  return it == h.end() ? std::string() : it->second;
}

double steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// A file descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

// One end of an exchange: sends `out`, receives `in.size()` bytes.
struct Endpoint {
  int fd = -1;
  const unsigned char* out = nullptr;
  size_t out_bytes = 0, sent = 0;
  std::vector<unsigned char> in;
  size_t received = 0;
  bool send_enabled = true;  // false: the node's link is down (its bytes go nowhere)
};

// Moves every endpoint's bytes until all are done or `deadline_s` (steady
// clock) passes; "" when done, else why not.
std::string exchange(std::vector<Endpoint*> eps, double deadline_s) {
  for (Endpoint* e : eps) set_nonblocking(e->fd);
  while (true) {
    std::vector<pollfd> fds;
    bool done = true;
    for (Endpoint* e : eps) {
      const bool want_send = e->send_enabled && e->sent < e->out_bytes;
      const bool want_recv = e->received < e->in.size();
      done = done && !want_recv && (!e->send_enabled || !want_send);
      short ev = 0;
      if (want_send) ev |= POLLOUT;
      if (want_recv) ev |= POLLIN;
      fds.push_back({e->fd, ev, 0});
    }
    if (done) return "";
    const double left_s = deadline_s - steady_now_s();
    if (left_s <= 0) {
      size_t got = 0, want = 0;
      for (Endpoint* e : eps) {
        got += e->received;
        want += e->in.size();
      }
      return "received " + std::to_string(got) + " of " + std::to_string(want) + " bytes";
    }
    const int n = ::poll(fds.data(), fds.size(), std::max(1, static_cast<int>(left_s * 1000)));
    if (n < 0 && errno != EINTR) return std::string("poll: ") + std::strerror(errno);
    for (size_t i = 0; i < eps.size(); ++i) {
      Endpoint& e = *eps[i];
      if (fds[i].revents & POLLOUT) {
        const ssize_t w = ::send(e.fd, e.out + e.sent, e.out_bytes - e.sent, MSG_NOSIGNAL);
        if (w > 0) e.sent += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) return std::string("send: ") + std::strerror(errno);
      }
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        const ssize_t r = ::recv(e.fd, e.in.data() + e.received, e.in.size() - e.received, 0);
        if (r > 0) e.received += static_cast<size_t>(r);
        if (r == 0) return "the peer closed the connection after " + std::to_string(e.received) + " bytes";
        if (r < 0 && errno != EAGAIN && errno != EINTR) return std::string("recv: ") + std::strerror(errno);
      }
    }
  }
}

// This node's contribution to an all-reduce, by node id (small integers:
// every sum is exact in float).
std::vector<float> contribution(int node, size_t floats) {
  std::vector<float> v(floats);
  for (size_t j = 0; j < floats; ++j) v[j] = static_cast<float>(node + 1 + static_cast<int>(j % 7));
  return v;
}

// The all-reduce's result check: mine + theirs, element by element.
std::string check_sum(const std::vector<float>& mine, const std::vector<unsigned char>& theirs_bytes,
                      const std::vector<float>& theirs_expected) {
  std::vector<float> theirs(mine.size());
  std::memcpy(theirs.data(), theirs_bytes.data(), theirs.size() * sizeof(float));
  for (size_t j = 0; j < mine.size(); ++j) {
    if (mine[j] + theirs[j] != mine[j] + theirs_expected[j]) {
      return "wrong sum at element " + std::to_string(j) + ": " + std::to_string(mine[j] + theirs[j]) +
             ", expected " + std::to_string(mine[j] + theirs_expected[j]);
    }
  }
  return "";
}

int connect_local(int port, const std::string& host = "127.0.0.1") {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Accepts one connection on `listen_fd` before `deadline_s`; -1 on timeout.
int accept_until(int listen_fd, double deadline_s) {
  while (true) {
    const double left_s = deadline_s - steady_now_s();
    if (left_s <= 0) return -1;
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, std::max(1, static_cast<int>(left_s * 1000))) > 0) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) return fd;
    }
  }
}

}  // namespace

NodeFaults parse_node_faults(const std::map<std::string, std::string>& hash) {
  NodeFaults f;
  f.compute_extra_percent = std::max(0.0, field(hash, "compute_extra_percent"));
  f.link_down = text_field(hash, "link") == "down";
  return f;
}

std::map<std::string, std::string> node_faults_fields(const NodeFaults& f) {
  return {{"compute_extra_percent", redis_number(f.compute_extra_percent)}, {"link", f.link_down ? "down" : "up"}};
}

double thread_cpu_now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

ComputeCheck run_compute_check(int n, int reps, double extra_percent) {
  if (n < 1 || reps < 1 || !(extra_percent >= 0)) {
    throw std::invalid_argument("run_compute_check: need n >= 1, reps >= 1, extra_percent >= 0 (got " +
                                std::to_string(n) + ", " + std::to_string(reps) + ", " + redis_number(extra_percent) + ")");
  }
  const size_t nn = static_cast<size_t>(n);
  // A (n, n), B (n, n), C (n, n), row-major; small integers / 8 so that every
  // product and sum is exact and the checksum is the same on every run.
  std::vector<float> a(nn * nn), b(nn * nn), c(nn * nn);
  for (size_t i = 0; i < nn * nn; ++i) {
    a[i] = static_cast<float>(i % 5) / 8.0f;
    b[i] = static_cast<float>(i % 3) / 8.0f;
  }
  ComputeCheck out;
  out.gemm_cpu_s = 1e30;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1: a warm-up (caches, page faults), not timed
    const double t0 = thread_cpu_now_s();
    std::fill(c.begin(), c.end(), 0.0f);
    for (size_t i = 0; i < nn; ++i) {
      float* ci = &c[i * nn];
      for (size_t k = 0; k < nn; ++k) {
        const float aik = a[i * nn + k];
        const float* bk = &b[k * nn];
        for (size_t j = 0; j < nn; ++j) ci[j] += aik * bk[j];
      }
    }
    // The emulated slow processor (NodeFaults): the same GEMM costs
    // extra_percent% more work, burnt here in proportion to its own time.
    const double until = thread_cpu_now_s() + (thread_cpu_now_s() - t0) * extra_percent / 100.0;
    volatile double sink = 0;
    while (thread_cpu_now_s() < until) sink = sink + 1;
    if (rep >= 0) out.gemm_cpu_s = std::min(out.gemm_cpu_s, thread_cpu_now_s() - t0);
  }
  double sum = 0;
  for (float v : c) sum += v;
  out.checksum = sum;
  out.gflops = 2.0 * static_cast<double>(n) * n * n / std::max(out.gemm_cpu_s, 1e-9) / 1e9;
  return out;
}

CheckListener::CheckListener(bool every_address) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error(std::string("self-check listener: socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = 0;
  a.sin_addr.s_addr = htonl(every_address ? INADDR_ANY : INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 8) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error(std::string("self-check listener on ") + (every_address ? "0.0.0.0" : "127.0.0.1") + ": " + why);
  }
  port_ = ntohs(a.sin_port);
}

CheckListener::~CheckListener() {
  if (fd_ >= 0) ::close(fd_);
}

AllReduceCheck loopback_allreduce(size_t floats, double time_limit_s, bool link_down) {
  AllReduceCheck out;
  const double t0 = steady_now_s();
  const double deadline = t0 + time_limit_s;
  CheckListener listener;  // an ephemeral port: the node's own path only
  Fd client(connect_local(listener.port()));
  Fd server(client.fd >= 0 ? accept_until(listener.fd(), deadline) : -1);
  if (client.fd < 0 || server.fd < 0) {
    out.seconds = steady_now_s() - t0;
    out.detail = "cannot connect to the node's own port: " + std::string(std::strerror(errno));
    return out;
  }
  const std::vector<float> x = contribution(0, floats), y = contribution(1, floats);
  Endpoint a, b;
  a.fd = client.fd;
  a.out = reinterpret_cast<const unsigned char*>(x.data());
  a.out_bytes = floats * sizeof(float);
  a.in.resize(floats * sizeof(float));
  a.send_enabled = !link_down;
  b.fd = server.fd;
  b.out = reinterpret_cast<const unsigned char*>(y.data());
  b.out_bytes = floats * sizeof(float);
  b.in.resize(floats * sizeof(float));
  b.send_enabled = !link_down;
  const std::string why = exchange({&a, &b}, deadline);
  out.seconds = steady_now_s() - t0;
  if (!why.empty()) {
    out.detail = "timed out after " + fmt::format("{:.2f}", out.seconds) + " s: " + why;
    if (steady_now_s() < deadline) out.detail = why;
    return out;
  }
  out.detail = check_sum(x, a.in, y);
  if (out.detail.empty()) out.detail = check_sum(y, b.in, x);
  out.ok = out.detail.empty();
  return out;
}

AllReduceCheck neighbour_allreduce(CheckListener& mine, int my_node, int peer_node, const std::string& peer_host,
                                   int peer_port, uint64_t id, size_t floats, double time_limit_s, bool link_down) {
  AllReduceCheck out;
  const double t0 = steady_now_s();
  const double deadline = t0 + time_limit_s;
  Fd conn;
  if (my_node < peer_node) {
    // Accept until a connection that names this request arrives.
    while (conn.fd < 0 && steady_now_s() < deadline) {
      Fd c(accept_until(mine.fd(), deadline));
      if (c.fd < 0) break;
      Endpoint hello;
      hello.fd = c.fd;
      hello.in.resize(sizeof id);
      hello.send_enabled = false;
      if (link_down || !exchange({&hello}, deadline).empty()) continue;
      uint64_t got = 0;
      std::memcpy(&got, hello.in.data(), sizeof got);
      if (got == id) std::swap(conn.fd, c.fd);
    }
  } else {
    while (conn.fd < 0 && steady_now_s() < deadline) {
      conn.fd = connect_local(peer_port, peer_host);
      if (conn.fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the peer is not listening yet
    }
    if (conn.fd >= 0) {
      Endpoint hello;
      hello.fd = conn.fd;
      hello.out = reinterpret_cast<const unsigned char*>(&id);
      hello.out_bytes = sizeof id;
      hello.send_enabled = !link_down;
      (void)exchange({&hello}, link_down ? steady_now_s() : deadline);
    }
  }
  if (conn.fd < 0) {
    out.seconds = steady_now_s() - t0;
    out.detail = "no connection with node " + std::to_string(peer_node) + " within " + fmt::format("{:.2f}", time_limit_s) + " s";
    return out;
  }
  const std::vector<float> x = contribution(my_node, floats), expected = contribution(peer_node, floats);
  Endpoint e;
  e.fd = conn.fd;
  e.out = reinterpret_cast<const unsigned char*>(x.data());
  e.out_bytes = floats * sizeof(float);
  e.in.resize(floats * sizeof(float));
  e.send_enabled = !link_down;
  const std::string why = exchange({&e}, deadline);
  out.seconds = steady_now_s() - t0;
  if (!why.empty()) {
    out.detail = (steady_now_s() >= deadline ? "timed out after " + fmt::format("{:.2f}", out.seconds) + " s: " : std::string()) +
                 why + " (with node " + std::to_string(peer_node) + ")";
    return out;
  }
  out.detail = check_sum(x, e.in, expected);
  out.ok = out.detail.empty();
  return out;
}

std::map<std::string, std::string> request_fields(const SelfCheckRequest& r) {
  return {{"id", std::to_string(r.id)},
          {"peer_node", std::to_string(r.peer_node)},
          {"peer_host", r.peer_host},
          {"peer_port", std::to_string(r.peer_port)},
          {"time_limit_s", redis_number(r.time_limit_s)}};
}

SelfCheckRequest parse_request(const std::map<std::string, std::string>& hash) {
  SelfCheckRequest r;
  r.id = std::strtoull(text_field(hash, "id").c_str(), nullptr, 10);
  r.peer_node = static_cast<int>(field(hash, "peer_node", -1));
  r.peer_port = static_cast<int>(field(hash, "peer_port"));
  r.peer_host = text_field(hash, "peer_host");
  if (r.peer_host.empty()) r.peer_host = "127.0.0.1";
  r.time_limit_s = field(hash, "time_limit_s", 1);
  return r;
}

std::map<std::string, std::string> report_fields(const SelfCheckReport& r) {
  return {{"id", std::to_string(r.id)},
          {"baseline_gemm_cpu_s", redis_number(r.baseline_gemm_cpu_s)},
          {"gemm_cpu_s", redis_number(r.compute.gemm_cpu_s)},
          {"gflops", redis_number(r.compute.gflops)},
          {"checksum", redis_number(r.compute.checksum)},
          {"loopback_ok", r.loopback.ok ? "1" : "0"},
          {"loopback_s", redis_number(r.loopback.seconds)},
          {"loopback_detail", r.loopback.detail},
          {"peer_node", std::to_string(r.peer_node)},
          {"neighbour_ok", r.neighbour.ok ? "1" : "0"},
          {"neighbour_s", redis_number(r.neighbour.seconds)},
          {"neighbour_detail", r.neighbour.detail},
          {"seconds", redis_number(r.seconds)}};
}

SelfCheckReport parse_report(int node, const std::map<std::string, std::string>& hash) {
  SelfCheckReport r;
  r.node = node;
  r.answered = !hash.empty();
  r.id = std::strtoull(text_field(hash, "id").c_str(), nullptr, 10);
  r.baseline_gemm_cpu_s = field(hash, "baseline_gemm_cpu_s");
  r.compute.gemm_cpu_s = field(hash, "gemm_cpu_s");
  r.compute.gflops = field(hash, "gflops");
  r.compute.checksum = field(hash, "checksum");
  r.loopback.ok = text_field(hash, "loopback_ok") == "1";
  r.loopback.seconds = field(hash, "loopback_s");
  r.loopback.detail = text_field(hash, "loopback_detail");
  r.peer_node = static_cast<int>(field(hash, "peer_node", -1));
  r.neighbour.ok = text_field(hash, "neighbour_ok") == "1";
  r.neighbour.seconds = field(hash, "neighbour_s");
  r.neighbour.detail = text_field(hash, "neighbour_detail");
  r.seconds = field(hash, "seconds");
  return r;
}

SelfCheckReport run_self_check(int node, const SelfCheckRequest& req, const NodeFaults& faults,
                               double baseline_gemm_cpu_s, CheckListener& listener) {
  const double t0 = steady_now_s();
  SelfCheckReport r;
  r.node = node;
  r.answered = true;
  r.id = req.id;
  r.baseline_gemm_cpu_s = baseline_gemm_cpu_s;
  // The neighbour all-reduce first: both executors start it within one
  // request poll of each other, so its time limit is not spent waiting for
  // the other's compute check.
  r.peer_node = req.peer_node;
  if (req.peer_node >= 0) {
    r.neighbour = neighbour_allreduce(listener, node, req.peer_node, req.peer_host, req.peer_port, req.id, kAllReduceFloats,
                                      req.time_limit_s, faults.link_down);
  }
  r.compute = run_compute_check(kGemmN, kGemmReps, faults.compute_extra_percent);
  r.loopback = loopback_allreduce(kAllReduceFloats, req.time_limit_s, faults.link_down);
  r.seconds = steady_now_s() - t0;
  return r;
}

SelfCheckVerdict judge_self_check(const SelfCheckReport& node, const SelfCheckReport* reference, double slow_factor) {
  if (!(slow_factor > 1)) throw std::invalid_argument("judge_self_check: slow_factor must be > 1, got " + redis_number(slow_factor));
  const std::string who = "node " + std::to_string(node.node);
  if (!node.answered) return {true, who + ": no self-check answer"};
  const bool have_ref = reference != nullptr && reference->answered && reference->compute.gemm_cpu_s > 0;
  const double vs_base = node.baseline_gemm_cpu_s > 0 ? node.compute.gemm_cpu_s / node.baseline_gemm_cpu_s : 0;
  const double vs_ref = have_ref ? node.compute.gemm_cpu_s / reference->compute.gemm_cpu_s : 0;
  std::string compute = "GEMM " + fmt::format("{:.2f}", node.compute.gemm_cpu_s * 1e3) + " ms CPU (" +
                        fmt::format("{:.2f}", vs_base) + "x its baseline" +
                        (have_ref ? ", " + fmt::format("{:.2f}", vs_ref) + "x node " + std::to_string(reference->node) + "'s" : "") + ")";
  const bool slow = node.baseline_gemm_cpu_s > 0 && vs_base > slow_factor && (!have_ref || vs_ref > slow_factor);
  if (slow) return {true, who + ": compute check failed: " + compute + " > " + fmt::format("{:.2f}", slow_factor) + "x"};
  if (!node.loopback.ok) return {true, who + ": loopback all-reduce failed: " + node.loopback.detail};
  if (node.peer_node >= 0 && !node.neighbour.ok) {
    const bool ref_healthy = reference != nullptr && reference->answered && reference->loopback.ok;
    if (ref_healthy) {
      return {true, who + ": all-reduce with node " + std::to_string(node.peer_node) + " failed (" +
                        node.neighbour.detail + ") while that node's own loopback passed"};
    }
    return {false, who + ": all-reduce with node " + std::to_string(node.peer_node) +
                       " failed, but that node's own checks failed too: not blamed on " + who};
  }
  return {false, who + ": passed: " + compute + ", loopback " + fmt::format("{:.1f}", node.loopback.seconds * 1e3) + " ms" +
                     (node.peer_node >= 0 ? ", all-reduce with node " + std::to_string(node.peer_node) + " " +
                                                fmt::format("{:.1f}", node.neighbour.seconds * 1e3) + " ms"
                                          : std::string())};
}

SelfCheckPair run_self_check_pair(RedisClient& redis, const std::string& job, int suspect, int reference,
                                  uint64_t id, double slow_factor, double time_limit_s, double answer_wait_s) {
  SelfCheckPair out;
  const double t0 = wall_now_s();
  auto port_of = [&](int node) {
    return static_cast<int>(field(redis.hgetall(job_key(job, "executor:" + std::to_string(node))), "check_port"));
  };
  std::vector<int> nodes = {suspect};
  if (reference >= 0) nodes.push_back(reference);
  for (int n : nodes) {
    redis.del(job_key(job, "selfcheck_result:" + std::to_string(n)));
    SelfCheckRequest req;
    req.id = id;
    req.time_limit_s = time_limit_s;
    if (reference >= 0) {
      req.peer_node = n == suspect ? reference : suspect;
      req.peer_port = port_of(req.peer_node);
      // An executor in a network namespace publishes its address (robust/netns.h).
      req.peer_host = text_field(redis.hgetall(job_key(job, "executor:" + std::to_string(req.peer_node))), "check_host");
      if (req.peer_host.empty()) req.peer_host = "127.0.0.1";
    }
    redis.hset(job_key(job, "selfcheck:" + std::to_string(n)), request_fields(req));
  }
  const double deadline = t0 + 2 * time_limit_s + answer_wait_s;
  std::map<int, SelfCheckReport> got;
  while (got.size() < nodes.size() && wall_now_s() < deadline) {
    for (int n : nodes) {
      if (got.count(n)) continue;
      const std::map<std::string, std::string> h = redis.hgetall(job_key(job, "selfcheck_result:" + std::to_string(n)));
      if (!h.empty() && std::strtoull(text_field(h, "id").c_str(), nullptr, 10) == id) got[n] = parse_report(n, h);
    }
    if (got.size() < nodes.size()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  out.seconds = wall_now_s() - t0;
  out.suspect = got.count(suspect) ? got[suspect] : SelfCheckReport{};
  out.suspect.node = suspect;
  out.reference.node = reference;
  if (reference >= 0 && got.count(reference)) out.reference = got[reference];
  const SelfCheckReport* ref = reference >= 0 ? &out.reference : nullptr;
  out.suspect_verdict = judge_self_check(out.suspect, ref, slow_factor);
  out.lines.push_back((out.suspect_verdict.faulty ? "FAULTY " : "healthy ") + out.suspect_verdict.why);
  if (reference >= 0) {
    out.reference_verdict = judge_self_check(out.reference, &out.suspect, slow_factor);
    out.lines.push_back("(reference) " + std::string(out.reference_verdict.faulty ? "FAULTY " : "healthy ") +
                        out.reference_verdict.why);
  }
  return out;
}

}  // namespace megascale::robust
