// network/dcqcn.h: DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments", SIGCOMM'15) as two small state machines: the switch's RED/ECN
// marking function (congestion point, CP), the receiver NIC's CNP pacing
// (notification point, NP) and the sender NIC's rate limiter (reaction point, RP).
// The fluid loop in network/congestion.h drives them; tests drive them directly.
//
// Formulas (paper section 3; ../shared/REFERENCE.md "Congestion control"):
//   CP  RED marking: p(q) = 0 below Kmin, Pmax*(q-Kmin)/(Kmax-Kmin) between,
//       1 above Kmax.
//   NP  at most one CNP per flow per N = 50 us, sent when a marked packet
//       arrives and none was sent in the last N us.
//   RP  on CNP:   RT <- RC;  RC <- RC*(1 - alpha/2);  alpha <- (1-g)*alpha + g;
//                 the rate timer, byte counter and both stage counters reset.
//       alpha timer: every K = 55 us without a CNP, alpha <- (1-g)*alpha.
//       increase events: the rate timer fires every T = 55 us (stage counter
//       T_stage++), the byte counter every B bytes sent (BC_stage++); on each:
//         max(T_stage, BC_stage) <= F : fast recovery  RC <- (RT+RC)/2
//         min(T_stage, BC_stage) >  F : hyper increase RT += i*R_HAI,
//                                       i = min(T_stage, BC_stage) - F;
//                                       RC <- (RT+RC)/2
//         otherwise                   : additive      RT += R_AI; RC <- (RT+RC)/2
//       RC and RT are capped at the line rate.
//   Paper values: Kmin 5 KB, Kmax 200 KB, Pmax 1%, g = 1/256, N = 50 us,
//   K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mb/s.
//   R_HAI is not given by the paper; the default here (400 Mb/s = 10 x R_AI)
//   is an assumption, exposed as a parameter.
//
// Modelling choice (stated, not from the paper's text): a flow starts at line
// rate with no rate limiter and alpha = 1; its timers start at its first CNP, as
// in Mellanox NICs, which allocate the rate limiter on the first CNP. Hence the
// first CNP halves the rate exactly (alpha = 1 -> RC*(1 - 1/2)), and alpha after
// k alpha-windows without a CNP is exactly (1-g)^k.
//
// Units: rates in Gb/s, time in us, sizes in bytes.
// Thread-safety: value types; an instance must not be shared between threads
// without external locking. red_mark_probability is a pure function.
#pragma once

namespace megascale::network {

// Switch RED/ECN marking (DCQCN paper values).
struct RedEcnParams {
  double kmin_bytes = 5e3;
  double kmax_bytes = 200e3;
  double pmax = 0.01;
};

// Marking probability of one packet that finds `queue_bytes` in the egress queue.
double red_mark_probability(double queue_bytes, const RedEcnParams& red);

struct DcqcnParams {
  double g = 1.0 / 256;                // alpha EWMA gain
  double alpha_init = 1.0;             // alpha before the first CNP
  double alpha_timer_us = 55;          // K
  double rate_timer_us = 55;           // T
  double byte_counter_bytes = 10e6;    // B
  int fast_recovery_steps = 5;         // F
  double rate_ai_gbps = 0.040;         // R_AI, 40 Mb/s
  double rate_hai_gbps = 0.400;        // R_HAI (assumption, see header)
  double min_rate_gbps = 0.1;          // floor of the rate limiter (assumption)
  double cnp_interval_us = 50;         // N, NP side
};

// Sender-side rate limiter (RP). Time must be non-decreasing across calls.
class DcqcnReactionPoint {
 public:
  DcqcnReactionPoint(double line_rate_gbps, const DcqcnParams& params);
  // Starts rate-limited at initial_rate_gbps (RC = RT = initial) with the timers
  // running from start_us, as if a CNP had been handled then without changing
  // alpha. Used to start a flow below line rate (convergence tests).
  DcqcnReactionPoint(double line_rate_gbps, const DcqcnParams& params, double initial_rate_gbps,
                     double start_us);

  // Fires every alpha-timer and rate-timer expiry in (last advance, now_us].
  void advance(double now_us);
  // A CNP arrives at now_us (timers are first advanced to now_us).
  void on_cnp(double now_us);
  // `bytes` were sent at now_us (byte counter; may fire increase events).
  void on_bytes_sent(double now_us, double bytes);

  double rate_gbps() const { return rc_gbps_; }         // RC, the current rate
  double target_rate_gbps() const { return rt_gbps_; }  // RT
  double alpha() const { return alpha_; }
  int timer_stage() const { return t_stage_; }
  int byte_stage() const { return bc_stage_; }
  bool limiting() const { return limiting_; }  // true after the first CNP
  int cnps() const { return cnps_; }

 private:
  void increase_event();

  DcqcnParams p_;
  double line_gbps_;
  double rc_gbps_, rt_gbps_, alpha_;
  bool limiting_ = false;
  double now_us_ = 0;
  double next_alpha_us_ = 0, next_rate_us_ = 0;  // next timer expiries
  double bytes_since_event_ = 0;
  int t_stage_ = 0, bc_stage_ = 0;
  int cnps_ = 0;
};

// Receiver-side CNP pacing (NP): one CNP per flow per cnp_interval_us.
class DcqcnNotificationPoint {
 public:
  explicit DcqcnNotificationPoint(double cnp_interval_us = 50) : interval_us_(cnp_interval_us) {}
  // A marked packet arrives at now_us; returns true when a CNP is sent.
  bool on_marked_packet(double now_us);

 private:
  double interval_us_;
  double last_cnp_us_ = -1e300;
};

}  // namespace megascale::network
