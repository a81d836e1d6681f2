// robust/fault_injection.h: the faults `megascale run` can inject, written as
// text (`--inject`, and how the driver hands them to the ranks) or as
// [[inject]] tables in the scenario (model::InjectSpec).
//
// defines: parse_inject, format_inject, parse_inject_list, format_inject_list,
//          check_inject, corrupt_file
//
// Text form: NAME:key=value[:key=value]..., e.g. "kill:rank=1:step=5",
// "slow:rank=0:step=3:percent=200", "redis_kill:step=6". Faults:
//   kill                the rank SIGKILLs itself at its first collective of step S
//   hang                the rank enters its first collective of step S and blocks
//                       there forever (it announces the collective, posts nothing)
//   slow                from step S on, every step of the rank first burns CPU
//                       for percent% of its previous step's compute: the step
//                       does that much more work, as on a slower processor
//                       (RankAgent::begin_step)
//   traffic_stop        from its first collective of step S on, the rank stops
//                       sending and receiving (blocks before the collective) but
//                       stays alive and keeps heartbeating
//   corrupt_checkpoint  at step S the rank flips bytes in its shard of the newest
//                       complete checkpoint, then SIGKILLs itself: the restart must
//                       load that checkpoint, whose CRC check refuses it
//   redis_kill          the driver SIGKILLs the Redis server once a rank reports
//                       step S; ranks and executors keep going and reconnect
//                       when the driver restarts it
//   slow_all            `slow` on every rank at once (no rank=R): a job-wide
//                       slowdown (a throttled machine, a slow shared input);
//                       no rank stands out, the job's own baseline does
//                       (robust/detector.h SlowDetector::uniform_slowdown)
//   link_cut            the driver sets the veth of rank R's node down once the
//                       rank reports step S: the node is cut off the network,
//                       silently (its processes live on). Needs [recovery]
//                       nodes = "netns" (robust/netns.h)
//   node_down           the driver takes rank R's node away once the rank
//                       reports step S: every process in the node's namespace
//                       SIGKILLed, its link and namespace deleted. Needs
//                       [recovery] nodes = "netns"
// redis_kill, link_cut and node_down are the driver's to fire (the ranks never
// see them); the others fire inside the rank (robust/heartbeat.h).
// A fault fires once: after a recovery the driver does not hand it to the next
// attempt (the faulty node was evicted).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"

namespace megascale::robust {

// Throws std::invalid_argument naming the part of `text` that is wrong and why
// (unknown fault with "did you mean", unknown key, bad number, missing key).
model::InjectSpec parse_inject(const std::string& text);
std::string format_inject(const model::InjectSpec& f);
// ';'-separated; "" -> none.
std::vector<model::InjectSpec> parse_inject_list(const std::string& text);
std::string format_inject_list(const std::vector<model::InjectSpec>& faults);

// Checks a fault against the job: rank < ranks, step <= steps. Throws
// std::invalid_argument naming the fault.
void check_inject(const model::InjectSpec& f, int ranks, int steps);

// Flips `count` bytes of the file at `offset` (bitwise not), in place. Throws
// std::runtime_error when the file cannot be opened or is shorter.
void corrupt_file(const std::string& path, long offset, int count);

}  // namespace megascale::robust
