// DatasetKey: the identity of one dataset's bytes, computed by the caller.
//
// vol/ hashes file identity (device, inode, size, mtime), the object token,
// shape and type into 128 bits. The cache treats it as opaque: equal keys mean
// equal bytes. A file rewritten in place gets a new mtime, hence a new key, so
// stale rows are simply never looked up again (and age out of the cache).
#ifndef PRESCIENT_CACHE_CORE_DATASET_KEY_H_
#define PRESCIENT_CACHE_CORE_DATASET_KEY_H_

#include <compare>
#include <cstdint>
#include <limits>

namespace prescient::cache {

struct DatasetKey {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  friend bool operator==(const DatasetKey&, const DatasetKey&) = default;
};

// Index of a registered dataset in the segment's dataset table. Valid for the
// life of the segment and identical in every process attached to it.
using DatasetSlot = std::uint32_t;
inline constexpr DatasetSlot kInvalidDatasetSlot = std::numeric_limits<DatasetSlot>::max();

}  // namespace prescient::cache

#endif  // PRESCIENT_CACHE_CORE_DATASET_KEY_H_
