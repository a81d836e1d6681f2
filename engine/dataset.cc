// engine/dataset.cc: MSDS reader/writer, synthetic corpus, sampling.
#include "engine/dataset.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <fmt/format.h>

#include "base/temp_file.h"
#include "engine/crc32.h"

namespace megascale::engine {
namespace {

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex32(uint32_t v) {
  return fmt::format("0x{:08x}", v);
}

std::string errno_text() { return std::strerror(errno); }

// Payload bytes are little-endian uint16; convert in place on big-endian hosts.
void to_little_endian(std::vector<uint16_t>& v) {
  if constexpr (std::endian::native == std::endian::big) {
    for (auto& x : v) x = static_cast<uint16_t>((x >> 8) | (x << 8));
  }
}

}  // namespace


void write_dataset(const std::string& path, const std::vector<uint16_t>& tokens,
                   uint32_t vocab) {
  if (vocab < 1 || vocab > 65536)
    throw DatasetError(path, "vocab size " + std::to_string(vocab) + " outside 1..65536");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= vocab)
      throw DatasetError(path, "token " + std::to_string(tokens[i]) + " at index " +
                                   std::to_string(i) + " >= vocab " + std::to_string(vocab));
  }
  std::vector<uint16_t> payload = tokens;
  to_little_endian(payload);
  const size_t payload_bytes = payload.size() * sizeof(uint16_t);

  unsigned char header[kDatasetHeaderBytes] = {};
  std::memcpy(header, "MSDS", 4);
  put_u32(header + 4, kDatasetVersion);
  put_u32(header + 8, kDatasetDtypeUint16);
  put_u32(header + 12, vocab);
  put_u64(header + 16, tokens.size());
  put_u32(header + 24, crc32(payload.data(), payload_bytes));
  put_u32(header + 28, 0);

  std::string tmp;
  const int fd = base::create_temp_beside(path, &tmp);
  if (fd < 0) throw DatasetError(path + ".tmp.*", "cannot create for writing: " + errno_text());
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    ::close(fd);
    std::remove(tmp.c_str());
    throw DatasetError(tmp, "cannot open for writing: " + errno_text());
  }
  bool ok = std::fwrite(header, 1, sizeof header, f) == sizeof header;
  ok = ok && std::fwrite(payload.data(), 1, payload_bytes, f) == payload_bytes;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    throw DatasetError(tmp, "write failed: " + errno_text());
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    std::remove(tmp.c_str());
    throw DatasetError(path, "cannot rename " + tmp + " into place: " + why);
  }
}

Dataset Dataset::open(const std::string& path) {
  // A folder opens and then fails to read ("read error"); a device such as
  // /dev/zero would be read without end. Only a regular file is a dataset.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(st)) throw DatasetError(path, "is a folder, not a dataset file");
  if (!ec && !std::filesystem::is_regular_file(st)) throw DatasetError(path, "not a regular file (a device or a pipe)");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw DatasetError(path, "cannot open: " + errno_text());
  std::vector<unsigned char> bytes;
  unsigned char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool read_error = std::ferror(f);
  const std::string why = read_error ? errno_text() : std::string();
  std::fclose(f);
  if (read_error) throw DatasetError(path, "read error: " + why);

  if (bytes.size() < kDatasetHeaderBytes)
    throw DatasetError(path, "truncated: " + std::to_string(bytes.size()) +
                                 " bytes, the header alone needs " +
                                 std::to_string(kDatasetHeaderBytes));
  if (std::memcmp(bytes.data(), "MSDS", 4) != 0) {
    std::string got;
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = bytes[i];
      got += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
    }
    throw DatasetError(path, "bad magic '" + got + "' (expected 'MSDS'): not a megascale dataset");
  }
  const uint32_t version = get_u32(&bytes[4]);
  if (version != kDatasetVersion)
    throw DatasetError(path, "unsupported version " + std::to_string(version) + " (reader knows " +
                                 std::to_string(kDatasetVersion) + ")");
  const uint32_t dtype = get_u32(&bytes[8]);
  if (dtype != kDatasetDtypeUint16)
    throw DatasetError(path, "unsupported token dtype code " + std::to_string(dtype) +
                                 " (expected 1 = uint16)");
  const uint32_t vocab = get_u32(&bytes[12]);
  if (vocab < 1 || vocab > 65536)
    throw DatasetError(path, "vocab size " + std::to_string(vocab) + " outside 1..65536");
  const uint64_t count = get_u64(&bytes[16]);
  const uint32_t want_crc = get_u32(&bytes[24]);
  const uint64_t have_payload = bytes.size() - kDatasetHeaderBytes;
  if (count > (UINT64_MAX - kDatasetHeaderBytes) / 2 || have_payload < 2 * count)
    throw DatasetError(path, "truncated: header says " + std::to_string(count) + " tokens (" +
                                 std::to_string(2 * count) + " payload bytes), file has " +
                                 std::to_string(have_payload) + " payload bytes");
  if (have_payload > 2 * count)
    throw DatasetError(path, std::to_string(have_payload - 2 * count) +
                                 " trailing bytes after the " + std::to_string(count) +
                                 " tokens the header announces");
  const uint32_t got_crc = crc32(bytes.data() + kDatasetHeaderBytes, 2 * count);
  if (got_crc != want_crc)
    throw DatasetError(path, "checksum mismatch: header says " + hex32(want_crc) +
                                 ", payload has " + hex32(got_crc) + " (corrupt file)");

  Dataset ds;
  ds.path_ = path;
  ds.vocab_ = vocab;
  ds.tokens_.resize(count);
  std::memcpy(ds.tokens_.data(), bytes.data() + kDatasetHeaderBytes, 2 * count);
  to_little_endian(ds.tokens_);  // a swap is its own inverse
  for (size_t i = 0; i < ds.tokens_.size(); ++i) {
    if (ds.tokens_[i] >= vocab)
      throw DatasetError(path, "token " + std::to_string(ds.tokens_[i]) + " at index " +
                                   std::to_string(i) + " >= vocab " + std::to_string(vocab));
  }
  return ds;
}

