// tests/cli/search_command_test.cc: a search users can act on (issue 13):
// `--csv FILE`, a line per layout on stderr during `--refine`, `--min-headroom
// 10%` beside `--headroom 0.1`, the ranking's spread held against the model's
// measured error, and `--plot FILE.svg` (MFU against memory per GPU).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/accuracy.h"
#include "run_megascale.h"
#include "tests/svg_reader.h"

namespace {

namespace fs = std::filesystem;
using namespace megascale::cli_testing;

const std::string kSmall = kSourceDir + "/scenarios/example-small.toml";
const std::string kPaper1024 = kSourceDir + "/scenarios/paper/table2-megascale-1024.toml";

class SearchCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("megascale-search-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string read(const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  fs::path dir_;
};

TEST_F(SearchCommand, CsvHoldsTheRankingThenEveryValidLayout) {
  const std::string csv = path("layouts.csv");
  const RunResult r = run_megascale({"search", kSmall, "--top", "4", "--refine", "2", "--csv", csv});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find("wrote " + csv), std::string::npos) << r.out;
  const std::vector<std::string> rows = lines(read(csv));
  ASSERT_GT(rows.size(), 5u) << read(csv);
  EXPECT_EQ(rows[0],
            "rank,tp,pp,vpp,dp,micro_batch,zero_stage,recompute,sequence_parallel,mfu,iteration_time_s,"
            "memory_per_gpu_bytes,fits,event_mfu,event_iteration_time_s,cp,first_stage_layers,last_stage_layers,"
            "pipeline_layout");
  for (int rank = 1; rank <= 4; ++rank) EXPECT_EQ(rows[rank].rfind(std::to_string(rank) + ",", 0), 0u) << rows[rank];
  // The refined two carry their event MFU; the others leave it empty.
  // (event_mfu is the 14th column; cp follows event_iteration_time_s).
  auto event_mfu = [](const std::string& row) {
    std::istringstream cells(row);
    std::string cell;
    for (int i = 0; i < 14; ++i) std::getline(cells, cell, ',');
    return cell;
  };
  EXPECT_NE(event_mfu(rows[1]), "") << rows[1];
  EXPECT_NE(event_mfu(rows[2]), "") << rows[2];
  EXPECT_EQ(event_mfu(rows[3]), "") << rows[3];
  EXPECT_NE(rows[3].find(",,,"), std::string::npos) << rows[3];  // no event time either
  EXPECT_EQ(rows[5].rfind(",", 0), 0u) << rows[5];  // beyond the ranking: no rank
  // The JSON report does not change with --csv.
  const RunResult j = run_megascale({"search", kSmall, "--top", "4", "--json", "--csv", path("j.csv")});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  EXPECT_EQ(j.out.find("wrote"), std::string::npos);
  EXPECT_TRUE(fs::exists(path("j.csv")));
}

