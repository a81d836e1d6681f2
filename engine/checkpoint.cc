// engine/checkpoint.cc: shard files, marker, collective save/load.
#include "engine/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/temp_file.h"
#include "engine/background_cpu.h"
#include "engine/comm.h"
#include "engine/crc32.h"

namespace megascale::engine {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoint shards store floats in host order, which must be little-endian");

constexpr uint32_t kVersion = 1;
constexpr size_t kFixedHeader = 64;
constexpr const char* kMarkerName = "COMPLETE";

class Writer {
 public:
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    buf_.insert(buf_.end(), c, c + n);
  }
  void u32(uint32_t v) { bytes(&v, 4); }
  void u64(uint64_t v) { bytes(&v, 8); }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::vector<unsigned char>& buf() { return buf_; }

 private:
  std::vector<unsigned char> buf_;
};

// Bounds-checked reader over the body; a read past the end means the body's own
// lengths are inconsistent (cannot happen once the checksum matched, unless the
// writer was buggy).
class Reader {
 public:
  Reader(const unsigned char* p, size_t n, const std::string& file, int rank)
      : p_(p), n_(n), file_(file), rank_(rank) {}
  void bytes(void* out, size_t n) {
    if (n > n_ - pos_)
      throw CheckpointError(file_, rank_, "malformed body",
                            "a field runs past the end of the shard body");
    // An empty array reads into data() == nullptr: memcpy with a null pointer is
    // undefined even for 0 bytes (UBSan, CheckpointDir tests' "empty" array).
    if (n == 0) return;
    std::memcpy(out, p_ + pos_, n);
    pos_ += n;
  }
  uint32_t u32() {
    uint32_t v;
    bytes(&v, 4);
    return v;
  }
  uint64_t u64() {
    uint64_t v;
    bytes(&v, 8);
    return v;
  }
  std::string str() {
    const uint32_t n = u32();
    if (n > n_ - pos_)
      throw CheckpointError(file_, rank_, "malformed body", "a string runs past the end");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }
  size_t remaining() const { return n_ - pos_; }

 private:
  const unsigned char* p_;
  size_t n_;
  size_t pos_ = 0;
  std::string file_;
  int rank_;
};

std::string errno_text() { return std::strerror(errno); }

// Writes `data` to path.tmp, fsyncs and renames it to `path`.
void write_atomically(const std::string& path, const void* data, size_t size, int rank) {
  std::string tmp;
  const int fd = base::create_temp_beside(path, &tmp);
  if (fd < 0) throw CheckpointError(path + ".tmp.*", rank, "write failed", "cannot create: " + errno_text());
  const auto* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t w = ::write(fd, p + done, size - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string why = errno_text();
      ::close(fd);
      ::unlink(tmp.c_str());
      throw CheckpointError(tmp, rank, "write failed", why);
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw CheckpointError(tmp, rank, "write failed", "fsync/close: " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    throw CheckpointError(path, rank, "write failed", "rename from .tmp: " + why);
  }
}

void ensure_dir(const std::string& dir, int rank) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // may race with other ranks: check after
  if (!std::filesystem::is_directory(dir))
    throw CheckpointError(dir, rank, "write failed",
                          "cannot create directory" + (ec ? ": " + ec.message() : std::string()));
}

std::string marker_text(int64_t step, int world_size) {
  return "megascale checkpoint v1\nstep=" + std::to_string(step) +
         "\nworld_size=" + std::to_string(world_size) + "\n";
}

void check_marker(const std::string& root, int64_t step, int rank, const CheckpointLayout& expected) {
  const std::string path = marker_path(root, step);
  std::ifstream in(path);
  if (!in)
    throw CheckpointError(path, rank, "partial checkpoint",
                          "completion marker missing: the save of step " + std::to_string(step) +
                              " did not finish on all ranks");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text == marker_text(step, expected.world_size)) return;
  // Which part differs, said plainly (the marker is three lines).
  long long got_step = -1, got_world = -1;
  char tail = 0;
  if (std::sscanf(text.c_str(), "megascale checkpoint v1\nstep=%lld\nworld_size=%lld%c", &got_step, &got_world,
                  &tail) != 3 ||
      tail != '\n' || text != marker_text(got_step, static_cast<int>(got_world))) {
    std::string shown = text.substr(0, 80);
    std::replace(shown.begin(), shown.end(), '\n', '|');
    throw CheckpointError(path, rank, "malformed marker",
                          "expected 'megascale checkpoint v1|step=N|world_size=W|', got '" + shown + "'");
  }
  if (got_step != step)
    throw CheckpointError(path, rank, "layout mismatch",
                          fmt::format("the marker is step {}'s, in the folder of step {}", got_step, step));
  throw CheckpointError(path, rank, "layout mismatch",
                        fmt::format("written by {} ranks (world_size), this run has {}: a checkpoint loads only into "
                                    "the layout that wrote it",
                                    got_world, expected.world_size));
}

