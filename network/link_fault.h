// network/link_fault.h: what a link flap does to an RDMA transfer, and how ECMP
// re-hashes around a link that stays down. Independent of the topology code.
//
// 1. Retransmission after a flap (NCCL over InfiniBand / RoCE RC queue pairs).
//    NCCL sets the QP's Local ACK Timeout exponent from NCCL_IB_TIMEOUT and its
//    retry count from NCCL_IB_RETRY_CNT (NCCL src/transport/net_ib: defaults 20
//    and 7 in current releases; v2.19 used 18 for the timeout; REFERENCE.md
//    "Congestion control and link faults").
//      timeout = 4.096 us x 2^NCCL_IB_TIMEOUT   (IB spec 1.2, 12.7.34; rdma-core
//                                                rdma_set_ack_timeout doc)
//      default: 4.096 us x 2^20 = 4.295 s.
//    Retry count: a 3-bit field (0..7, IB spec 12.7.38): the number of times the
//    requester retransmits after a timeout before it completes the work request
//    with IBV_WC_RETRY_EXC_ERR ("transport retry counter exceeded"); NCCL then
//    fails the communicator and the job stops.
//    Timer schedule, fixed (the IB spec default): the transport timer is the same
//    Local ACK Timeout for every retry; the spec defines no exponential back-off
//    (Open MPI's description of the spec's retry_count/timeout; Mellanox/NVIDIA
//    document back-off only as a NIC feature, below). So after the last ACK at
//    time 0 (the flap starts), retransmission k goes out at k x timeout,
//    k = 1..retry_cnt; the transfer resumes at the first one that finds the link
//    up; if none does, the QP errors at (retry_cnt + 1) x timeout. A flap of
//    duration D therefore
//      recovers iff D <= retry_cnt x timeout, after a stall of
//      ceil(D / timeout) x timeout (>= one whole timeout, however short the flap),
//      and otherwise fails the job at (retry_cnt + 1) x timeout,
//    matching REFERENCE.md's "a flap longer than about (retry+1) x timeout fails".
//    Timer schedule, adaptive (NVIDIA ConnectX "Adaptive Retransmission", docs:
//    networking docs "Adaptive Retransmission: Parameters Control", Algorithm &
//    Profile Description): the NIC starts from a short timeout and doubles it on
//    consecutive timeouts, capped by the QP's ack timeout; the QP fails when no
//    progress is made within QP.ack_timeout x QP.retry_cnt (qp_total_timeout
//    mode). Modelled as: first retry after adaptive_initial_timeout_s, each later
//    one after twice the previous interval (capped at the QP timeout), failure
//    when the next retry would fall after retry_cnt x timeout. The NIC's range
//    table and random initial value are simplified to this doubling.
//    MegaScale (NSDI'24, REFERENCE.md "MegaScale fabric"): "NCCL retransmit timer
//    and retry count raised; NIC adaptive retransmission on". The paper gives no
//    values; megascale_retransmit() picks NCCL_IB_TIMEOUT = 22 (17.2 s per try)
//    and the 3-bit maximum retry count 7 (NCCL's default is already 7, so the
//    budget is raised through the timeout), with adaptive retransmission on.
//
// 2. ECMP re-hash around a failed uplink: the surviving set and the fraction of
//    flows that must move. Modulo hashing (link = hash mod n_alive) remaps most
//    flows when n_alive changes; consistent (resilient) hashing moves only the
//    flows of the failed links (fraction failed / n). Computed exactly over a
//    uniform hash space (one full period of both moduli).
//
// Units: seconds (_s), microseconds (_us).
// Thread-safety: pure functions and value types.
#pragma once

#include <string>
#include <vector>

namespace megascale::network {

inline constexpr double kIbTimeoutUnitUs = 4.096;  // IB spec: 4.096 us x 2^timeout

// Local ACK Timeout of an IB/RoCE RC QP, seconds. REQUIRES: 0 <= exponent <= 31
// (5-bit field; 0 means "infinite" in the spec and returns +inf here).
double ib_ack_timeout_s(int ib_timeout_exponent);

enum class RetransmitSchedule { kFixed, kAdaptive };

struct IbRetransmitConfig {
  int ib_timeout = 20;  // NCCL_IB_TIMEOUT (exponent)
  int retry_cnt = 7;    // NCCL_IB_RETRY_CNT
  RetransmitSchedule schedule = RetransmitSchedule::kFixed;
  double adaptive_initial_timeout_s = 4.096e-6 * (1 << 12);  // ~16.8 ms (assumption)
  double rtt_s = 10e-6;  // one fabric round trip for the retransmission to be ACKed
};

// Returns "" when valid, else the reason (exponent outside 1..31, retry count
// outside 0..7, non-positive adaptive timeout).
std::string validate_retransmit(const IbRetransmitConfig& cfg);

IbRetransmitConfig nccl_default_retransmit();  // NCCL defaults: 20, 7, fixed
IbRetransmitConfig megascale_retransmit();     // 22, 7, adaptive (see header)

// Time from the last ACK until the QP reports a retry-exceeded error, if the
// link never comes back: fixed: (retry_cnt + 1) x timeout; adaptive:
// retry_cnt x timeout (the NIC's total budget).
double retry_budget_s(const IbRetransmitConfig& cfg);

// Retransmission times after the flap starts (t = 0: the last ACK), in order,
// before the QP gives up.
std::vector<double> retransmit_times_s(const IbRetransmitConfig& cfg);

struct FlapOutcome {
  bool recovered = false;
  double stall_s = 0;       // recovered: flap start -> transfer resumes;
                            // failed: flap start -> the QP error (job failure)
  int retransmissions = 0;  // retransmissions sent (including the successful one)
};

// A link carrying a transfer goes down for flap_duration_s starting at the last
// ACK. REQUIRES: validate_retransmit(cfg) == "" and flap_duration_s >= 0 (throws
// std::invalid_argument otherwise).
FlapOutcome simulate_link_flap(const IbRetransmitConfig& cfg, double flap_duration_s);

// ---- ECMP re-hash -------------------------------------------------------------

enum class EcmpRehash { kModulo, kConsistent };

struct EcmpRehashResult {
  std::vector<int> surviving;   // uplink indices still up, ascending
  double moved_fraction = 0;    // of all flows, the share whose uplink changes
  double min_moved_fraction = 0;  // failed / n: flows that had to move anyway
};

// `uplinks` equal-cost uplinks 0..uplinks-1, `failed` indices down (duplicates
// ignored). REQUIRES: uplinks >= 1, indices in range, at least one survivor
// (throws std::invalid_argument otherwise).
EcmpRehashResult ecmp_rehash(int uplinks, const std::vector<int>& failed, EcmpRehash kind);

}  // namespace megascale::network