void check_dataset_fits(const Dataset& ds, int seq_len, int model_vocab) {
  if (ds.size() < static_cast<size_t>(seq_len) + 1)
    throw DatasetError(ds.path(), fmt::format("{} tokens, fewer than seq_len + 1 = {}", ds.size(), seq_len + 1));
  if (ds.vocab() > static_cast<uint32_t>(std::max(model_vocab, 0)))
    throw DatasetError(ds.path(), fmt::format("its vocabulary has {} tokens, the model's (model.vocab) {}: tokens "
                                              "{}..{} would have no embedding row",
                                              ds.vocab(), model_vocab, model_vocab, ds.vocab() - 1));
}

std::vector<uint16_t> make_synthetic_corpus(uint32_t vocab, size_t tokens, uint64_t seed) {
  if (vocab < kMinSyntheticVocab || vocab > kMaxSyntheticVocab)
    throw std::invalid_argument(fmt::format("make_synthetic_corpus: vocab {} outside {}..{}", vocab,
                                            kMinSyntheticVocab, kMaxSyntheticVocab));
  // A seeded permutation (Fisher-Yates) decides the three successors of token t:
  // perm[(3t + k) mod V], k = 0, 1, 2 — distinct for V >= 3.
  std::vector<uint32_t> perm(vocab);
  std::iota(perm.begin(), perm.end(), 0u);
  uint64_t state = splitmix64(seed ^ 0x4D534453ull);
  for (uint32_t i = vocab - 1; i > 0; --i) {
    state = splitmix64(state);
    std::swap(perm[i], perm[state % (i + 1)]);
  }
  std::vector<uint16_t> out(tokens);
  uint32_t t = perm[0];
  for (size_t i = 0; i < tokens; ++i) {
    out[i] = static_cast<uint16_t>(t);
    state = splitmix64(state);
    const uint64_t u = state % 10;  // 0..6 -> first, 7..8 -> second, 9 -> third
    const uint32_t k = u < 7 ? 0 : (u < 9 ? 1 : 2);
    t = perm[(3ull * t + k) % vocab];
  }
  return out;
}

double synthetic_corpus_entropy_nats() {
  return -(0.7 * std::log(0.7) + 0.2 * std::log(0.2) + 0.1 * std::log(0.1));
}

size_t sample_offset(uint64_t seed, int64_t step, int64_t index, size_t dataset_tokens,
                     int seq_len) {
  if (seq_len < 1 || dataset_tokens < static_cast<size_t>(seq_len) + 1 || step < 0 || index < 0)
    throw std::invalid_argument("sample_offset: need seq_len >= 1, step, index >= 0 and at least " +
                                std::to_string(seq_len + 1) + " tokens (have " +
                                std::to_string(dataset_tokens) + ")");
  const uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(step)) ^
                                static_cast<uint64_t>(index));
  const uint64_t positions = dataset_tokens - static_cast<size_t>(seq_len);  // o in [0, N-S-1]
  return static_cast<size_t>(h % positions);
}

void read_sample(const Dataset& ds, uint64_t seed, int64_t step, int64_t index, int seq_len,
                 int32_t* tokens, int32_t* labels) {
  if (seq_len < 1 || ds.size() < static_cast<size_t>(seq_len) + 1)
    throw std::invalid_argument(ds.path() + ": " + std::to_string(ds.size()) +
                                " tokens, too short for samples of seq_len " +
                                std::to_string(seq_len) + " (needs seq_len + 1)");
  const size_t o = sample_offset(seed, step, index, ds.size(), seq_len);
  const uint16_t* d = ds.data() + o;
  for (int i = 0; i < seq_len; ++i) {
    tokens[i] = d[i];
    labels[i] = d[i + 1];
  }
}

}  // namespace megascale::engine
