// robust/redis_server.h: a private `redis-server` for one `megascale run`, on a
// free local port, in its own temporary folder, stopped at the end.
//
// defines: RedisServer, free_local_port, redis_server_available
//
// The server runs without persistence (--save "", no AOF): the control plane's
// state is soft (every executor and rank rewrites its whole status on each
// heartbeat, the driver republishes the layout), so a restarted server is
// refilled within one heartbeat period. kill() is the `redis_kill` fault
// (SIGKILL); start() again brings a fresh server up on the same port.
//
// The server dies with the driver: it gets SIGTERM when the thread that
// called start() ends (PR_SET_PDEATHSIG), so a driver SIGKILLed before stop()
// leaves no redis-server behind. Call start() from a thread that lives as
// long as the server is wanted (the driver's main thread).
//
// Thread-safety: one thread at a time.
#pragma once

#include <sys/types.h>

#include <string>

namespace megascale::robust {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0).
int free_local_port();
// `redis-server` is on PATH.
bool redis_server_available();

class RedisServer {
 public:
  // `dir`: where its log goes (created when missing). `also_bind`: an
  // address it listens on besides 127.0.0.1 (the bridge of the nodes'
  // network namespaces, robust/netns.h), "" for none; address() gives it.
  RedisServer(int port, std::string dir, std::string also_bind = "");
  ~RedisServer();  // stop()
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it and waits until it answers PING (up to timeout_s); throws
  // std::runtime_error with the reason (binary missing, port taken: see its log).
  void start(double timeout_s = 5.0);
  // SIGKILL, reaped: the server is gone at once, as after a crash.
  void kill();
  // SIGTERM, then SIGKILL after 2 s; reaped. No-op when not running.
  void stop();
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string address() const { return (also_bind_.empty() ? "127.0.0.1" : also_bind_) + ":" + std::to_string(port_); }

 private:
  int port_;
  std::string also_bind_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace megascale::robust