// Agreement across ranks after a local phase: returns the ranks that failed.
std::vector<int> failed_ranks(Comm& world, bool failed) {
  std::vector<float> flags(static_cast<size_t>(world.size()));
  const float mine = failed ? 1.0f : 0.0f;
  world.all_gather(&mine, 1, flags.data());
  std::vector<int> out;
  for (int r = 0; r < world.size(); ++r)
    if (flags[r] != 0.0f) out.push_back(r);
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

CheckpointError::CheckpointError(const std::string& file, int rank, const std::string& check,
                                 const std::string& detail)
    : std::runtime_error(file + (rank >= 0 ? " (rank " + std::to_string(rank) + ")" : "") + ": " +
                         check + ": " + detail),
      file_(file),
      rank_(rank),
      check_(check) {}

std::string describe_model(const model::ModelConfig& m) {
  std::ostringstream s;
  s << "layers=" << m.layers << " hidden=" << m.hidden << " heads=" << m.heads
    << " kv_heads=" << m.kv_heads << " seq=" << m.seq_len << " vocab=" << m.vocab
    << " ffn=" << m.ffn_hidden << " mlp=" << model::to_string(m.mlp)
    << " block=" << model::to_string(m.block) << " window=" << m.attention_window;
  return s.str();
}

CheckpointLayout make_checkpoint_layout(const model::ModelConfig& m, const model::ParallelConfig& p) {
  CheckpointLayout l;
  l.world_size = p.tp * p.pp * p.dp;
  l.tp = p.tp;
  l.pp = p.pp;
  l.dp = p.dp;
  l.vpp = p.vpp;
  l.model = describe_model(m);
  // A shard is named by its world rank: under another rank order the same rank
  // holds other coordinates, so the order is part of what must match. Megatron's
  // default goes unsaid, so checkpoints written before the key load as before.
  if (p.rank_order != model::RankOrder::kTpCpDpPp) l.model += std::string(" ranks=") + model::to_string(p.rank_order);
  // Likewise uneven first / last stages (model/pipeline_layout.h): each shard
  // holds other layers than an even split's.
  if (p.first_stage_layers > 0 || p.last_stage_layers > 0) {
    l.model += " first_stage_layers=" + std::to_string(p.first_stage_layers) +
               " last_stage_layers=" + std::to_string(p.last_stage_layers);
  }
  // And a free-form layout, by its layers per virtual stage (two spellings of
  // one layout load each other's checkpoints).
  if (p.pipeline_chunk_layers != nullptr) {
    l.model += fmt::format(" chunk_layers={}", fmt::join(*p.pipeline_chunk_layers, ","));
  }
  return l;
}

const NamedArray* ShardState::find_array(const std::string& name) const {
  for (const NamedArray& a : arrays)
    if (a.name == name) return &a;
  return nullptr;
}

std::optional<int64_t> ShardState::find_value(const std::string& name) const {
  for (const auto& [k, v] : values)
    if (k == name) return v;
  return std::nullopt;
}

std::string checkpoint_dir(const std::string& root, int64_t step) {
  return (std::filesystem::path(root) / fmt::format("step_{:08d}", step)).string();
}

std::string shard_path(const std::string& root, int64_t step, int rank) {
  return (std::filesystem::path(checkpoint_dir(root, step)) / fmt::format("shard_{:05d}.msck", rank)).string();
}

std::string marker_path(const std::string& root, int64_t step) {
  return (std::filesystem::path(checkpoint_dir(root, step)) / kMarkerName).string();
}

void write_shard_file(const std::string& path, int rank, const CheckpointLayout& layout,
                      const ShardState& state) {
  Writer body;
  body.str(layout.model);
  body.u32(static_cast<uint32_t>(state.arrays.size()));
  body.u32(static_cast<uint32_t>(state.values.size()));
  for (const NamedArray& a : state.arrays) {
    body.str(a.name);
    body.u64(a.data.size());
    body.bytes(a.data.data(), a.data.size() * sizeof(float));
  }
  for (const auto& [name, v] : state.values) {
    body.str(name);
    body.u64(static_cast<uint64_t>(v));
  }
  Writer file;
  file.bytes("MSCK", 4);
  file.u32(kVersion);
  file.u32(static_cast<uint32_t>(rank));
  file.u32(static_cast<uint32_t>(layout.world_size));
  file.u32(static_cast<uint32_t>(layout.tp));
  file.u32(static_cast<uint32_t>(layout.pp));
  file.u32(static_cast<uint32_t>(layout.dp));
  file.u32(static_cast<uint32_t>(layout.vpp));
  file.u64(static_cast<uint64_t>(state.step));
  file.u64(body.buf().size());
  const unsigned char reserved[16] = {};
  file.bytes(reserved, sizeof reserved);
  file.bytes(body.buf().data(), body.buf().size());
  file.u32(crc32(file.buf().data(), file.buf().size()));
  write_atomically(path, file.buf().data(), file.buf().size(), rank);
}

ShardState read_shard_file(const std::string& path, int rank, const CheckpointLayout& expected) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw CheckpointError(path, rank, "missing shard", "cannot open: " + errno_text());
  // One read of the whole file (a byte-wise istreambuf_iterator copy took
  // seconds for a 100 MB shard on this project's loaded 2-core machine).
  const std::streamoff size = in.tellg();
  if (size < 0) throw CheckpointError(path, rank, "missing shard", "cannot size: " + errno_text());
  std::vector<unsigned char> b(static_cast<size_t>(size));
  in.seekg(0);
  if (!b.empty() && !in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size())))
    throw CheckpointError(path, rank, "truncated", "read failed: " + errno_text());
  if (b.size() < kFixedHeader + 4)
    throw CheckpointError(path, rank, "truncated",
                          std::to_string(b.size()) + " bytes, less than the " +
                              std::to_string(kFixedHeader + 4) + "-byte header + checksum");
  if (std::memcmp(b.data(), "MSCK", 4) != 0)
    throw CheckpointError(path, rank, "bad magic", "not a megascale checkpoint shard");
  uint32_t h[7];
  std::memcpy(h, b.data() + 4, sizeof h);  // version, rank, world_size, tp, pp, dp, vpp
  const uint32_t version = h[0];
  if (version != kVersion)
    throw CheckpointError(path, rank, "unsupported version",
                          "version " + std::to_string(version) + ", reader knows " +
                              std::to_string(kVersion));
  int64_t step;
  uint64_t body_bytes;
  std::memcpy(&step, b.data() + 32, 8);
  std::memcpy(&body_bytes, b.data() + 40, 8);
  const size_t have = b.size() - kFixedHeader - 4;
  if (body_bytes > have)
    throw CheckpointError(path, rank, "truncated",
                          "header announces " + std::to_string(body_bytes) + " body bytes, file has " +
                              std::to_string(have));
  if (body_bytes < have)
    throw CheckpointError(path, rank, "trailing bytes",
                          std::to_string(have - body_bytes) + " bytes after the announced body");
  uint32_t want_crc;
  std::memcpy(&want_crc, b.data() + b.size() - 4, 4);
  const uint32_t got_crc = crc32(b.data(), b.size() - 4);
  if (want_crc != got_crc) {
    throw CheckpointError(path, rank, "checksum mismatch",
                          fmt::format("stored 0x{:08x}, contents give 0x{:08x} (corrupt shard)", want_crc, got_crc));
  }
  const char* names[] = {"rank", "world_size", "tp", "pp", "dp", "vpp"};
  const int want[] = {rank, expected.world_size, expected.tp, expected.pp, expected.dp, expected.vpp};
  for (int i = 0; i < 6; ++i) {
    if (h[1 + i] != static_cast<uint32_t>(want[i]))
      throw CheckpointError(path, rank, "layout mismatch",
                            std::string(names[i]) + " is " + std::to_string(h[1 + i]) +
                                " in the checkpoint, " + std::to_string(want[i]) + " in this run");
  }
  Reader r(b.data() + kFixedHeader, body_bytes, path, rank);
  const std::string model = r.str();
  if (model != expected.model)
    throw CheckpointError(path, rank, "layout mismatch",
                          "model '" + model + "' in the checkpoint, '" + expected.model +
                              "' in this run");
  ShardState s;
  s.step = step;
  const uint32_t n_arrays = r.u32();
  const uint32_t n_values = r.u32();
  for (uint32_t i = 0; i < n_arrays; ++i) {
    NamedArray a;
    a.name = r.str();
    const uint64_t count = r.u64();
    if (count > r.remaining() / sizeof(float))
      throw CheckpointError(path, rank, "malformed body", "array '" + a.name + "' runs past the end");
    a.data.resize(count);
    r.bytes(a.data.data(), count * sizeof(float));
    s.arrays.push_back(std::move(a));
  }
  for (uint32_t i = 0; i < n_values; ++i) {
    std::string name = r.str();
    const int64_t v = static_cast<int64_t>(r.u64());
    s.values.emplace_back(std::move(name), v);
  }
  if (r.remaining() != 0)
    throw CheckpointError(path, rank, "malformed body", "unread bytes at the end of the body");
  return s;
}

