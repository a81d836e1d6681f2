// cli/net_check.h: `megascale calibrate net-check`: the fabric model and NCCL
// tuner (`megascale net collective`, network/collective_tuner.h) against
// nccl-tests output measured on real machines.
//
// Input: a manifest (TOML) naming each nccl-tests file and the machine it ran on,
// as its source states it:
//
//   [[run]]
//   file = "all_reduce_perf_a100_16gpu_2node_oke.txt"   # relative to the manifest
//   gpu = "A100-SXM4-40GB"                               # a profile name or file
//   nics_per_node = 8
//   nic_gbps = 200
//   transport = "RoCE, 16 x 100G per node"               # for the report
//   unscored = "why"                                     # optional: predicted, listed, not in the bounds
//   exclude = "why"                                      # optional: listed only
//
// or one file with --gpu/--nics-per-node/--nic-gbps. Every printed size of every
// run is predicted by the tuner on a MegaScale fabric of that many nodes with
// those NICs (nccl-tests' ranks and nodes from the file), and compared with the
// out-of-place time. Scored classes: large (>= 256 MiB) and small (<= 1 MiB),
// in one node and across nodes: median and max |error| against the bounds of
// issue 12 (large: median 5%, max 10%; small: median 20%, max 50%). Exit 1 when
// a scored class with points misses its bound, 0 otherwise, 2 on bad input.
//
// defines: calibrate_net_check
#pragma once

#include <ostream>

#include "cli/commands.h"  // defines: Args

namespace megascale::cli {

int calibrate_net_check(const Args& args, std::ostream& out, std::ostream& err);

}  // namespace megascale::cli
