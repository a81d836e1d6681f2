// model/sensitivity.cc: see sensitivity.h.
#include "model/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "model/profile.h"

namespace megascale::model {
namespace {

// Profile values that are formats or capacities, not speeds (sensitivity.h);
// nic_gbps is the default the scenario's hardware.nic_gbps replaces.
constexpr std::string_view kNotSpeeds[] = {"memory_bytes", "activation_bytes", "param_gather_bytes", "cache_bytes",
                                           "nic_gbps"};

bool is_efficiency(std::string_view key) {
  constexpr std::string_view kSuffix = "_efficiency";
  return key.size() >= kSuffix.size() && key.substr(key.size() - kSuffix.size()) == kSuffix;
}

// The value an input is timed at: up by `step`, or down for a fraction that
// would pass 1.
double changed(std::string_view key, double value, double step) {
  const double up = value * (1 + step);
  return is_efficiency(key) && up > 1 ? value * (1 - step) : up;
}

}  // namespace

Sensitivity sensitivity(const Scenario& s, double step, const std::function<double(const Scenario&)>& iteration_s) {
  if (!std::isfinite(step) || step <= 0 || step > kMaxSensitivityStep) {
    throw std::invalid_argument(
        fmt::format("sensitivity: the step is a relative change in (0, {:g}], got {:g}", kMaxSensitivityStep, step));
  }
  Sensitivity out;
  out.step = step;
  out.base_iteration_s = iteration_s(s);
  if (!std::isfinite(out.base_iteration_s) || out.base_iteration_s <= 0) {
    throw std::invalid_argument(fmt::format("sensitivity: the job's iteration time is {:g} s, not a positive time",
                                            out.base_iteration_s));
  }

  // Times the input at `first` (the step up, or down for an efficiency near 1);
  // where the scenario refuses that value (a faster NIC than its switch port
  // takes), at the step the other way; where it refuses both, the input is
  // listed as refused with the reason.
  auto timed = [&](const std::string& input, double value, double first, const std::string& source,
                   const std::function<Scenario(double)>& with) {
    InputSensitivity r;
    r.input = input;
    r.value = value;
    r.source = source;
    const double second = first > value ? value * (1 - step) : value * (1 + step);
    std::string why;
    for (double x : {first, second}) {
      try {
        r.iteration_s = iteration_s(with(x));
        if (!std::isfinite(r.iteration_s) || r.iteration_s <= 0)
          throw std::invalid_argument(fmt::format("iteration time {:g} s", r.iteration_s));
        r.changed_value = x;
        r.change = r.iteration_s / out.base_iteration_s - 1;
        r.elasticity = std::log(r.iteration_s / out.base_iteration_s) / std::log(x / value);
        out.inputs.push_back(r);
        return;
      } catch (const std::exception& e) {
        if (why.empty()) why = e.what();
      }
    }
    out.refused.push_back({input, why});
  };

  const GpuProfile& profile = hardware_profile(s);
  for (const auto& [key, prov] : profile.provenance)
    if (key.rfind("tables.", 0) == 0) out.measured_tables.push_back(key.substr(7));
  for (const ProfileNumber& n : profile_numbers()) {
    if (std::find(std::begin(kNotSpeeds), std::end(kNotSpeeds), n.key) != std::end(kNotSpeeds)) continue;
    const std::string key(n.key);
    const double value = profile.*n.member;
    if (value == 0) {
      out.at_zero.push_back(key);
      continue;
    }
    const auto p = profile.provenance.find(key);
    timed(key, value, changed(n.key, value, step), p == profile.provenance.end() ? "unknown" : p->second.source,
          [&](double x) {
            auto copy = std::make_shared<GpuProfile>(profile);
            (*copy).*n.member = x;
            Scenario v = s;
            v.hardware.loaded_profile = copy;
            return v;
          });
  }
  // The scenario's own hardware inputs.
  struct HardwareNumber {
    const char* input;
    double HardwareConfig::*member;
  };
  for (const HardwareNumber& h : {HardwareNumber{"hardware.nic_gbps", &HardwareConfig::nic_gbps},
                                  HardwareNumber{"hardware.gpu_speed_sigma", &HardwareConfig::gpu_speed_sigma}}) {
    const double value = s.hardware.*h.member;
    if (value == 0) {
      out.at_zero.push_back(h.input);
      continue;
    }
    timed(h.input, value, value * (1 + step), "scenario", [&](double x) {
      Scenario v = s;
      v.hardware.*h.member = x;
      return v;
    });
  }
  std::stable_sort(out.inputs.begin(), out.inputs.end(), [](const InputSensitivity& a, const InputSensitivity& b) {
    return std::abs(a.elasticity) > std::abs(b.elasticity);
  });
  return out;
}

}  // namespace megascale::model
