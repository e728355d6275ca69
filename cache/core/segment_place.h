// Where a node's cache files live, opened once per Open: the directory (held
// open; files are reached relative to it) and their base name.
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_

#include <string>
#include <vector>

#include "cache/base/status.h"
#include "cache/core/cache_options.h"
#include "cache/core/segment_file.h"

namespace prescient::cache::detail {

// Opens the directory of `options` for the node's files. Things a user should
// hear about once are appended to `notices`.
Result<SegmentPlace> OpenSegmentPlace(const CacheOptions& options,
                                      std::vector<std::string>* notices);

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_PLACE_H_
