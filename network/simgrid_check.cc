// network/simgrid_check.cc: SimGrid 3.32 platform from a (capacity, flows)
// description, run in a forked child (see simgrid_check.h).
#include "network/simgrid_check.h"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "base/sanitizer.h"

namespace megascale::network {
namespace {

namespace sg = simgrid;
using Clock = std::chrono::steady_clock;

constexpr double kBytesPerSecondPerGbps = 1e9 / 8.0;

// Routes each source host's traffic along its flow's exact link list; the
// destination is always the sink. O(flows) memory.
class FlowRouteZone final : public sg::kernel::routing::NetZoneImpl {
 public:
  explicit FlowRouteZone(const std::string& name) : NetZoneImpl(name) {}

  // route_of_netpoint[netpoint id] = flow index, or -1.
  std::vector<std::int64_t> flow_of_netpoint;
  std::vector<std::vector<sg::kernel::resource::StandardLinkImpl*>> route;  // (flows)

  void get_local_route(const sg::kernel::routing::NetPoint* src, const sg::kernel::routing::NetPoint* dst,
                       sg::kernel::routing::Route* into, double* latency) override {
    (void)dst;
    const unsigned long id = src->id();
    if (id >= flow_of_netpoint.size() || flow_of_netpoint[id] < 0)
      throw std::logic_error("simgrid_check: no route from netpoint " + src->get_name());
    const auto& links = route[static_cast<std::size_t>(flow_of_netpoint[id])];
    into->link_list_.insert(into->link_list_.end(), links.begin(), links.end());
    if (latency != nullptr) *latency += 0.0;  // every link has zero latency
  }
};

void check_input(std::span<const double> capacity_gbps, const FlowSet& flows) {
  const auto num_links = static_cast<std::int64_t>(capacity_gbps.size());
  for (std::size_t f = 0; f < flows.size(); ++f) {
    const auto path = flows.path(f);
    const std::string who = "simgrid_check: flow " + std::to_string(f);
    if (path.empty()) throw std::invalid_argument(who + ": empty path (SimGrid needs a route)");
    for (LinkId l : path) {
      if (l < 0 || l >= num_links)
        throw std::invalid_argument(who + ": link id " + std::to_string(l) + " out of range");
      if (!(capacity_gbps[l] > 0.0) || !std::isfinite(capacity_gbps[l]))
        throw std::invalid_argument(who + ": link " + std::to_string(l) + " capacity must be > 0 and finite");
    }
    if (!(flows.rate_cap_gbps(f) > 0.0))
      throw std::invalid_argument(who + ": rate cap must be > 0 (kNoRateCap for none)");
    if (!(flows.start_s(f) >= 0.0)) throw std::invalid_argument(who + ": start_s must be >= 0");
    if (flows.bytes(f) > 9.0e15) throw std::invalid_argument(who + ": bytes too large for SimGrid");
  }
}

// Builds the platform, runs it, fills `out`. May be called once per process.
void run_simgrid(std::span<const double> capacity_gbps, const FlowSet& flows, const SimGridOptions& options,
                 SimGridResult& out) {
  const auto t_build = Clock::now();
  std::vector<std::string> args = {"megascale-simgrid-check", "--cfg=network/model:CM02",
                                   "--cfg=network/crosstraffic:0",
                                   std::string("--log=root.thres:") + options.log_threshold};
  // Actors as threads under ASan, which cannot follow raw stack switches (base/sanitizer.h).
  if (base::kAddressSanitizer) args.push_back("--cfg=contexts/factory:thread");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  sg::s4u::Engine engine(&argc, argv.data());

  // The first NetZoneImpl created becomes the platform root.
  auto* zone = new FlowRouteZone("megascale_flows");
  const std::size_t F = flows.size();

  std::vector<sg::s4u::Link*> link_of(capacity_gbps.size(), nullptr);
  // Names are built with += : GCC 12 -O3 warns (-Wrestrict, a false
  // positive) on "literal" + std::to_string(...).
  auto name_of = [](char prefix, std::size_t i) {
    std::string name(1, prefix);
    name += std::to_string(i);
    return name;
  };
  auto make_link = [&](const std::string& name, double gbps) {
    sg::s4u::Link* link = zone->create_link(name, std::vector<double>{gbps * kBytesPerSecondPerGbps});
    link->set_latency(0.0);
    link->set_sharing_policy(sg::s4u::Link::SharingPolicy::SHARED);
    ++out.links;
    return link;
  };
  zone->route.resize(F);
  for (std::size_t f = 0; f < F; ++f) {
    auto& r = zone->route[f];
    if (flows.rate_cap_gbps(f) < kNoRateCap)
      r.push_back(make_link(name_of('c', f), flows.rate_cap_gbps(f))->get_impl());
    for (LinkId l : flows.path(f)) {
      if (link_of[l] == nullptr) link_of[l] = make_link(name_of('l', static_cast<std::size_t>(l)), capacity_gbps[l]);
      r.push_back(link_of[l]->get_impl());
    }
  }
  std::vector<sg::s4u::Host*> source(F, nullptr);
  for (std::size_t f = 0; f < F; ++f) {
    source[f] = zone->create_host(name_of('f', f), std::vector<double>{1.0});
    const unsigned long id = source[f]->get_netpoint()->id();
    if (zone->flow_of_netpoint.size() <= id) zone->flow_of_netpoint.resize(id + 1, -1);
    zone->flow_of_netpoint[id] = static_cast<std::int64_t>(f);
  }
  sg::s4u::Host* sink = zone->create_host("sink", std::vector<double>{1.0});
  out.hosts = F + 1;
  zone->seal();

  std::vector<std::size_t> order(F);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return flows.start_s(a) < flows.start_s(b); });
  std::vector<sg::s4u::CommPtr> comm(F);
  out.completion_s.assign(F, 0.0);
  // SimGrid's clock is a process-wide static that a new Engine does not reset (a
  // process that ran the event simulator, sim/event_engine.h, before forking this
  // child starts later than 0): flow times are taken relative to it.
  const double origin_s = sg::s4u::Engine::get_clock();
  sg::s4u::Actor::create("controller", sink, [&] {
    std::vector<sg::s4u::CommPtr> started;
    started.reserve(F);
    for (std::size_t f : order) {
      const double at_s = origin_s + flows.start_s(f);
      if (at_s > sg::s4u::Engine::get_clock()) sg::s4u::this_actor::sleep_until(at_s);
      const auto bytes = static_cast<std::uint64_t>(std::llround(flows.bytes(f)));
      if (bytes == 0) continue;  // completes at its start; SimGrid would not start it
      // set_destination starts a host-to-host Comm once both ends are known.
      comm[f] = sg::s4u::Comm::sendto_init();
      comm[f]->set_payload_size(bytes);
      comm[f]->set_source(source[f]);
      comm[f]->set_destination(sink);
      started.push_back(comm[f]);
    }
    sg::s4u::Comm::wait_all(started);
  });
  out.build_wall_s = std::chrono::duration<double>(Clock::now() - t_build).count();

