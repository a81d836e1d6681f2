// tests/engine/trace_test.cc: recorder, CSV round trip and errors, Chrome JSON,
// merge across ranks (threads backend).
#include "engine/trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/text_file.h"
#include "engine/comm.h"
#include "engine/comm_threads.h"

namespace megascale::engine {
namespace {

namespace fs = std::filesystem;
using model::Stream;

class TraceFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("trace_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  void write(const std::string& n, const std::string& text) const {
    std::ofstream(path(n)) << text;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Expects read_trace_csv to fail at `line`, column `column`.
  void expect_parse_error(const std::string& body, int line, const std::string& column) {
    write("bad.csv", "rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops\n" + body);
    try {
      read_trace_csv(path("bad.csv"));
      ADD_FAILURE() << "no error for: " << body;
    } catch (const TraceParseError& e) {
      EXPECT_EQ(e.file(), path("bad.csv"));
      EXPECT_EQ(e.line(), line) << e.what();
      EXPECT_EQ(e.column(), column) << e.what();
      EXPECT_NE(std::string(e.what()).find(path("bad.csv") + ":" + std::to_string(line)),
                std::string::npos)
          << e.what();
    }
  }
  fs::path dir_;
};

std::vector<TraceEvent> sample_events() {
  std::vector<TraceEvent> ev;
  ev.push_back({0, Stream::kCompute, "forward", 3, 1, -1, 10.5, 20.25, 0, 1.5e9});
  ev.push_back({0, Stream::kPpSend, "send_activation", 3, 1, -1, 20.25, 22.0, 65536, 0});
  ev.push_back({1, Stream::kTpComm, "tp_allgather", 0, 0, 5, 1.0, 2.0, 4096, 0});
  ev.push_back({1, Stream::kDpComm, "odd, \"kind\"", -1, -1, -1, 0.0, 0.001, 0, 0});
  return ev;
}

TEST(TraceRecorder, RecordsScopesAndInternsKinds) {
  TraceRecorder rec(3, 4);
  const double t0 = TraceRecorder::now_us();
  {
    TraceRecorder::Scope s(&rec, Stream::kCompute, "forward", 2, 1, -1, 0, 1e6);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  rec.record(Stream::kPpSend, "send_activation", 2, 1, -1, 5.0, 6.0, 128);
  std::string kind = "forward";  // interned by value: a temporary string is fine
  rec.record(Stream::kCompute, kind, 3, 0, -1, 7.0, 8.0);
  for (int i = 0; i < 10; ++i) rec.record(Stream::kCompute, "backward", i, 0, -1, 9, 10);  // grows
  const auto ev = rec.events();
  ASSERT_EQ(ev.size(), 13u);
  EXPECT_EQ(ev[0].rank, 3);
  EXPECT_EQ(ev[0].kind, "forward");
  EXPECT_EQ(ev[0].microbatch, 2);
  EXPECT_EQ(ev[0].flops, 1e6);
  EXPECT_GE(ev[0].start_us, t0);
  EXPECT_GE(ev[0].duration_us(), 1500.0);
  EXPECT_EQ(ev[1].stream, Stream::kPpSend);
  EXPECT_EQ(ev[1].bytes, 128);
  EXPECT_EQ(ev[2].kind, "forward");
  rec.set_enabled(false);
  rec.record(Stream::kCompute, "x", 0, 0, 0, 0, 1);
  EXPECT_EQ(rec.size(), 13u);
  rec.clear();
  EXPECT_EQ(rec.size(), 0u);
}

TEST_F(TraceFiles, CsvRoundTrip) {
  const auto ev = sample_events();
  write_trace_csv(path("t.csv"), ev);
  EXPECT_EQ(read_trace_csv(path("t.csv")), ev);
  const std::string text = slurp(path("t.csv"));
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "rank,stream,kind,microbatch,chunk,layer,start_us,end_us,bytes,flops");
  EXPECT_NE(text.find("0,compute,forward,3,1,-1,10.500,20.250,0,1500000000\n"), std::string::npos)
      << text;
}

TEST_F(TraceFiles, CsvErrorsNameFileLineAndColumn) {
  const std::string ok = "0,compute,forward,0,0,-1,1.0,2.0,0,0\n";
  expect_parse_error(ok + "x,compute,forward,0,0,-1,1,2,0,0\n", 3, "rank");
  expect_parse_error("0,gpu,forward,0,0,-1,1,2,0,0\n", 2, "stream");
  expect_parse_error("0,compute,,0,0,-1,1,2,0,0\n", 2, "kind");
  expect_parse_error("0,compute,forward,1.5,0,-1,1,2,0,0\n", 2, "microbatch");
  expect_parse_error("0,compute,forward,0,-2,-1,1,2,0,0\n", 2, "chunk");
  expect_parse_error("0,compute,forward,0,0,L3,1,2,0,0\n", 2, "layer");
  expect_parse_error("0,compute,forward,0,0,-1,abc,2,0,0\n", 2, "start_us");
  expect_parse_error("0,compute,forward,0,0,-1,3,2,0,0\n", 2, "end_us");
  // NaN and infinities (from_chars reads them; no comparison caught NaN) and
  // times before the origin.
  expect_parse_error("0,compute,forward,0,0,-1,nan,2,0,0\n", 2, "start_us");
  expect_parse_error("0,compute,forward,0,0,-1,-2.5,2,0,0\n", 2, "start_us");
  expect_parse_error("0,compute,forward,0,0,-1,1,inf,0,0\n", 2, "end_us");
  expect_parse_error("0,compute,forward,0,0,-1,1,2,0,inf\n", 2, "flops");
  expect_parse_error("0,compute,forward,0,0,-1,1,2,-8,0\n", 2, "bytes");
  expect_parse_error("0,compute,forward,0,0,-1,1,2,0,\n", 2, "flops");
  expect_parse_error(ok + ok + "0,compute,forward,0,0,-1,1,2,0\n", 4, "");
  expect_parse_error("0,compute,\"forward,0,0,-1,1,2,0,0\n", 2, "");
  write("hdr.csv", "rank,stream,kind\n");
  EXPECT_THROW(read_trace_csv(path("hdr.csv")), TraceParseError);
  EXPECT_THROW(read_trace_csv(path("missing.csv")), base::InputFileError);  // "<path>: cannot read (...)"
}

TEST_F(TraceFiles, ChromeJsonHasCompleteEventsPerRankAndStream) {
  write_chrome_trace(path("t.json"), sample_events());
  const std::string j = slurp(path("t.json"));
  EXPECT_EQ(j.find("{\"displayTimeUnit\":\"ms\",\"traceEvents\":["), 0u);
  EXPECT_NE(j.find("{\"name\":\"forward 3.1\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                   "\"ts\":10.5,\"dur\":9.75,"),
            std::string::npos)
      << j;
  // The whole file is one JSON document (nlohmann-json reads it back).
  const nlohmann::json doc = nlohmann::json::parse(j, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << j;
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_NE(j.find("\"name\":\"tp_allgather 0.0 L5\""), std::string::npos);
  EXPECT_NE(j.find("\"name\":\"odd, \\\"kind\\\"\""), std::string::npos);
  EXPECT_NE(j.find("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":4,\"args\":{\"name\":"
                   "\"dp_comm\"}}"),
            std::string::npos);
  EXPECT_NE(j.find("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"rank 1\"}}"),
            std::string::npos);
  EXPECT_EQ(j.substr(j.size() - 4), "\n]}\n");
}

TEST_F(TraceFiles, MergeGathersAllRanksShiftedToZero) {
  const std::string prefix = path("run");
  std::vector<TraceEvent> merged;
  run_on_threads(3, [&](Comm& world) {
    TraceRecorder rec(world.rank());
    const double base = 1000.0 * (3 - world.rank());
    rec.record(Stream::kCompute, "forward", 0, 0, -1, base, base + 10);
    rec.record(Stream::kDpComm, "dp_reducescatter", -1, 0, -1, base + 20, base + 25, 4096);
    auto out = merge_traces(world, rec, prefix);
    if (world.rank() == 0) {
      merged = std::move(out);
    } else {
      EXPECT_TRUE(out.empty());
    }
  });
  ASSERT_EQ(merged.size(), 6u);
  EXPECT_EQ(merged[0].rank, 2);  // earliest
  EXPECT_EQ(merged[0].start_us, 0.0);
  EXPECT_EQ(merged[5].rank, 0);
  EXPECT_EQ(merged[5].start_us, 2020.0);
  EXPECT_EQ(read_trace_csv(prefix + ".csv"), merged);
  EXPECT_TRUE(fs::exists(prefix + ".json"));
  EXPECT_FALSE(fs::exists(prefix + ".rank0.csv"));
}

}  // namespace
}  // namespace megascale::engine
