// cli/check_command.cc: `megascale check DIR|FILE... --golden FILE
// [--tolerance 2%] [--update] [--fidelity event|analytical] [--json]`: a CI gate
// over a team's own scenarios (calibrate/golden.h holds the comparison).
//
// Exit codes: 0 every scenario matches its stored figures (or --update wrote
// them), 1 a regression (or a new / removed scenario), 2 bad input.
#include <algorithm>
#include <filesystem>
#include <map>

#include "calibrate/golden.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "base/text_file.h"
#include "model/scenario.h"
#include "report/estimate_report.h"
#include "report/golden_report.h"

namespace megascale::cli {
namespace {

namespace fs = std::filesystem;

// Default --tolerance: 2% (issue 13's example). The event simulation is
// deterministic for a given build, so any tolerance above zero only absorbs
// intended model changes below it.
constexpr double kDefaultTolerance = 0.02;

// "2%" or "0.02" -> 0.02, in [0, 1).
double tolerance_of(const ParsedArgs& p) {
  if (!p.has("--tolerance")) return kDefaultTolerance;
  std::string text = p.values.at("--tolerance");
  const bool percent = !text.empty() && text.back() == '%';
  if (percent) text.pop_back();
  try {
    size_t used = 0;
    double v = std::stod(text, &used);
    if (used != text.size()) throw std::invalid_argument("");
    if (percent) v /= 100;
    if (!(v >= 0 && v < 1)) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError("--tolerance expects a share such as 2% or 0.02 (0 to under 100%), got '" +
                     p.values.at("--tolerance") + "'");
  }
}

// Every *.toml under each DIR (recursively, sorted), and each FILE as given.
std::vector<std::string> scenario_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(in, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".toml") found.push_back(e.path());
      }
      if (ec) throw std::invalid_argument(in + ": cannot list the directory: " + ec.message());
      if (found.empty()) throw UsageError(in + ": no *.toml scenario in this directory");
      std::sort(found.begin(), found.end());
      for (const fs::path& f : found) files.push_back(f.string());
    } else if (fs::is_regular_file(in, ec)) {
      files.emplace_back(in);
    } else {
      throw UsageError(in + ": no such scenario file or directory");
    }
  }
  return files;
}

}  // namespace

int cmd_check(const Args& args, std::ostream& out, std::ostream& err) {
  const ParsedArgs p = parse_args(args, {"--json", "--update"}, {"--golden", "--tolerance", "--fidelity", "--set"});
  if (p.positional.empty()) throw UsageError("check expects scenario DIRs or FILEs");
  if (!p.has("--golden")) throw UsageError("check needs --golden FILE (create it with --update)");
  if (p.has("--set")) throw UsageError("check compares the scenarios as stored; --set would gate a what-if");
  const std::string golden_path = p.values.at("--golden");
  const double tolerance = tolerance_of(p);
  const fs::path golden_dir = fs::absolute(golden_path).parent_path();

  base::Json golden;
  const bool have_golden = fs::exists(golden_path);
  if (have_golden) {
    try {
      golden = calibrate::read_golden(golden_path);
    } catch (const calibrate::GoldenError& e) {
      throw std::invalid_argument(e.what());
    }
  } else if (!p.on("--update")) {
    throw std::invalid_argument(golden_path + ": no such golden file (record one with --update)");
  }
  std::string fidelity = p.has("--fidelity") ? p.values.at("--fidelity")
                         : have_golden       ? golden["fidelity"].get<std::string>()
                                             : "event";
  if (fidelity != "event" && fidelity != "analytical")
    throw UsageError("--fidelity must be 'analytical' or 'event', got '" + fidelity + "'");
  if (have_golden && !p.on("--update") && golden["fidelity"] != fidelity) {
    throw std::invalid_argument(golden_path + ": recorded at " + golden["fidelity"].get<std::string>() +
                                " fidelity; checking at " + fidelity + " would compare different models");
  }

  const std::map<std::string, base::Json> now = calibrate::scenario_metrics(
      scenario_files(p.positional), golden_dir.string(), fidelity, [&](size_t i, size_t n, const std::string& f) {
        err << "check: " << i + 1 << "/" << n << " " << f << "\n" << std::flush;
      });
  auto exists = [&](const std::string& key) { return fs::exists(golden_dir / key); };

  if (p.on("--update")) {
    const base::Json updated = calibrate::updated_golden(golden, now, fidelity, exists);
    if (!base::write_text_atomically(golden_path, updated.dump(2) + "\n"))
      throw std::invalid_argument(golden_path + ": cannot write the golden file");
    err << "check: stored " << now.size() << " scenario(s) at " << fidelity << " fidelity in " << golden_path
        << " (" << updated["scenarios"].size() << " in all)\n";
    if (p.on("--json")) {
      base::Json j;
      j["updated"] = true;
      j["golden"] = golden_path;
      j["stored"] = now.size();
      out << report::report_json(j) << "\n";
    }
    return 0;
  }

  const calibrate::GateResult r = calibrate::compare_with_golden(golden, golden_path, now, tolerance, exists);
  if (p.on("--json")) {
    out << report::report_json(report::gate_json(r, golden_path, fidelity, tolerance)) << "\n";
  } else {
    out << report::gate_text(r, golden_path, fidelity, tolerance);
  }
  return r.pass() ? 0 : 1;
}

}  // namespace megascale::cli
