// engine/crc32.h: CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the
// checksum of zlib, PNG and gzip, used by the dataset format (engine/dataset.h)
// and the checkpoint shards (engine/checkpoint.h) to detect corrupt files.
//
// crc32("123456789") == 0xCBF43926 (the standard check value). Incremental use:
//   uint32_t c = crc32_update(0, a, na); c = crc32_update(c, b, nb);
// equals crc32 of the concatenation.
//
// Thread-safety: pure functions; the lookup table is built once, thread-safely.
#pragma once

#include <cstddef>
#include <cstdint>

namespace megascale::engine {

// CRC of `size` bytes at `data`, continuing from `crc` (0 to start).
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32(const void* data, size_t size) { return crc32_update(0, data, size); }

}  // namespace megascale::engine