ShardState read_checkpoint_shard(const std::string& root, int64_t step, int rank,
                                 const CheckpointLayout& expected) {
  check_marker(root, step, rank, expected);
  const std::string path = shard_path(root, step, rank);
  if (!std::filesystem::exists(path))
    throw CheckpointError(path, rank, "missing shard",
                          "the marker is present but this rank's shard is not");
  ShardState s = read_shard_file(path, rank, expected);
  if (s.step != step)
    throw CheckpointError(path, rank, "layout mismatch",
                          "shard holds step " + std::to_string(s.step) + ", expected " +
                              std::to_string(step));
  return s;
}

void save_checkpoint(Comm& world, const std::string& root, int64_t step,
                     const CheckpointLayout& layout, const ShardState& state) {
  const int rank = world.rank();
  if (layout.world_size != world.size())
    throw std::invalid_argument("save_checkpoint: layout.world_size " +
                                std::to_string(layout.world_size) + " != communicator size " +
                                std::to_string(world.size()));
  const std::string dir = checkpoint_dir(root, step);
  std::exception_ptr error;
  // Phase 1: directory exists and no stale marker claims completeness.
  try {
    ensure_dir(dir, rank);
    if (rank == 0) std::filesystem::remove(marker_path(root, step));
  } catch (...) {
    error = std::current_exception();
  }
  std::vector<int> failed = failed_ranks(world, error != nullptr);
  // Phase 2: every rank writes its shard.
  if (failed.empty()) {
    try {
      ShardState s = state;
      s.step = step;
      write_shard_file(shard_path(root, step, rank), rank, layout, s);
    } catch (...) {
      error = std::current_exception();
    }
    failed = failed_ranks(world, error != nullptr);
  }
  // Phase 3: rank 0 marks the checkpoint complete once all shards are in place.
  if (failed.empty()) {
    if (rank == 0) {
      try {
        const std::string text = marker_text(step, layout.world_size);
        write_atomically(marker_path(root, step), text.data(), text.size(), rank);
      } catch (...) {
        error = std::current_exception();
      }
    }
    failed = failed_ranks(world, error != nullptr);
  }
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw CheckpointError(dir, -1, "save failed",
                          "rank(s) " + rank_list(failed) + " failed to write; no marker written");
}

