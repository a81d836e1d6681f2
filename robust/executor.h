// robust/executor.h: one executor per node of a `megascale run` job.
//
// defines: ExecutorOptions, run_executor, spawn_executor
//
// An executor registers in Redis (ms:<job>:executor:<n>, rewritten every
// heartbeat period with its pid and time) and watches the ranks the layout
// (ms:<job>:layout) puts on its node: for each it checks the pid the rank's
// heartbeat gave is still a live process (not gone, not a zombie) and writes
// ms:<job>:node:<n> alive:<r> = 1|0, pid:<r> (the process checked) and
// gone_at:<r> (the wall time it first saw it gone). It exits when
// ms:<job>:stop appears or the driver (its parent) is gone. Redis down: it
// keeps polling and reconnects.
//
// Self-checks (robust/self_check.h): at its start the executor opens its
// check port and times the compute check (its baseline), both published in
// its executor hash (check_port, baseline_gemm_cpu_s); between heartbeats it
// looks for a request in ms:<job>:selfcheck:<n> every 50 ms, runs the checks
// on its node (under the node's emulated hardware state, ms:<job>:hw:<n>)
// and answers in ms:<job>:selfcheck_result:<n>.
//
// The executors are processes of this machine (`megascale run --executor
// ...`, spawned by the driver), each in its node's network namespace when the
// nodes are namespaces (robust/netns.h; it then reaches Redis at the bridge's
// address); the ranks themselves are started by the driver's mpirun and the
// "node" is the slot the layout assigns.
//
// Thread-safety: run_executor is a process's main loop.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace megascale::robust {

struct ExecutorOptions {
  std::string redis;   // host:port
  std::string job;
  int node = 0;
  double period_s = 1;
  // The node's address when it is a network namespace (robust/netns.h): the
  // check port listens on every address of the namespace and is published
  // with it (check_host). "": loopback only.
  std::string address;
  // Started as `<prefix...> megascale run --executor ...` (ip netns exec NS).
  std::vector<std::string> command_prefix;
};

// Runs until told to stop; returns the process exit status (0).
int run_executor(const ExecutorOptions& o);

// Starts `self_binary run --executor ...` as a child process; returns its pid.
// Throws std::runtime_error when it cannot fork.
pid_t spawn_executor(const std::string& self_binary, const ExecutorOptions& o, const std::string& log_path);

}  // namespace megascale::robust
