// Why a dataset read went to the connector underneath instead of the node
// cache: one reason per forwarded read, decided where the read is turned away
// (the read callback, InspectRead, CacheClient::TryServe) and counted by the
// statistics ("forwarded": {...}, whose counts add up to reads_forwarded).
// A user who sees few reads served learns from it what to change: a memory
// type (`astype`), a selection (a boolean mask), a setting
// (PRESCIENT_MIN_DATASET_BYTES), or nothing, because the data cannot be
// cached (variable-length strings).
#ifndef PRESCIENT_VOL_READ_FORWARD_REASON_H_
#define PRESCIENT_VOL_READ_FORWARD_REASON_H_

#include <cstdint>

namespace prescient::vol {

enum class ForwardReason : std::uint8_t {
  kNone,          // not forwarded (served), or not decided yet
  kCacheOff,      // PRESCIENT_CACHE=0: reads are not inspected
  kTooSmall,      // a dataset below PRESCIENT_MIN_DATASET_BYTES, not inspected
  kUndecoded,     // the file selection could not be interpreted
  kTransfer,      // the transfer property list (transfer_properties.h)
  kDataset,       // not cacheable: variable-length data, a virtual dataset or external
                  // storage, a file opened for writing or not a regular file, no node cache
  kSelection,     // neither whole rows nor the same part of each row: points (a boolean mask),
                  // a scalar, an empty selection
  kType,          // the memory type is not the stored type: HDF5 converts
  kMemory,        // the memory side is not one contiguous run in selection order
  kWritten,       // the dataset was written or resized through this process
  kFileChanged,   // its file changed on disk since it was opened
  kLarge,         // more rows than the share of the cache one read may take
  kNarrow,        // a part under half of each row that the cache holds too little of
  kSmallRowPart,  // a part of rows small enough to share a cache entry (not cut from entries)
  kAsync,         // an asynchronous read (H5Dread_async): the request is the connector
                  // underneath's
  kFailed,        // serving failed (fallback_serve_failed)
  kCount,
};

// The statistics' name of a reason ("type", "too_small", ...).
constexpr const char* ForwardReasonName(ForwardReason reason) {
  switch (reason) {
    case ForwardReason::kNone:
      return "none";
    case ForwardReason::kCacheOff:
      return "cache_off";
    case ForwardReason::kTooSmall:
      return "too_small";
    case ForwardReason::kUndecoded:
      return "undecoded";
    case ForwardReason::kTransfer:
      return "transfer";
    case ForwardReason::kDataset:
      return "dataset";
    case ForwardReason::kSelection:
      return "selection";
    case ForwardReason::kType:
      return "type";
    case ForwardReason::kMemory:
      return "memory";
    case ForwardReason::kWritten:
      return "written";
    case ForwardReason::kFileChanged:
      return "file_changed";
    case ForwardReason::kLarge:
      return "large";
    case ForwardReason::kNarrow:
      return "narrow";
    case ForwardReason::kSmallRowPart:
      return "small_row_part";
    case ForwardReason::kAsync:
      return "async";
    case ForwardReason::kFailed:
      return "failed";
    case ForwardReason::kCount:
      break;
  }
  return "?";
}

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_READ_FORWARD_REASON_H_