namespace {

// Every rank learns whether any rank's shard failed its checks (collective):
// this rank's own error is rethrown, another rank's becomes a "refused" error,
// so that no rank goes on with a checkpoint some rank could not read.
void agree_on_shards(Comm& world, const std::string& root, int64_t step, const std::exception_ptr& error) {
  const std::vector<int> failed = failed_ranks(world, error != nullptr);
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw CheckpointError(checkpoint_dir(root, step), -1, "refused",
                          "the shard(s) of rank(s) " + rank_list(failed) +
                              " failed their checks (see those ranks' errors)");
}

}  // namespace

ShardState load_checkpoint(Comm& world, const std::string& root, int64_t step,
                           const CheckpointLayout& expected) {
  std::exception_ptr error;
  ShardState s;
  try {
    s = read_checkpoint_shard(root, step, world.rank(), expected);
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_shards(world, root, step, error);
  return s;
}

ShardState load_checkpoint_one_reader(Comm& world, Comm& dp, const std::string& root, int64_t step,
                                      const CheckpointLayout& expected,
                                      const std::vector<std::pair<std::string, size_t>>& replicated) {
  const bool reader = dp.rank() == 0;
  std::exception_ptr error;
  ShardState s;
  try {
    s = read_checkpoint_shard(root, step, world.rank(), expected);
    if (reader) {
      for (const auto& [name, floats] : replicated) {
        const NamedArray* a = s.find_array(name);
        if (a == nullptr || a->data.size() != floats) {
          throw CheckpointError(shard_path(root, step, world.rank()), world.rank(), "contents",
                                "the DP group's reader needs array " + name + " of " + std::to_string(floats) +
                                    " floats; the shard " +
                                    (a == nullptr ? std::string("lacks it") : "holds " + std::to_string(a->data.size())));
        }
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  agree_on_shards(world, root, step, error);
  // The replicated arrays: the reader's copy (checked above), broadcast over the group.
  for (const auto& [name, floats] : replicated) {
    if (reader) {
      dp.broadcast(s.find_array(name)->data.data(), floats, 0);
    } else {
      // An older checkpoint may hold the array in this shard too: the reader's wins.
      s.arrays.erase(std::remove_if(s.arrays.begin(), s.arrays.end(), [&](const NamedArray& x) { return x.name == name; }),
                     s.arrays.end());
      s.arrays.push_back({name, std::vector<float>(floats)});
      dp.broadcast(s.arrays.back().data.data(), floats, 0);
    }
  }
  return s;
}

void begin_checkpoint(Comm& world, const std::string& root, int64_t step) {
  const int rank = world.rank();
  std::exception_ptr error;
  try {
    ensure_dir(checkpoint_dir(root, step), rank);
    if (rank == 0) std::filesystem::remove(marker_path(root, step));
  } catch (...) {
    error = std::current_exception();
  }
  // Also the barrier: no rank starts writing before the stale marker is gone.
  const std::vector<int> failed = failed_ranks(world, error != nullptr);
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw CheckpointError(checkpoint_dir(root, step), -1, "save failed",
                          "rank(s) " + rank_list(failed) + " could not prepare the folder");
}

CheckpointPersister::~CheckpointPersister() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointPersister::start(const std::string& root, int64_t step, int rank, const CheckpointLayout& layout,
                                ShardState state) {
  if (pending_) {
    throw std::logic_error("CheckpointPersister::start: step " + std::to_string(step_) +
                           " is still being persisted (call finish_checkpoint first)");
  }
  if (thread_.joinable()) thread_.join();
  pending_ = true;
  root_ = root;
  step_ = step;
  world_size_ = layout.world_size;
  write_s_ = 0;
  error_ = nullptr;
  written_.store(false, std::memory_order_release);
  state.step = step;
  thread_ = std::thread([this, path = shard_path(root, step, rank), rank, layout, s = std::move(state)]() mutable {
    // Its CPU is not the rank's compute (robust/heartbeat.h): counted apart,
    // freeing the snapshot included (`shard` ends inside the scope).
    const BackgroundCpuScope cpu;
    const ShardState shard = std::move(s);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      write_shard_file(path, rank, layout, shard);
    } catch (...) {
      error_ = std::current_exception();
    }
    write_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    written_.store(true, std::memory_order_release);
  });
}

void CheckpointPersister::wait() {
  if (thread_.joinable()) thread_.join();
}

void CheckpointPersister::clear() {
  wait();
  pending_ = false;
}

bool finish_checkpoint(Comm& world, CheckpointPersister& p, bool block) {
  if (!p.pending()) throw std::logic_error("finish_checkpoint: no checkpoint is being persisted");
  if (!block) {
    float done = p.written() ? 1.0f : 0.0f;
    world.all_reduce_sum(&done, 1);
    if (done < static_cast<float>(world.size())) return false;
  }
  p.wait();
  const int rank = world.rank();
  std::exception_ptr error = p.error();
  std::vector<int> failed = failed_ranks(world, error != nullptr);
  if (failed.empty()) {
    if (rank == 0) {
      try {
        const std::string text = marker_text(p.step(), p.world_size_);
        write_atomically(marker_path(p.root(), p.step()), text.data(), text.size(), rank);
      } catch (...) {
        error = std::current_exception();
      }
    }
    failed = failed_ranks(world, error != nullptr);
  }
  p.clear();
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw CheckpointError(checkpoint_dir(p.root(), p.step()), -1, "save failed",
                          "rank(s) " + rank_list(failed) + " failed to write; no marker written");
  return true;
}

namespace {

// Every step directory under `root`, with whether it has its COMPLETE marker.
std::vector<std::pair<int64_t, bool>> step_dirs(const std::string& root) {
  std::vector<std::pair<int64_t, bool>> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !entry.is_directory()) continue;
    char* end = nullptr;
    const long long k = std::strtoll(name.c_str() + 5, &end, 10);
    if (!end || *end != '\0' || k < 0) continue;
    out.emplace_back(k, std::filesystem::exists(entry.path() / kMarkerName));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<int64_t> latest_checkpoint(const std::string& root) {
  std::optional<int64_t> best;
  for (const auto& [step, complete] : step_dirs(root)) {
    if (complete) best = step;  // ascending: the last complete one wins
  }
  return best;
}

std::vector<int64_t> partial_checkpoints(const std::string& root) {
  std::vector<int64_t> out;
  for (const auto& [step, complete] : step_dirs(root)) {
    if (!complete) out.push_back(step);
  }
  return out;
}

}  // namespace megascale::engine
