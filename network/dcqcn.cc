// network/dcqcn.cc: DCQCN marking, CNP pacing and rate limiter (see dcqcn.h).
#include "network/dcqcn.h"

#include <algorithm>

namespace megascale::network {

double red_mark_probability(double queue_bytes, const RedEcnParams& red) {
  if (queue_bytes <= red.kmin_bytes) return 0.0;
  if (queue_bytes > red.kmax_bytes) return 1.0;
  return red.pmax * (queue_bytes - red.kmin_bytes) / (red.kmax_bytes - red.kmin_bytes);
}

DcqcnReactionPoint::DcqcnReactionPoint(double line_rate_gbps, const DcqcnParams& params)
    : p_(params),
      line_gbps_(line_rate_gbps),
      rc_gbps_(line_rate_gbps),
      rt_gbps_(line_rate_gbps),
      alpha_(params.alpha_init) {}

DcqcnReactionPoint::DcqcnReactionPoint(double line_rate_gbps, const DcqcnParams& params,
                                       double initial_rate_gbps, double start_us)
    : DcqcnReactionPoint(line_rate_gbps, params) {
  rc_gbps_ = rt_gbps_ = std::clamp(initial_rate_gbps, params.min_rate_gbps, line_rate_gbps);
  limiting_ = rc_gbps_ < line_rate_gbps;
  now_us_ = start_us;
  next_alpha_us_ = start_us + params.alpha_timer_us;
  next_rate_us_ = start_us + params.rate_timer_us;
}

void DcqcnReactionPoint::advance(double now_us) {
  if (now_us < now_us_) return;
  now_us_ = now_us;
  if (!limiting_) return;  // no rate limiter (and no timers) before the first CNP
  // Process both timers' expiries in time order.
  while (true) {
    const double next = std::min(next_alpha_us_, next_rate_us_);
    if (next > now_us) break;
    if (next_alpha_us_ <= next_rate_us_) {
      alpha_ *= (1.0 - p_.g);  // a whole window without a CNP (a CNP restarts it)
      next_alpha_us_ += p_.alpha_timer_us;
    } else {
      ++t_stage_;
      increase_event();
      next_rate_us_ += p_.rate_timer_us;
    }
  }
}

void DcqcnReactionPoint::on_cnp(double now_us) {
  advance(now_us);
  ++cnps_;
  rt_gbps_ = rc_gbps_;
  rc_gbps_ = std::max(p_.min_rate_gbps, rc_gbps_ * (1.0 - alpha_ / 2.0));
  alpha_ = (1.0 - p_.g) * alpha_ + p_.g;
  // Reset the increase machinery; restart both timers from this CNP.
  t_stage_ = 0;
  bc_stage_ = 0;
  bytes_since_event_ = 0;
  limiting_ = true;
  next_alpha_us_ = now_us + p_.alpha_timer_us;
  next_rate_us_ = now_us + p_.rate_timer_us;
}

void DcqcnReactionPoint::on_bytes_sent(double now_us, double bytes) {
  advance(now_us);
  if (!limiting_) return;
  bytes_since_event_ += bytes;
  while (bytes_since_event_ >= p_.byte_counter_bytes) {
    bytes_since_event_ -= p_.byte_counter_bytes;
    ++bc_stage_;
    increase_event();
  }
}

void DcqcnReactionPoint::increase_event() {
  const int f = p_.fast_recovery_steps;
  const int hi = std::max(t_stage_, bc_stage_);
  const int lo = std::min(t_stage_, bc_stage_);
  if (hi <= f) {
    // fast recovery: RT unchanged
  } else if (lo > f) {
    rt_gbps_ += (lo - f) * p_.rate_hai_gbps;  // hyper increase
  } else {
    rt_gbps_ += p_.rate_ai_gbps;  // additive increase
  }
  rt_gbps_ = std::min(rt_gbps_, line_gbps_);
  rc_gbps_ = std::min(line_gbps_, (rt_gbps_ + rc_gbps_) / 2.0);
}

bool DcqcnNotificationPoint::on_marked_packet(double now_us) {
  if (now_us - last_cnp_us_ < interval_us_) return false;
  last_cnp_us_ = now_us;
  return true;
}

}  // namespace megascale::network
