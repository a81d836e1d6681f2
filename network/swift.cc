// network/swift.cc: Swift window state machine (see swift.h).
#include "network/swift.h"

#include <algorithm>
#include <cmath>

namespace megascale::network {

double swift_flow_scaling_us(double cwnd, const SwiftParams& p) {
  const double a =
      p.fs_range_us / (1.0 / std::sqrt(p.fs_min_cwnd) - 1.0 / std::sqrt(p.fs_max_cwnd));
  const double b = -a / std::sqrt(p.fs_max_cwnd);
  const double fs = a / std::sqrt(std::max(cwnd, 1e-9)) + b;
  return std::clamp(fs, 0.0, p.fs_range_us);
}

SwiftSender::SwiftSender(const SwiftParams& params, double base_rtt_us, double init_cwnd)
    : p_(params),
      base_rtt_us_(base_rtt_us),
      cwnd_(std::clamp(init_cwnd, params.min_cwnd, params.max_cwnd)),
      last_delay_us_(base_rtt_us) {}

double SwiftSender::target_delay_us() const {
  return base_rtt_us_ + p_.base_target_queue_us + p_.hops * p_.hop_scale_us +
         swift_flow_scaling_us(cwnd_, p_);
}

bool SwiftSender::try_decrease(double now_us, double factor) {
  // At most one decrease per RTT (the RTT being the latest measured delay).
  if (now_us - last_decrease_us_ < last_delay_us_) return false;
  cwnd_ = std::clamp(cwnd_ * factor, p_.min_cwnd, p_.max_cwnd);
  last_decrease_us_ = now_us;
  last_factor_ = factor;
  ++decreases_;
  return true;
}

bool SwiftSender::decrease_to_at_least(double now_us, double factor) {
  if (try_decrease(now_us, factor)) return true;
  if (factor >= last_factor_) return false;
  cwnd_ = std::clamp(cwnd_ * factor / last_factor_, p_.min_cwnd, p_.max_cwnd);
  last_factor_ = factor;
  return true;
}

void SwiftSender::on_ack(double now_us, double acked_packets, double delay_us) {
  last_delay_us_ = delay_us;
  const double target = target_delay_us();
  if (delay_us < target) {
    if (cwnd_ >= 1.0) {
      cwnd_ += p_.ai / cwnd_ * acked_packets;
    } else {
      cwnd_ += p_.ai * acked_packets;
    }
    cwnd_ = std::clamp(cwnd_, p_.min_cwnd, p_.max_cwnd);
  } else {
    const double f = std::max(1.0 - p_.beta * (delay_us - target) / delay_us, 1.0 - p_.max_mdf);
    try_decrease(now_us, f);
  }
}

double SwiftSender::rate_gbps(double line_rate_gbps) const {
  // bytes per us * 8e-3 = Gb/s
  const double r = cwnd_ * p_.mtu_bytes / last_delay_us_ * 8e-3;
  return std::min(r, line_rate_gbps);
}

}  // namespace megascale::network
