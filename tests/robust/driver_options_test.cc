// robust::driver_options (robust/driver.h): `megascale run FILE`'s options,
// with its faults checked against the job before anything starts.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "engine/dataset.h"
#include "robust/driver.h"

namespace megascale::robust {
namespace {

const std::string kTiny = std::string(MEGASCALE_SOURCE_DIR) + "/scenarios/cpu/robust-tiny.toml";

std::string error_of(const std::vector<std::string>& overrides, const std::vector<std::string>& injects) {
  try {
    driver_options(kTiny, overrides, injects, "/opt/megascale/bin/megascale");
  } catch (const model::ScenarioError& e) {
    return std::string("scenario: ") + e.what();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid: ") + e.what();
  }
  return "";
}

TEST(DriverOptions, FaultsBinariesAndDefaultPaths) {
  const DriverOptions o = driver_options(kTiny, {"train.steps=8"}, {"kill:rank=1:step=5", "slow:rank=0:step=3:percent=200"},
                                         "/opt/megascale/bin/megascale");
  EXPECT_EQ(o.scenario.train.steps, 8);  // the override reached the scenario
  ASSERT_EQ(o.faults.size(), o.scenario.inject.size() + 2);
  EXPECT_EQ(o.faults.back().fault, "slow");
  EXPECT_EQ(o.faults.back().percent, 200);
  EXPECT_EQ(o.engine_binary, "/opt/megascale/bin/megascale-train");
  EXPECT_EQ(o.self_binary, "/opt/megascale/bin/megascale");
  EXPECT_EQ(o.profile_path, "results/recovery/" + o.scenario.name + ".json");
  EXPECT_EQ(o.work_dir, o.scenario.train.work_dir + "/run-" + o.scenario.name);
}

TEST(DriverOptions, ARestartingFaultNeedsACheckpoint) {
  for (const char* fault : {"kill:rank=1:step=3", "hang:rank=0:step=3", "traffic_stop:rank=1:step=3",
                                   "corrupt_checkpoint:rank=0:step=3", "link_cut:rank=1:step=3", "node_down:rank=1:step=3"}) {
    const std::string e = error_of({"train.checkpoint_every=0"}, {fault});
    EXPECT_NE(e.find("scenario: "), std::string::npos) << fault << ": " << e;
    EXPECT_NE(e.find("train.checkpoint_every"), std::string::npos) << fault << ": " << e;
    EXPECT_NE(e.find("restarts the job"), std::string::npos) << fault << ": " << e;
  }
  // A slow rank restarts the job only when slow ranks are evicted.
  EXPECT_EQ(error_of({"train.checkpoint_every=0", "recovery.evict_slow=false"}, {"slow:rank=0:step=3:percent=200"}), "");
  EXPECT_NE(error_of({"train.checkpoint_every=0", "recovery.evict_slow=true"}, {"slow:rank=0:step=3:percent=200"}), "");
  // Redis going away does not restart the job.
  EXPECT_EQ(error_of({"train.checkpoint_every=0"}, {"redis_kill:step=3"}), "");
}

// A layout the engine cannot run is refused before a node starts: launched, it
// failed every attempt on every node, the driver took it for a faulty node
// (evicting a healthy one) until max_restarts, and wrote a recovery profile.
TEST(DriverOptions, RefusesWhatTheEngineCannotTrainBeforeLaunching) {
  for (const auto& [override_text, key] :
       {std::pair{"parallel.recompute=\"full\"", "parallel.recompute"},
        std::pair{"parallel.recompute=\"selective\"", "parallel.recompute"},
        std::pair{"parallel.zero_stage=3", "parallel.zero_stage"},
        std::pair{"model.hidden_dropout=0.1", "model.hidden_dropout"}}) {
    const std::string e = error_of({override_text}, {});
    EXPECT_NE(e.find(std::string("scenario: ") + kTiny), std::string::npos) << override_text << ": " << e;
    EXPECT_NE(e.find(key), std::string::npos) << override_text << ": " << e;
  }
}

// train.data is read before launch: a missing, corrupt or too-large-vocabulary
// dataset failed on every node, and the driver evicted a healthy one for it.
TEST(DriverOptions, RefusesTrainingDataEveryRankWouldFailOn) {
  const std::string dir = ::testing::TempDir() + "driver_options_data_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  engine::write_dataset(dir + "/v200.msds", engine::make_synthetic_corpus(200, 1000, 1), 200);
  engine::write_dataset(dir + "/v96.msds", engine::make_synthetic_corpus(96, 1000, 1), 96);
  std::ofstream(dir + "/junk.msds") << "not a dataset, but 32 bytes or more long";
  for (const auto& [file, why] : {std::pair{"missing.msds", "cannot open: No such file or directory"},
                                  std::pair{"junk.msds", "not a megascale dataset"},
                                  std::pair{"v200.msds", "its vocabulary has 200 tokens, the model's (model.vocab) 96"}}) {
    const std::string e = error_of({"train.data=\"" + dir + "/" + file + "\""}, {});
    EXPECT_NE(e.find(std::string("scenario: ") + kTiny), std::string::npos) << file << ": " << e;
    EXPECT_NE(e.find("train.data"), std::string::npos) << file << ": " << e;
    EXPECT_NE(e.find(why), std::string::npos) << file << ": " << e;
  }
  EXPECT_EQ(error_of({"train.data=\"" + dir + "/v96.msds\""}, {}), "");
  std::filesystem::remove_all(dir);
}

TEST(DriverOptions, RefusesAFaultOutsideTheJobAndAnotherEngine) {
  EXPECT_NE(error_of({}, {"kill:rank=7:step=3"}).find("invalid: "), std::string::npos);
  EXPECT_NE(error_of({}, {"explode:rank=0:step=3"}).find("invalid: "), std::string::npos);
  // The same fault twice fired once, silently.
  EXPECT_EQ(error_of({}, {"kill:rank=0:step=3", "kill:rank=0:step=3"}),
            "invalid: fault kill:rank=0:step=3 is given twice: it fires once");
  EXPECT_EQ(error_of({}, {"kill:rank=0:step=3", "kill:rank=0:step=5"}), "");  // another step: another fault
  const std::string cuda = error_of({"train.device=\"cuda\""}, {});
  EXPECT_NE(cuda.find("train.device"), std::string::npos) << cuda;
}

// A run that fails before its control plane starts (its work folder cannot
// be made) ends with the reason and a profile; it crashed reading the fired
// faults from the Redis it never started.
TEST(DriverOptions, AFailureBeforeTheControlPlaneIsReportedNotACrash) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("megascale-driver-early-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  DriverOptions o = driver_options(kTiny, {}, {}, "/opt/megascale/bin/megascale");
  o.work_dir = (dir / "file" / "run").string();
  o.profile_path = (dir / "profile.json").string();
  std::ostringstream out, err;
  EXPECT_EQ(run_driver(o, out, err), 1);
  EXPECT_NE(err.str().find("Not a directory"), std::string::npos) << err.str();
  EXPECT_TRUE(std::filesystem::exists(o.profile_path));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace megascale::robust
