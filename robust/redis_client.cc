// robust/redis_client.cc: see redis_client.h.
#include "robust/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <cmath>
#include <stdexcept>

namespace megascale::robust {
namespace {

timeval to_timeval(double s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(std::floor(s));
  tv.tv_usec = static_cast<suseconds_t>((s - std::floor(s)) * 1e6);
  return tv;
}

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw std::invalid_argument("expected \"host:port\", got \"" + text + "\"");
  }
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    throw std::invalid_argument("expected \"host:port\" with a numeric port, got \"" + text + "\"");
  }
  const int p = std::stoi(port);
  if (p < 1 || p > 65535) throw std::invalid_argument("port of \"" + text + "\" is not in 1..65535");
  return {text.substr(0, colon), p};
}

RedisClient::RedisClient(std::string host, int port, double timeout_s)
    : host_(std::move(host)), port_(port), timeout_s_(timeout_s) {}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

void RedisClient::drop(const std::string& why) {
  error_ = why;
  if (ctx_ != nullptr) redisFree(ctx_);
  ctx_ = nullptr;
}

bool RedisClient::connect() {
  if (ctx_ != nullptr) return true;
  redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_s_));
  if (c == nullptr) {
    error_ = "cannot allocate a Redis context";
    return false;
  }
  if (c->err != 0) {
    error_ = "cannot connect to Redis at " + host_ + ":" + std::to_string(port_) + ": " + c->errstr;
    redisFree(c);
    return false;
  }
  redisSetTimeout(c, to_timeval(timeout_s_));
  ctx_ = c;
  error_.clear();
  return true;
}

std::optional<RedisReply> RedisClient::command(const std::vector<std::string>& argv) {
  if (!connect()) return std::nullopt;
  std::vector<const char*> args;
  std::vector<size_t> lens;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* reply = static_cast<redisReply*>(
      redisCommandArgv(ctx_, static_cast<int>(args.size()), args.data(), lens.data()));
  if (reply == nullptr) {
    drop(std::string("Redis at ") + host_ + ":" + std::to_string(port_) + ": " +
         (ctx_->errstr[0] != '\0' ? ctx_->errstr : "connection lost"));
    return std::nullopt;
  }
  RedisReply out = convert(reply);
  freeReplyObject(reply);
  return out;
}

bool RedisClient::ping() {
  const std::optional<RedisReply> r = command({"PING"});
  return r && r->type == RedisReply::Type::kStatus && r->str == "PONG";
}

bool RedisClient::set(const std::string& key, const std::string& value) {
  const std::optional<RedisReply> r = command({"SET", key, value});
  return r && r->type != RedisReply::Type::kError;
}

std::optional<std::string> RedisClient::get(const std::string& key) {
  const std::optional<RedisReply> r = command({"GET", key});
  if (!r || r->type != RedisReply::Type::kString) return std::nullopt;
  return r->str;
}

bool RedisClient::hset(const std::string& key, const std::map<std::string, std::string>& fields) {
  if (fields.empty()) return true;
  std::vector<std::string> argv = {"HSET", key};
  for (const auto& [k, v] : fields) {
    argv.push_back(k);
    argv.push_back(v);
  }
  const std::optional<RedisReply> r = command(argv);
  return r && r->type != RedisReply::Type::kError;
}

std::map<std::string, std::string> RedisClient::hgetall(const std::string& key, bool* ok) {
  std::map<std::string, std::string> out;
  const std::optional<RedisReply> r = command({"HGETALL", key});
  if (ok != nullptr) *ok = r && r->type == RedisReply::Type::kArray;
  if (!r || r->type != RedisReply::Type::kArray) return out;
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) out[r->elements[i].str] = r->elements[i + 1].str;
  return out;
}

bool RedisClient::rpush(const std::string& key, const std::string& value) {
  const std::optional<RedisReply> r = command({"RPUSH", key, value});
  return r && r->type == RedisReply::Type::kInteger;
}

std::vector<std::string> RedisClient::lrange(const std::string& key, bool* ok) {
  std::vector<std::string> out;
  const std::optional<RedisReply> r = command({"LRANGE", key, "0", "-1"});
  if (ok != nullptr) *ok = r && r->type == RedisReply::Type::kArray;
  if (!r || r->type != RedisReply::Type::kArray) return out;
  for (const RedisReply& e : r->elements) out.push_back(e.str);
  return out;
}

bool RedisClient::del(const std::string& key) {
  const std::optional<RedisReply> r = command({"DEL", key});
  return r && r->type == RedisReply::Type::kInteger;
}

}  // namespace megascale::robust
