// network/hybrid_cc.cc: Swift delay AIMD + DCQCN-style ECN cut (see hybrid_cc.h).
#include "network/hybrid_cc.h"

#include <algorithm>

namespace megascale::network {

HybridSender::HybridSender(const HybridParams& params, double base_rtt_us, double init_cwnd)
    : p_(params), swift_(params.swift, base_rtt_us, init_cwnd), alpha_(params.alpha_init) {}

void HybridSender::advance(double now_us) {
  if (now_us < now_us_) return;
  now_us_ = now_us;
  if (!alpha_timer_running_) return;  // as DCQCN: the alpha timer starts at the first CNP
  while (next_alpha_us_ <= now_us) {
    alpha_ *= (1.0 - p_.g);
    next_alpha_us_ += p_.alpha_timer_us;
  }
}

void HybridSender::on_ack(double now_us, double acked_packets, double delay_us) {
  advance(now_us);
  swift_.on_ack(now_us, acked_packets, delay_us);
}

bool HybridSender::on_cnp(double now_us) {
  advance(now_us);
  ++cnps_;
  const double factor = 1.0 - alpha_ / 2.0;  // computed with alpha before the update, as DCQCN
  alpha_ = (1.0 - p_.g) * alpha_ + p_.g;
  alpha_timer_running_ = true;
  next_alpha_us_ = now_us + p_.alpha_timer_us;
  return swift_.decrease_to_at_least(now_us, factor);
}

}  // namespace megascale::network