  const auto t_run = Clock::now();
  engine.run();
  out.run_wall_s = std::chrono::duration<double>(Clock::now() - t_run).count();
  for (std::size_t f = 0; f < F; ++f)
    out.completion_s[f] = comm[f] ? comm[f]->get_finish_time() - origin_s : flows.start_s(f);
}

// Pipe protocol: status (u64: 0 ok, 1 error), then for ok: flows (u64),
// completion_s (flows doubles), build_wall_s, run_wall_s, hosts (u64), links
// (u64); for error: message length (u64) and bytes.
bool write_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

[[noreturn]] void child_main(int fd, std::span<const double> capacity_gbps, const FlowSet& flows,
                             const SimGridOptions& options) {
  std::uint64_t status = 0;
  try {
    SimGridResult r;
    run_simgrid(capacity_gbps, flows, options, r);
    const std::uint64_t n = r.completion_s.size(), hosts = r.hosts, links = r.links;
    bool ok = write_all(fd, &status, sizeof status) && write_all(fd, &n, sizeof n) &&
              write_all(fd, r.completion_s.data(), n * sizeof(double)) &&
              write_all(fd, &r.build_wall_s, sizeof(double)) && write_all(fd, &r.run_wall_s, sizeof(double)) &&
              write_all(fd, &hosts, sizeof hosts) && write_all(fd, &links, sizeof links);
    ::close(fd);
    std::fflush(nullptr);
    ::_exit(ok ? 0 : 3);
  } catch (const std::exception& e) {
    status = 1;
    const std::string msg = e.what();
    const std::uint64_t len = msg.size();
    write_all(fd, &status, sizeof status);
    write_all(fd, &len, sizeof len);
    write_all(fd, msg.data(), msg.size());
    ::close(fd);
    std::fflush(nullptr);
    ::_exit(2);
  }
}

