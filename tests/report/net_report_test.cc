// tests/report/net_report_test.cc: report/net_report.h's units and tables.
#include "report/net_report.h"

#include <string>

#include <gtest/gtest.h>

namespace megascale::report {
namespace {

TEST(NetReport, HumanBytesInPowersOf1024) {
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1024), "1.00 KiB");
  EXPECT_EQ(human_bytes(1.5 * (1 << 20)), "1.50 MiB");
  EXPECT_EQ(human_bytes(double(1LL << 40) * 2048), "2048.00 TiB");  // no unit above TiB
}

TEST(NetReport, HumanTimePicksSecondsMillisecondsOrMicroseconds) {
  EXPECT_EQ(human_time(1.5), "1.500 s");
  EXPECT_EQ(human_time(0.0025), "2.500 ms");
  EXPECT_EQ(human_time(12.5e-6), "12.5 us");
}

TEST(NetReport, EcmpTextAndJsonCarryMeasuredAndTheory) {
  network::EcmpStatistics s;
  s.paths = 8;
  s.flows = 16;
  s.qps = 2;
  s.trials = 100;
  s.mean_paths_used_fraction = 0.875;
  s.theory_paths_used_fraction = 0.9;
  s.collective_efficiency = 0.5;
  s.theory_collective_efficiency = 0.55;
  s.mean_max_load_flows = 4;
  const std::string text = ecmp_text(s, network::EcmpHash::kCrc32);
  EXPECT_EQ(text.rfind("16 flows x 2 QP(s) on 8 equal-cost paths, 100 trials (", 0), 0u) << text;
  EXPECT_NE(text.find("  paths used (fraction)         0.8750    0.9000\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  E[max load] (flows)           4.0000\n"), std::string::npos) << text;
  const base::Json j = ecmp_json(s, network::EcmpHash::kCrc32);
  EXPECT_DOUBLE_EQ(j["measured"]["collective_efficiency"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["theory"]["collective_efficiency"].get<double>(), 0.55);
  EXPECT_EQ(j["paths"], 8);
}

// Twenty rows, each the mean of five samples (and their largest queue), so a
// cycle near the row's length is not aliased: samples alternating 0 / 1000 KB
// read 500 KB in every row, where one sample in five read 0 KB or 1000 KB.
TEST(NetReport, IncastTextRowsAreMeansOfTheirBlockOfSamples) {
  network::IncastOptions o;
  o.senders = 4;
  o.sample_interval_us = 10;
  network::IncastReport r;
  for (int i = 0; i < 100; ++i) {
    network::FluidSample s;
    s.t_us = 10.0 * (i + 1);
    s.queue_bytes = 1000.0 * i;
    s.paused_senders_fraction = i % 2;
    r.series.push_back(s);
  }
  const std::string text = incast_text(o, r);
  EXPECT_EQ(text.rfind("incast: 4 senders -> one 200 Gb/s port, ", 0), 0u) << text;
  EXPECT_NE(text.find("  series (each row: the mean of 5 samples of 10 us, up to t_us)\n"), std::string::npos) << text;
  // The last row: samples 95..99, mean queue 97 KB, largest 99 KB, paused 2 of 5.
  EXPECT_NE(text.find("\n        1000       97.0           99.0 "), std::string::npos) << text;
  EXPECT_NE(text.find("0.400\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\n         960 "), std::string::npos) << text;
  network::IncastReport alternating;
  for (int i = 0; i < 100; ++i) {
    network::FluidSample s;
    s.t_us = 10.0 * (i + 1);
    s.queue_bytes = i % 5 == 0 ? 0 : 1.25e6;  // a cycle of exactly one row: 1 MB mean
    alternating.series.push_back(s);
  }
  const std::string a = incast_text(o, alternating);
  EXPECT_NE(a.find("\n          50     1000.0         1250.0 "), std::string::npos) << a;
}

}  // namespace
}  // namespace megascale::report
