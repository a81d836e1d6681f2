// base/sanitizer.h: whether this build runs under AddressSanitizer
// (cmake/Sanitize.cmake, -DMEGASCALE_SANITIZE=ON).
//
// defines: kAddressSanitizer
//
// Code that switches stacks behind the sanitizer's back asks for a mode it can
// follow: SimGrid's default contexts (raw stack switching) make ASan warn
// "False positive error reports may follow" (google/sanitizers#189), so the
// engines of network/simgrid_check.cc and sim/event_engine.cc run their actors
// as threads (--cfg=contexts/factory:thread) in an ASan build. Same simulated
// results, slower context switches; a normal build is unchanged.
//
// Thread-safety: a constant.
#pragma once

namespace megascale::base {

#if defined(__SANITIZE_ADDRESS__)  // GCC
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace megascale::base