class Reader {
 public:
  explicit Reader(const std::string& buf) : buf_(buf) {}
  template <class T>
  T get() {
    T v{};
    need(sizeof v);
    std::memcpy(&v, buf_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  void get_bytes(void* dst, std::size_t n) {
    need(n);
    std::memcpy(dst, buf_.data() + pos_, n);
    pos_ += n;
  }

 private:
  void need(std::size_t n) const {
    if (pos_ + n > buf_.size()) throw std::runtime_error("simgrid_check: truncated result from SimGrid child");
  }
  const std::string& buf_;
  std::size_t pos_ = 0;
};

std::atomic<bool> g_ran_in_process{false};

}  // namespace

SimGridResult simgrid_completion_times(std::span<const double> capacity_gbps, const FlowSet& flows,
                                       const SimGridOptions& options) {
  check_input(capacity_gbps, flows);
  SimGridResult result;
  if (!options.fork_child) {
    if (g_ran_in_process.exchange(true))
      throw std::logic_error("simgrid_check: SimGrid already ran in this process; use fork_child");
    run_simgrid(capacity_gbps, flows, options, result);
    return result;
  }

  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("simgrid_check: pipe: ") + std::strerror(errno));
  std::fflush(nullptr);  // no buffered output duplicated into the child
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("simgrid_check: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], capacity_gbps, flows, options);
  }
  ::close(fds[1]);
  std::string buf;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fds[0], chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(r));
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (buf.size() < sizeof(std::uint64_t)) {
    const std::string how = WIFSIGNALED(wstatus) ? "killed by signal " + std::to_string(WTERMSIG(wstatus))
                                                 : "exit status " + std::to_string(WEXITSTATUS(wstatus));
    throw std::runtime_error("simgrid_check: SimGrid child failed without a result (" + how + ")");
  }
  Reader in(buf);
  if (in.get<std::uint64_t>() != 0) {
    const auto len = in.get<std::uint64_t>();
    std::string msg(len, '\0');
    in.get_bytes(msg.data(), len);
    throw std::runtime_error("simgrid_check: SimGrid child failed: " + msg);
  }
  const auto n = in.get<std::uint64_t>();
  result.completion_s.resize(n);
  in.get_bytes(result.completion_s.data(), n * sizeof(double));
  result.build_wall_s = in.get<double>();
  result.run_wall_s = in.get<double>();
  result.hosts = in.get<std::uint64_t>();
  result.links = in.get<std::uint64_t>();
  return result;
}

double max_relative_error(std::span<const double> a, std::span<const double> b, double floor_s) {
  if (a.size() != b.size())
    throw std::invalid_argument("max_relative_error: sizes differ (" + std::to_string(a.size()) + " vs " +
                                std::to_string(b.size()) + ")");
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      if (a[i] != b[i]) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), floor_s));
  }
  return worst;
}

}  // namespace megascale::network
