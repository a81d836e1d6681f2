// robust/netns.h: the nodes of a `megascale run` job as network hosts on one
// machine: one Linux network namespace per node, each joined to a bridge in
// the root namespace by a veth pair, with its own 10.x address (iproute2, as
// root). MPI and Redis traffic between nodes then crosses a real (virtual)
// network, and a fault can be a link cut (`ip link set ... down`) or a node's
// whole namespace going away, as on a cluster (issue 15).
//
// defines: netns_unavailable_reason, sweep_stale_netns, NetnsCluster, run_program
//
// Names carry a tag (the driver's pid), so that runs in parallel (ctest -j)
// never collide, and a run killed before it could clean up is swept by the
// next one (sweep_stale_netns: the tag's process is gone):
//   namespace  msn<tag>n<k>     bridge  msn<tag>b
//   veth       msn<tag>h<k> (root side, on the bridge) <-> msn<tag>v<k> (inside)
// Addresses: 10.A.B.1/24 on the bridge (Redis listens there), 10.A.B.(10+k)
// in namespace k; A.B from the tag, moved on when that subnet is in use here.
//
// What runs in node k: `ip netns exec msn<tag>n<k> COMMAND` (command_prefix).
// Open MPI across namespaces needs its TCP paths on the subnet, for both the
// data (btl tcp) and the ranks' PMIx connection to mpirun (which listens on
// loopback by default, a different loopback in each namespace); see
// mpirun_network_args and mpirun_network_env. Checked on this machine (Open
// MPI 4.1.4): an 8 MB all-reduce between two namespaces moved 84 MB over the
// veth of one of them.
//
// Thread-safety: one NetnsCluster per driver, used from one thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace megascale::robust {

// Runs argv (argv[0] looked up on PATH), waits; its stdout and stderr into
// *output when given. Returns the exit status (127: could not run it).
int run_program(const std::vector<std::string>& argv, std::string* output = nullptr);

// Why network namespaces cannot be made here ("" when they can): not root,
// no `ip` (iproute2), or `ip netns add` refused (no CAP_NET_ADMIN, a
// container without it). Probes with a namespace it deletes at once.
std::string netns_unavailable_reason();

// Deletes namespaces, veths and bridges of this scheme whose tag is no live
// process (a driver SIGKILLed before its cleanup). Returns how many names it
// removed.
int sweep_stale_netns();

class NetnsCluster {
 public:
  // Creates the bridge and `nodes` namespaces with their links, all up, and
  // checks with a TCP connection that every node reaches the bridge address
  // and node 0. Throws std::runtime_error naming the command that failed and
  // its output, or the connection that was not made; what was made before
  // is removed.
  NetnsCluster(int nodes, int tag);
  // Kills every process left in the namespaces, deletes links, namespaces and
  // the bridge.
  ~NetnsCluster();
  NetnsCluster(const NetnsCluster&) = delete;
  NetnsCluster& operator=(const NetnsCluster&) = delete;

  int nodes() const { return nodes_; }
  std::string ns(int node) const;
  std::string host_link(int node) const;   // the root side of node's veth
  std::string address(int node) const;     // "10.A.B.(10+node)"
  std::string host_address() const;        // the bridge's, "10.A.B.1"
  std::string subnet() const;              // "10.A.B.0/24"
  // ip netns exec <ns>: what to put before a command to run it on the node.
  std::vector<std::string> command_prefix(int node) const;
  // Cuts the node off the network: its veth (root side) down. Its processes
  // live on, and nothing tells them. Throws std::runtime_error on failure.
  void cut_link(int node);
  // The link up again (a node back in service after repair).
  void restore_link(int node);
  // The node goes away: every process in its namespace SIGKILLed, its veth
  // and its namespace deleted. Returns the pids it killed.
  std::vector<pid_t> remove_node(int node);
  bool removed(int node) const { return removed_.count(node) > 0; }
  // The pids of the processes in the node's namespace.
  std::vector<pid_t> pids(int node) const;
  // One line: "4 namespaces msn123n0..3 on bridge msn123b 10.200.123.0/24".
  std::string describe() const;

 private:
  void cleanup();
  int nodes_;
  int tag_;
  int a_ = 0, b_ = 0;  // the subnet 10.a.b.0/24
  bool bridge_made_ = false;
  std::vector<int> made_;  // nodes whose namespace exists
  std::map<int, bool> removed_;
};

// Open MPI options that keep a job's traffic on the cluster's subnet: the TCP
// BTL only (no shared memory, which would bypass the network), on the subnet.
std::vector<std::string> mpirun_network_args(const NetnsCluster& c);
// Environment for mpirun: its PMIx server listens on the subnet too, and
// accepts the ranks' connections from the namespaces.
std::map<std::string, std::string> mpirun_network_env(const NetnsCluster& c);

}  // namespace megascale::robust
