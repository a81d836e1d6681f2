// tests/engine/dataset_test.cc: MSDS round trip, every refusal, synthetic
// corpus, deterministic sampling.
#include "engine/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "engine/crc32.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;

class DatasetFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("msds_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<unsigned char> slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static void spit(const std::string& p, const std::vector<unsigned char>& b) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }
  // Expects Dataset::open(p) to throw a DatasetError whose message names the file
  // and contains `what`.
  static void expect_refused(const std::string& p, const std::string& what) {
    try {
      Dataset::open(p);
      ADD_FAILURE() << "expected refusal containing '" << what << "'";
    } catch (const DatasetError& e) {
      EXPECT_EQ(e.file(), p);
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
      EXPECT_NE(e.problem().find(what), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(DatasetFile, RoundTrip) {
  const std::vector<uint16_t> tokens = {0, 1, 2, 65535, 7, 42};
  write_dataset(path("a.msds"), tokens, 65536);
  const Dataset ds = Dataset::open(path("a.msds"));
  EXPECT_EQ(ds.vocab(), 65536u);
  EXPECT_EQ(ds.tokens(), tokens);
  EXPECT_EQ(fs::file_size(path("a.msds")), kDatasetHeaderBytes + 2 * tokens.size());
  for (const auto& e : fs::directory_iterator(fs::path(path("a.msds")).parent_path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

// The temporary is a fresh file: a symlink planted at the old fixed name
// "<path>.tmp" is neither followed nor its target overwritten (issue 13).
TEST_F(DatasetFile, PlantedSymlinkAtTheTemporaryNameIsNotFollowed) {
  const std::string victim = path("victim.txt");
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, path("b.msds.tmp"));
  write_dataset(path("b.msds"), std::vector<uint16_t>{1, 2, 3}, 8);
  std::ifstream in(victim);
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "precious");
  EXPECT_EQ(Dataset::open(path("b.msds")).tokens(), (std::vector<uint16_t>{1, 2, 3}));
}

TEST_F(DatasetFile, HeaderIsLittleEndianAsDocumented) {
  write_dataset(path("h.msds"), {1, 2, 3}, 100);
  const auto b = slurp(path("h.msds"));
  ASSERT_EQ(b.size(), 38u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "MSDS");
  EXPECT_EQ(b[4], 1);   // version
  EXPECT_EQ(b[8], 1);   // dtype uint16
  EXPECT_EQ(b[12], 100);  // vocab
  EXPECT_EQ(b[16], 3);  // token count
  const uint32_t crc = b[24] | b[25] << 8 | b[26] << 16 | static_cast<uint32_t>(b[27]) << 24;
  EXPECT_EQ(crc, crc32(b.data() + 32, 6));
  EXPECT_EQ(b[32], 1);
  EXPECT_EQ(b[34], 2);
}

TEST_F(DatasetFile, WriterRefusesTokenOutsideVocab) {
  EXPECT_THROW(write_dataset(path("w.msds"), {1, 2, 10}, 10), DatasetError);
  EXPECT_THROW(write_dataset(path("w.msds"), {1}, 0), DatasetError);
}

TEST_F(DatasetFile, RefusesMissingFile) { expect_refused(path("none.msds"), "cannot open"); }

// A folder used to fail as "read error"; /dev/zero was read without end.
TEST_F(DatasetFile, RefusesAFolderOrADevice) {
  expect_refused(dir_.string(), "is a folder, not a dataset file");
  expect_refused("/dev/zero", "not a regular file");
}

TEST_F(DatasetFile, RefusesBadMagic) {
  write_dataset(path("m.msds"), {1, 2, 3}, 10);
  auto b = slurp(path("m.msds"));
  b[0] = 'X';
  spit(path("m.msds"), b);
  expect_refused(path("m.msds"), "bad magic 'XSDS'");
}

TEST_F(DatasetFile, RefusesTruncatedHeaderAndPayload) {
  write_dataset(path("t.msds"), {1, 2, 3, 4}, 10);
  auto b = slurp(path("t.msds"));
  spit(path("t1.msds"), std::vector<unsigned char>(b.begin(), b.begin() + 20));
  expect_refused(path("t1.msds"), "truncated: 20 bytes");
  spit(path("t2.msds"), std::vector<unsigned char>(b.begin(), b.end() - 3));
  expect_refused(path("t2.msds"), "truncated: header says 4 tokens");
  b.push_back(0);
  spit(path("t3.msds"), b);
  expect_refused(path("t3.msds"), "1 trailing bytes");
}

TEST_F(DatasetFile, RefusesChecksumMismatch) {
  write_dataset(path("c.msds"), {1, 2, 3, 4}, 10);
  auto b = slurp(path("c.msds"));
  b[33] ^= 0x01;  // a payload byte
  spit(path("c.msds"), b);
  expect_refused(path("c.msds"), "checksum mismatch");
}

TEST_F(DatasetFile, RefusesTokenNotBelowVocabEvenWithValidChecksum) {
  write_dataset(path("v.msds"), {1, 2, 3, 4}, 10);
  auto b = slurp(path("v.msds"));
  b[32 + 2 * 2] = 12;  // token 2 := 12 >= vocab 10, fix the checksum
  const uint32_t crc = crc32(b.data() + 32, 8);
  for (int i = 0; i < 4; ++i) b[24 + i] = static_cast<unsigned char>(crc >> (8 * i));
  spit(path("v.msds"), b);
  expect_refused(path("v.msds"), "token 12 at index 2 >= vocab 10");
}

TEST_F(DatasetFile, RefusesUnknownVersion) {
  write_dataset(path("u.msds"), {1}, 10);
  auto b = slurp(path("u.msds"));
  b[4] = 9;
  spit(path("u.msds"), b);
  expect_refused(path("u.msds"), "unsupported version 9");
}

TEST_F(DatasetFile, FitsAModelOnlyWithEnoughTokensAndNoLargerVocabulary) {
  write_dataset(path("d.msds"), make_synthetic_corpus(50, 10, 3), 50);
  const Dataset ds = Dataset::open(path("d.msds"));
  EXPECT_NO_THROW(check_dataset_fits(ds, 9, 50));   // 10 tokens: one sample of 9 and its labels
  EXPECT_NO_THROW(check_dataset_fits(ds, 9, 64));   // a model may have more rows than the data uses
  try {
    check_dataset_fits(ds, 10, 50);
    ADD_FAILURE() << "10 tokens cannot make a sample of 10 and its labels";
  } catch (const DatasetError& e) {
    EXPECT_EQ(e.file(), path("d.msds"));
    EXPECT_NE(e.problem().find("10 tokens, fewer than seq_len + 1 = 11"), std::string::npos) << e.what();
  }
  try {
    check_dataset_fits(ds, 9, 49);
    ADD_FAILURE() << "token 49 has no embedding row in a 49-token model";
  } catch (const DatasetError& e) {
    EXPECT_NE(e.problem().find("has 50 tokens, the model's (model.vocab) 49: tokens 49..49"), std::string::npos)
        << e.what();
  }
}

TEST(SyntheticCorpus, DeterministicAndInVocab) {
  const auto a = make_synthetic_corpus(50, 5000, 7);
  const auto b = make_synthetic_corpus(50, 5000, 7);
  const auto c = make_synthetic_corpus(50, 5000, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (uint16_t t : a) EXPECT_LT(t, 50);
  EXPECT_THROW(make_synthetic_corpus(2, 10, 0), std::invalid_argument);
}

TEST(SyntheticCorpus, EmpiricalEntropyIsTheLearnableFloor) {
  // The conditional entropy H(next | current) measured on a long sample is
  // close to the chain's 0.80 nats, far below ln(V): a model can learn it.
  const uint32_t V = 64;
  const auto t = make_synthetic_corpus(V, 200000, 1);
  std::map<std::pair<int, int>, double> pair;
  std::map<int, double> single;
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    pair[{t[i], t[i + 1]}] += 1;
    single[t[i]] += 1;
  }
  double h = 0, n = static_cast<double>(t.size() - 1);
  for (const auto& [k, c] : pair) h -= c / n * std::log(c / single[k.first]);
  EXPECT_NEAR(h, synthetic_corpus_entropy_nats(), 0.02);
  EXPECT_NEAR(synthetic_corpus_entropy_nats(), 0.8018, 1e-3);
  EXPECT_LT(h, 0.25 * std::log(V));
  // Every token is visited (the chain mixes over the whole vocabulary).
  EXPECT_EQ(single.size(), V);
}

TEST_F(DatasetFile, SamplingIsAPureFunctionOfSeedStepIndex) {
  write_dataset(path("s.msds"), make_synthetic_corpus(100, 4000, 3), 100);
  const Dataset ds = Dataset::open(path("s.msds"));
  const int S = 16;
  std::vector<int32_t> t1(S), l1(S), t2(S), l2(S);
  read_sample(ds, 5, 3, 11, S, t1.data(), l1.data());
  read_sample(ds, 5, 3, 11, S, t2.data(), l2.data());
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(l1, l2);
  // Labels are the next tokens.
  const size_t o = sample_offset(5, 3, 11, ds.size(), S);
  for (int i = 0; i < S; ++i) {
    EXPECT_EQ(t1[i], ds.data()[o + i]);
    EXPECT_EQ(l1[i], ds.data()[o + i + 1]);
  }
  // Different step / index / seed give different offsets (almost surely).
  EXPECT_NE(sample_offset(5, 3, 11, ds.size(), S), sample_offset(5, 4, 11, ds.size(), S));
  EXPECT_NE(sample_offset(5, 3, 11, ds.size(), S), sample_offset(5, 3, 12, ds.size(), S));
  EXPECT_NE(sample_offset(5, 3, 11, ds.size(), S), sample_offset(6, 3, 11, ds.size(), S));
  // Offsets stay in range, including the last valid start N - S - 1.
  for (int i = 0; i < 1000; ++i) EXPECT_LE(sample_offset(1, 0, i, 20, 16), 3u);
  EXPECT_THROW(sample_offset(1, 0, 0, 16, 16), std::invalid_argument);
}

}  // namespace
}  // namespace megascale::engine