TEST_F(SearchCommand, CsvToAMissingDirectoryIsRefusedBeforeTheSearch) {
  const RunResult r = run_megascale({"search", kSmall, "--csv", path("no/such/dir/x.csv")});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_NE(r.err.find("--csv " + path("no/such/dir/x.csv") + ": cannot write (No such file or directory)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("usage:"), std::string::npos) << r.err;  // the options are right, the path is not
  EXPECT_EQ(r.out, "");
}

// GPUs no layout splits over: said so, not blamed on a --fix nobody gave (or
// on memory).
TEST_F(SearchCommand, GpusNoLayoutSplitsOverAreNamed) {
  const RunResult r = run_megascale({"search", kSmall, "--gpus", "1000000"});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_NE(r.out.find("0 layouts enumerated"), std::string::npos) << dump(r);
  EXPECT_NE(r.err.find("no layout of gpt-1.3b splits over 1000000 GPUs: tp x cp x pp x dp must equal them"),
            std::string::npos)
      << dump(r);
  EXPECT_NE(r.err.find("dp dividing the global batch (128)"), std::string::npos) << dump(r);
  EXPECT_EQ(r.err.find("--fix"), std::string::npos) << dump(r);
}

TEST_F(SearchCommand, RefinePrintsOneLinePerLayoutOnStderr) {
  const RunResult r = run_megascale({"search", kSmall, "--top", "3", "--refine", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (int i = 1; i <= 3; ++i) {
    const std::string head = "refine " + std::to_string(i) + "/3: TP ";
    const size_t at = r.err.find(head);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
    EXPECT_NE(line.find(" PP "), std::string::npos) << line;
    EXPECT_NE(line.find("event MFU "), std::string::npos) << line;
    EXPECT_NE(line.find(" s)"), std::string::npos) << line;
  }
  EXPECT_EQ(r.out.find("refine 1/3"), std::string::npos);  // stdout stays JSON
}

TEST_F(SearchCommand, MinHeadroomTakesAPercentOrAFraction) {
  const RunResult percent = run_megascale({"search", kPaper1024, "--min-headroom", "25%", "--top", "5", "--json"});
  const RunResult fraction = run_megascale({"search", kPaper1024, "--min-headroom", "0.25", "--top", "5", "--json"});
  const RunResult old = run_megascale({"search", kPaper1024, "--headroom", "0.25", "--top", "5", "--json"});
  const RunResult none = run_megascale({"search", kPaper1024, "--top", "5", "--json"});
  ASSERT_EQ(percent.exit_code, 0) << dump(percent);
  ASSERT_EQ(fraction.exit_code, 0) << dump(fraction);
  ASSERT_EQ(old.exit_code, 0) << dump(old);
  // The same ranking each way (the wall time aside), and not the one without headroom.
  auto ranking = [](const std::string& json) {
    const nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    return j.is_discarded() ? std::string("not JSON") : j["top"].dump();
  };
  EXPECT_EQ(ranking(percent.out), ranking(fraction.out));
  EXPECT_EQ(ranking(percent.out), ranking(old.out));
  EXPECT_NE(ranking(percent.out), ranking(none.out));
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--min-headroom", "95%"}, {"--min-headroom", "10"}, {"--min-headroom", "x%"},
        {"--min-headroom", "10%", "--headroom", "0.1"}}) {
    std::vector<std::string> args = {"search", kSmall};
    args.insert(args.end(), bad.begin(), bad.end());
    const RunResult r = run_megascale(args);
    EXPECT_EQ(r.exit_code, 2) << bad[1] << "\n" << dump(r);
    EXPECT_NE(r.err.find("headroom"), std::string::npos) << dump(r);
  }
}

// ZeRO 2/3 rows over several micro-batches per replica are named under the
// table with what whole gradients would add (model/memory.h); rows of one
// micro-batch per replica, or ZeRO-1, are not.
TEST_F(SearchCommand, RankingNamesShardedGradientsThatTheTimeDoesNotPayFor) {
  const RunResult r = run_megascale({"search", kSmall, "--fix", "zero_stage=2,dp=4", "--top", "3"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  std::vector<int> rows;  // ranks whose layout has more than one micro-batch per replica
  for (const std::string& line : lines(r.out)) {
    std::istringstream in(line);
    std::string rank;
    double mfu = 0, iter_s = 0;
    int tp = 0, cp = 0, pp = 0, vpp = 0, dp = 0, mb = 0;
    std::string stages;
    if (!(in >> rank >> mfu >> iter_s >> tp >> cp >> pp >> stages >> vpp >> dp >> mb)) continue;
    // example-small: global batch 128 over the DP column's replicas of mb samples
    if (128 / (dp * mb) > 1) rows.push_back(std::stoi(rank));
  }
  ASSERT_FALSE(rows.empty()) << r.out;
  const size_t at = r.out.find("ZeRO 2/3 with several micro-batches per replica (#" + std::to_string(rows[0]));
  ASSERT_NE(at, std::string::npos) << r.out;
  // The figure depends on which rows rank (one row: "4.9 GB"; several: "2.3-2.7 GB").
  const std::regex named(R"(whole, they add [0-9.]+(-[0-9.]+)? GB and every one still fits)");
  EXPECT_TRUE(std::regex_search(r.out.substr(at), named)) << r.out;
  const RunResult z1 = run_megascale({"search", kSmall, "--fix", "zero_stage=1,dp=4", "--top", "3"});
  ASSERT_EQ(z1.exit_code, 0) << dump(z1);
  EXPECT_EQ(z1.out.find("ZeRO 2/3 with several micro-batches"), std::string::npos) << z1.out;
}

// Where ranked ZeRO 2/3 rows would not fit with whole gradients, the note
// names the best layout that does (text and JSON).
TEST_F(SearchCommand, NamesTheBestLayoutThatFitsWithWholeGradients) {
  const std::string file = kSourceDir + "/scenarios/published/dgxc-llama31-70b-64-bf16.toml";
  const RunResult r = run_megascale({"search", file, "--top", "3"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  const size_t at = r.out.find("would not fit\n  (scenarios/README.md, zero_stage; --fix zero_stage=1 ranks without them)\n"
                               "  best that fits with whole gradients: TP ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out.substr(at), std::regex(R"(whole gradients: TP [^\n]+, MFU [0-9.]+%, [0-9.]+ s\n)")))
      << r.out;
  const RunResult j = run_megascale({"search", file, "--top", "3", "--json"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  const nlohmann::json parsed_json = nlohmann::json::parse(j.out);
  ASSERT_TRUE(parsed_json.contains("best_whole_gradients")) << j.out;
  EXPECT_GT(parsed_json["best_whole_gradients"].value("mfu", 0.0), 0.0);
  EXPECT_LE(parsed_json["best_whole_gradients"].value("mfu", 0.0), parsed_json["top"][0].value("mfu", 0.0));
  // The small example's ZeRO 2 rows still fit whole: no such line.
  const RunResult small = run_megascale({"search", kSmall, "--fix", "zero_stage=2,dp=4", "--top", "3"});
  ASSERT_EQ(small.exit_code, 0) << dump(small);
  EXPECT_EQ(small.out.find("best that fits with whole gradients"), std::string::npos) << small.out;
}

TEST_F(SearchCommand, RankingSaysWhichLayoutsLieWithinTheModelsError) {
  const RunResult r = run_megascale({"search", kSmall, "--top", "10"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_NE(r.out.find(" 1* "), std::string::npos) << r.out;  // the best is always within
  const size_t at = r.out.find("* within error of the best: the 10 ranked layouts lie within ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("within {:.2f} points of #1", megascale::model::kAnalyticalMfuErrorPoints), at), std::string::npos) << r.out.substr(at);
  EXPECT_NE(r.out.find("results/validation.md", at), std::string::npos) << r.out.substr(at);
  const RunResult refined = run_megascale({"search", kSmall, "--top", "4", "--refine", "2"});
  ASSERT_EQ(refined.exit_code, 0) << dump(refined);
  EXPECT_NE(refined.out.find("the 2 refined layouts (event MFU) lie within"), std::string::npos) << refined.out;
  EXPECT_NE(refined.out.find(fmt::format("within {:.2f} points of #1", megascale::model::kEventMfuErrorPoints)), std::string::npos) << refined.out;
}

TEST_F(SearchCommand, PlotShowsEveryLayoutAgainstTheMemoryCapacity) {
  const std::string svg = path("search.svg");
  const RunResult r = run_megascale({"search", kPaper1024, "--top", "5", "--min-headroom", "10%", "--plot", svg});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  std::string error;
  const auto all = megascale::svg_testing::read_svg(read(svg), &error);
  ASSERT_EQ(error, "");
  int capacity = 0, limit = 0, ranked = 0, others = 0;
  for (const auto& e : all) {
    const std::string c = e.has("class") ? e.attrs.at("class") : "";
    capacity += c == "capacity";
    limit += c == "headroom-limit";
    ranked += c == "ranked";
    others += c == "fits" || c == "does-not-fit";
  }
  EXPECT_EQ(capacity, 1);
  EXPECT_EQ(limit, 1);
  EXPECT_EQ(ranked, 5);
  EXPECT_GT(others, 5);
  const RunResult bad = run_megascale({"search", kSmall, "--plot", "/nonexistent-dir/x.svg"});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_NE(bad.err.find("--plot /nonexistent-dir/x.svg: cannot write (No such file or directory)"), std::string::npos)
      << bad.err;
}

}  // namespace

namespace {

// Llama 3 70B at PP 8 x VPP 5: the search ranks the heads-balanced split
// (model/head_balance.h) first, names it in Megatron-Core's spelling in the
// text and in each layout's JSON, and counts such splits.
TEST(SearchCommandLayouts, RanksAndNamesTheHeadsBalancedSplit) {
  const std::string file = kSourceDir + "/scenarios/published/bridge-llama3-70b-64-fp8.toml";
  const std::vector<std::string> args = {"search", file, "--fix", "tp=4,pp=8,vpp=5", "--top", "3"};
  const RunResult text = run_megascale(args);
  ASSERT_EQ(text.exit_code, 0) << dump(text);
  EXPECT_NE(text.out.find("10x3+11+10x3+9"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("uneven stages as Megatron-Core --pipeline-model-parallel-layout:"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("\"Et*2|(t*2|)*34,t*3|(t*2|)*3,tL\"  (heads balanced)"), std::string::npos) << text.out;
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const RunResult json = run_megascale(json_args);
  ASSERT_EQ(json.exit_code, 0) << dump(json);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_GE(j.at("head_balanced_ranked").get<int>(), 1);
  EXPECT_EQ(j.at("top").at(0).at("parallel").at("megatron_layout"), "Et*2|(t*2|)*34,t*3|(t*2|)*3,tL");
}

}  // namespace
