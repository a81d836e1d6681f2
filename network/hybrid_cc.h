// network/hybrid_cc.h: the congestion control MegaScale describes (Jiang et al.,
// NSDI'24, section 4: "combining the advantages of Swift and DCQCN": precise RTT
// measurement with fast ECN-based reaction). The paper gives no formulas, so the
// design below is ours; it combines the two published algorithms with as little
// new as possible:
//
//   * Delay path = Swift exactly (network/swift.h): the same target (base +
//     hops*h + flow scaling), additive increase while delay < target, a
//     multiplicative decrease max(1 - beta*(delay-target)/delay, 1 - max_mdf)
//     at most once per RTT.
//   * ECN path = DCQCN's reaction to a CNP (network/dcqcn.h), applied to the
//     window instead of a rate: the switch marks with the same RED profile
//     (Kmin 5 KB, Kmax 200 KB, Pmax 1%), the receiver returns at most one CNP per
//     flow per 50 us, and on a CNP the sender updates alpha <- (1-g)*alpha + g and
//     cuts cwnd <- cwnd * (1 - alpha/2); alpha decays by (1-g) per 55 us window
//     without a CNP; alpha starts at 1, so the first CNP halves the window.
//   * One decrease per RTT, the deeper of the two signals: the first cut in an
//     RTT (delay or CNP) applies at once; a later CNP within the same RTT only
//     deepens it to the CNP's factor if that is deeper than what was applied
//     (never a second full cut), and a delay cut within it is suppressed. So one
//     congestion episode is not punished twice, yet a burst that ECN sees as
//     severe (alpha near 1) is cut by up to half within one RTT even when the
//     delay path cut only a little. alpha is updated on every CNP.
//   * Increase is Swift's only (no DCQCN timer/byte-counter recovery): the window
//     grows back additively while the measured delay is under the target.
//
// Why "fast reaction": ECN marks start at Kmin (5 KB, a fraction of a
// microsecond of queue at 200 Gb/s) while the delay path acts only above the
// target (several us of queue), and the first CNP cuts by 1/2 where Swift's first
// cut is proportional to (delay - target)/delay. In steady state alpha decays,
// so ECN cuts become small and the delay target keeps the queue bounded.
//
// Units: cwnd in packets, time in us, rates in Gb/s.
// Thread-safety: value type; not to be shared between threads without locking.
#pragma once

#include "network/swift.h"

namespace megascale::network {

struct HybridParams {
  SwiftParams swift;
  double g = 1.0 / 256;         // alpha gain (DCQCN)
  double alpha_init = 1.0;
  double alpha_timer_us = 55;   // DCQCN K
  double cnp_interval_us = 50;  // DCQCN N (receiver side)
};

class HybridSender {
 public:
  HybridSender(const HybridParams& params, double base_rtt_us, double init_cwnd);

  void advance(double now_us);  // alpha decay windows up to now_us
  void on_ack(double now_us, double acked_packets, double delay_us);
  // Returns whether the window was cut or deepened (false: the RTT's cut was
  // already at least as deep).
  bool on_cnp(double now_us);

  double cwnd() const { return swift_.cwnd(); }
  double alpha() const { return alpha_; }
  double target_delay_us() const { return swift_.target_delay_us(); }
  double rate_gbps(double line_rate_gbps) const { return swift_.rate_gbps(line_rate_gbps); }
  int cnps() const { return cnps_; }

 private:
  HybridParams p_;
  SwiftSender swift_;
  double alpha_;
  bool alpha_timer_running_ = false;
  double next_alpha_us_ = 0;
  double now_us_ = 0;
  int cnps_ = 0;
};

}  // namespace megascale::network
