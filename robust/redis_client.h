// robust/redis_client.h: a small synchronous Redis client on hiredis, for the
// control plane of `megascale run` (driver, executors, ranks' heartbeats).
//
// defines: RedisReply, RedisClient, parse_host_port
//
// A client owns one connection. Every call has a timeout (connect and each
// command); a failed command drops the connection and returns nullopt / false,
// and the next call reconnects, so a Redis that goes away and comes back (the
// `redis_kill` fault) costs the caller failed calls, never a hang or a crash.
//
// Thread-safety: one thread at a time per client (hiredis contexts are not
// thread-safe); use one client per thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

struct redisContext;

namespace megascale::robust {

struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;            // kString, kStatus, kError
  long long integer = 0;      // kInteger
  std::vector<RedisReply> elements;  // kArray
};

// "host:port" -> {host, port}; throws std::invalid_argument naming the text
// when it is not of that form (port 1..65535).
std::pair<std::string, int> parse_host_port(const std::string& text);

class RedisClient {
 public:
  RedisClient(std::string host, int port, double timeout_s = 1.0);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // Connects if not connected; true when connected.
  bool connect();
  bool connected() const { return ctx_ != nullptr; }
  // The last connection or command error ("" when none).
  const std::string& error() const { return error_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }

  // One command (argv form: no quoting issues). nullopt when Redis could not be
  // reached or the connection broke (then dropped); a Redis error reply is
  // returned as Type::kError.
  std::optional<RedisReply> command(const std::vector<std::string>& argv);

  // Helpers; false / empty when the command failed.
  bool ping();
  bool set(const std::string& key, const std::string& value);
  std::optional<std::string> get(const std::string& key);
  bool hset(const std::string& key, const std::map<std::string, std::string>& fields);
  // Empty map when the key is absent or the call failed (see ok()).
  std::map<std::string, std::string> hgetall(const std::string& key, bool* ok = nullptr);
  bool rpush(const std::string& key, const std::string& value);
  std::vector<std::string> lrange(const std::string& key, bool* ok = nullptr);
  bool del(const std::string& key);

 private:
  void drop(const std::string& why);

  std::string host_;
  int port_;
  double timeout_s_;
  redisContext* ctx_ = nullptr;
  std::string error_;
};

}  // namespace megascale::robust
