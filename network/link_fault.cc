// network/link_fault.cc: retransmission after a link flap, ECMP re-hash (see
// link_fault.h).
#include "network/link_fault.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace megascale::network {

double ib_ack_timeout_s(int e) {
  if (e < 0 || e > 31) throw std::invalid_argument("ib_ack_timeout_s: exponent must be 0..31");
  if (e == 0) return std::numeric_limits<double>::infinity();
  return kIbTimeoutUnitUs * 1e-6 * std::ldexp(1.0, e);
}

std::string validate_retransmit(const IbRetransmitConfig& cfg) {
  if (cfg.ib_timeout < 1 || cfg.ib_timeout > 31)
    return "NCCL_IB_TIMEOUT must be 1..31 (5-bit exponent; 0 would disable the timer)";
  if (cfg.retry_cnt < 0 || cfg.retry_cnt > 7)
    return "NCCL_IB_RETRY_CNT must be 0..7 (3-bit retry_cnt field of the QP)";
  if (cfg.schedule == RetransmitSchedule::kAdaptive && !(cfg.adaptive_initial_timeout_s > 0))
    return "adaptive_initial_timeout_s must be positive";
  if (!(cfg.rtt_s >= 0)) return "rtt_s must be >= 0";
  return "";
}

IbRetransmitConfig nccl_default_retransmit() { return IbRetransmitConfig{}; }

IbRetransmitConfig megascale_retransmit() {
  IbRetransmitConfig c;
  c.ib_timeout = 22;
  c.retry_cnt = 7;
  c.schedule = RetransmitSchedule::kAdaptive;
  return c;
}

double retry_budget_s(const IbRetransmitConfig& cfg) {
  const double t = ib_ack_timeout_s(cfg.ib_timeout);
  return cfg.schedule == RetransmitSchedule::kFixed ? (cfg.retry_cnt + 1) * t : cfg.retry_cnt * t;
}

std::vector<double> retransmit_times_s(const IbRetransmitConfig& cfg) {
  const std::string err = validate_retransmit(cfg);
  if (!err.empty()) throw std::invalid_argument("retransmit_times_s: " + err);
  const double timeout = ib_ack_timeout_s(cfg.ib_timeout);
  std::vector<double> times;
  if (cfg.schedule == RetransmitSchedule::kFixed) {
    for (int k = 1; k <= cfg.retry_cnt; ++k) times.push_back(k * timeout);
    return times;
  }
  // Adaptive: doubling intervals capped at the QP timeout, within the total budget.
  const double budget = retry_budget_s(cfg);
  double interval = std::min(cfg.adaptive_initial_timeout_s, timeout);
  double t = interval;
  while (t <= budget * (1 + 1e-12)) {
    times.push_back(t);
    interval = std::min(2 * interval, timeout);
    t += interval;
  }
  return times;
}

FlapOutcome simulate_link_flap(const IbRetransmitConfig& cfg, double flap_duration_s) {
  if (!(flap_duration_s >= 0))
    throw std::invalid_argument("simulate_link_flap: flap_duration_s must be >= 0");
  const std::vector<double> times = retransmit_times_s(cfg);
  FlapOutcome out;
  for (double t : times) {
    ++out.retransmissions;
    if (t >= flap_duration_s) {  // the link is up again when this retransmission leaves
      out.recovered = true;
      out.stall_s = t + cfg.rtt_s;
      return out;
    }
  }
  // Every retry was lost: the QP errors one timeout (fixed) after the last retry,
  // or at the NIC's total budget (adaptive).
  out.recovered = false;
  out.stall_s = retry_budget_s(cfg);
  return out;
}

EcmpRehashResult ecmp_rehash(int n, const std::vector<int>& failed, EcmpRehash kind) {
  if (n < 1) throw std::invalid_argument("ecmp_rehash: uplinks must be >= 1");
  std::vector<char> down(n, 0);
  for (int f : failed) {
    if (f < 0 || f >= n) throw std::invalid_argument("ecmp_rehash: failed index out of range");
    down[f] = 1;
  }
  EcmpRehashResult r;
  for (int i = 0; i < n; ++i)
    if (!down[i]) r.surviving.push_back(i);
  const int m = static_cast<int>(r.surviving.size());
  if (m == 0) throw std::invalid_argument("ecmp_rehash: every uplink failed");
  const int nf = n - m;
  r.min_moved_fraction = double(nf) / n;
  if (kind == EcmpRehash::kConsistent) {
    r.moved_fraction = r.min_moved_fraction;  // only the failed links' flows move
    return r;
  }
  // Modulo: before, a flow with hash h uses uplink h mod n; after, surviving[h mod m].
  // Both repeat with period lcm(n, m), so one period gives the exact fraction.
  const long period = std::lcm(static_cast<long>(n), static_cast<long>(m));
  long moved = 0;
  for (long h = 0; h < period; ++h)
    if (r.surviving[h % m] != h % n) ++moved;
  r.moved_fraction = double(moved) / period;
  return r;
}

}  // namespace megascale::network
