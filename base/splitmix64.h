// base/splitmix64.h: splitmix64 (Steele, Lea, Flood 2014; Vigna's reference
// constants), the project's one stateless hash and small deterministic random
// generator, the same on every platform (std:: distributions are not).
//
// defines: splitmix64_mix (the finaliser), splitmix64 (one step from a value),
//          SplitMix64 (a generator: next(), uniform()).
//
// base/ is header-only and below every layer: model/, network/, sim/, engine/
// and reliability/ may all include it without depending on each other.
//
// Thread-safety: pure functions; a SplitMix64 is used by one thread.
#pragma once

#include <cstdint>

namespace megascale::base {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The output mix of splitmix64: a bijective avalanche of 64 bits.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One splitmix64 step from `x`: mix(x + gamma). A good stateless hash of x.
constexpr uint64_t splitmix64(uint64_t x) { return splitmix64_mix(x + kSplitMix64Gamma); }

// The generator: state advances by gamma, each output is the mix of the state.
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t next() { return splitmix64_mix(state_ += kSplitMix64Gamma); }
  // Uniform in (0, 1) from 53 random bits.
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace megascale::base
