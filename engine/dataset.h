// engine/dataset.h: the tokenised binary dataset format, a synthetic corpus the
// project makes itself (no downloads), and deterministic sampling.
//
// File format "MSDS" version 1, every integer little-endian:
//   offset size  field
//        0    4  magic "MSDS"
//        4    4  version (1)
//        8    4  token dtype (1 = uint16)
//       12    4  vocab size V (1..65536); every token < V
//       16    8  token count N
//       24    4  CRC-32 (engine/crc32.h) of the payload bytes
//       28    4  reserved (0)
//       32  2*N  payload: N uint16 tokens
// The file size must be exactly 32 + 2*N. Reading checks all of it and throws
// DatasetError naming the file and the problem (bad magic, unsupported
// version/dtype, truncated, trailing bytes, checksum mismatch, token >= vocab).
// Writing goes to "<path>.tmp" and is renamed into place, so a reader never sees
// a half-written file.
//
// Sampling: sample `index` (0..global_batch-1) of step `step` starts at a token
// offset that is a pure function of (seed, step, index): tokens = data[o, o+S),
// labels = data[o+1, o+S+1) (next-token prediction). Every parallel layout
// therefore sees the same global batch, and resuming at step k needs no cursor
// beyond k itself.
//
// Thread-safety: Dataset is immutable after open(); concurrent reads are safe.
#pragma once

#include "base/splitmix64.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace megascale::engine {

class DatasetError : public std::runtime_error {
 public:
  DatasetError(const std::string& file, const std::string& problem)
      : std::runtime_error(file + ": " + problem), file_(file), problem_(problem) {}
  const std::string& file() const { return file_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_;
  std::string problem_;
};

inline constexpr uint32_t kDatasetVersion = 1;
inline constexpr uint32_t kDatasetDtypeUint16 = 1;
inline constexpr size_t kDatasetHeaderBytes = 32;

// Writes `tokens` as an MSDS file. Throws DatasetError when a token is >= vocab,
// vocab is outside 1..65536, or the file cannot be written.
void write_dataset(const std::string& path, const std::vector<uint16_t>& tokens,
                   uint32_t vocab);

class Dataset {
 public:
  // Reads and validates the whole file (header, size, checksum, token range).
  static Dataset open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t vocab() const { return vocab_; }
  size_t size() const { return tokens_.size(); }  // N
  const uint16_t* data() const { return tokens_.data(); }
  const std::vector<uint16_t>& tokens() const { return tokens_; }

 private:
  std::string path_;
  uint32_t vocab_ = 0;
  std::vector<uint16_t> tokens_;
};

// Throws DatasetError (naming ds.path()) when the dataset cannot feed a model of
// `seq_len` tokens per sample and `model_vocab` embedding rows: fewer than
// seq_len + 1 tokens (one sample and its shifted labels), or a vocabulary
// larger than the model's (its tokens at or above model_vocab have no
// embedding row; the engine would stop at the first such token mid-run).
void check_dataset_fits(const Dataset& ds, int seq_len, int model_vocab);

// A tiny synthetic corpus a small model can learn: a first-order Markov chain
// over `vocab` tokens where each token has three successors with probabilities
// 0.7 / 0.2 / 0.1 (chosen by a seeded permutation), so the next-token entropy is
// about 0.80 nats against ln(vocab) for a model that has learnt nothing: the loss
// visibly falls from ~ln(V) towards ~0.8. Deterministic in (vocab, tokens, seed).
// REQUIRES: kMinSyntheticVocab <= vocab <= kMaxSyntheticVocab (throws
// std::invalid_argument otherwise): three distinct successors, 16-bit tokens.
inline constexpr uint32_t kMinSyntheticVocab = 3;
inline constexpr uint32_t kMaxSyntheticVocab = 65536;
std::vector<uint16_t> make_synthetic_corpus(uint32_t vocab, size_t tokens, uint64_t seed);

// Entropy rate (nats per token) of make_synthetic_corpus's chain: the loss floor.
double synthetic_corpus_entropy_nats();

// Token offset of sample `index` of step `step`: uniform in [0, N - seq_len - 1].
// REQUIRES: dataset_tokens >= seq_len + 1, seq_len >= 1, step >= 0, index >= 0.
size_t sample_offset(uint64_t seed, int64_t step, int64_t index, size_t dataset_tokens,
                     int seq_len);

// Writes sample (step, index) into tokens[0..seq_len) and labels[0..seq_len).
// Throws std::invalid_argument when the dataset is shorter than seq_len + 1.
void read_sample(const Dataset& ds, uint64_t seed, int64_t step, int64_t index, int seq_len,
                 int32_t* tokens, int32_t* labels);

// splitmix64: the project's stateless hash / RNG step (base/splitmix64.h).
using base::splitmix64;

}  // namespace megascale::engine
