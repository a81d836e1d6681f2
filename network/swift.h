// network/swift.h: Swift delay-based congestion control (Kumar et al., "Swift:
// Delay is Simple and Effective for Congestion Control in the Datacenter",
// SIGCOMM'20), the sender's window state machine in fluid (per-ACK-batch) form.
//
// Algorithm (paper Algorithm 1 and section 3; ../shared/REFERENCE.md):
//   on ACK of `acked` packets carrying the measured fabric delay `delay`:
//     if delay < target:            (additive increase)
//       cwnd >= 1: cwnd += ai / cwnd * acked
//       cwnd <  1: cwnd += ai * acked          (pacing mode, paper Alg. 1)
//     else if no decrease in the last RTT:   (multiplicative decrease)
//       cwnd *= max(1 - beta * (delay - target) / delay, 1 - max_mdf)
//   cwnd is clamped to [min_cwnd, max_cwnd]; below 1 packet Swift paces.
//   target = base_target + hops * h + fs(cwnd), the flow-scaling term
//     fs(cwnd) = clamp(fs_alpha / sqrt(cwnd) + fs_beta, 0, fs_range),
//     fs_alpha = fs_range / (1/sqrt(fs_min_cwnd) - 1/sqrt(fs_max_cwnd)),
//     fs_beta  = -fs_alpha / sqrt(fs_max_cwnd)
//   so fs = fs_range at fs_min_cwnd and 0 at fs_max_cwnd (paper section 3.5).
// Paper values: ai = 1.0, beta = 0.8, max_mdf = 0.5; fs_min_cwnd 0.1 and
// fs_max_cwnd 100 packets. The absolute delays (base_target, h, fs_range) are
// deployment choices the paper does not fix for this fabric; the defaults below
// (5 us of queueing above the base RTT, 1 us per hop, 5 us flow-scaling range)
// are assumptions, exposed as parameters.
// The delay fed in is the fabric RTT: base RTT + queueing delay (queue / C).
// The fluid loop turns the window into a rate: rate = cwnd * mtu / rtt.
//
// Units: cwnd in packets of mtu_bytes, time in us, rates in Gb/s.
// Thread-safety: value type; not to be shared between threads without locking.
#pragma once

namespace megascale::network {

struct SwiftParams {
  double ai = 1.0;
  double beta = 0.8;
  double max_mdf = 0.5;
  double base_target_queue_us = 5.0;  // target = base RTT + this (+ hops, fs)
  double hop_scale_us = 1.0;          // h
  int hops = 1;                       // switch hops on the path
  double fs_range_us = 5.0;
  double fs_min_cwnd = 0.1;
  double fs_max_cwnd = 100;
  double min_cwnd = 0.001;
  double max_cwnd = 1e6;              // further capped by the line rate
  double mtu_bytes = 4096;            // RoCE MTU
};

// Flow-scaling term fs(cwnd) in us (see header).
double swift_flow_scaling_us(double cwnd, const SwiftParams& p);

class SwiftSender {
 public:
  // base_rtt_us: the unloaded fabric RTT; init_cwnd: initial window (packets).
  SwiftSender(const SwiftParams& params, double base_rtt_us, double init_cwnd);

  double target_delay_us() const;
  // An ACK batch of `acked_packets` (may be fractional) with delay `delay_us`
  // arrives at now_us.
  void on_ack(double now_us, double acked_packets, double delay_us);
  // Multiplicative cut by `factor` (0 < factor <= 1) if no decrease happened in
  // the last RTT; returns whether it applied. Used by the hybrid controller.
  bool try_decrease(double now_us, double factor);
  // Like try_decrease, but within an RTT of the last decrease it deepens that
  // decrease to `factor` overall when `factor` is deeper than what was applied
  // (cwnd *= factor / applied). Returns whether cwnd changed. Used by the hybrid.
  bool decrease_to_at_least(double now_us, double factor);

  double cwnd() const { return cwnd_; }
  double last_delay_us() const { return last_delay_us_; }
  // Pacing rate implied by the window at the latest measured RTT.
  double rate_gbps(double line_rate_gbps) const;
  int decreases() const { return decreases_; }

 private:
  SwiftParams p_;
  double base_rtt_us_;
  double cwnd_;
  double last_delay_us_;
  double last_decrease_us_ = -1e300;
  double last_factor_ = 1.0;
  int decreases_ = 0;
};

}  // namespace megascale::network
