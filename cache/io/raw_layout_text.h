// A line-oriented text form of a RawLayout, for the prescient-rawread tool,
// the cross-checks against h5py and debugging dumps. One "key values..."
// record per line, '#' starts a comment line:
//
//   prescient-raw-layout 1
//   kind chunked                 # or: contiguous
//   path /data/train.h5          # the rest of the line
//   # contiguous only:
//   data_offset 2048
//   row_bytes 65536
//   num_rows 20000
//   # chunked only:
//   shape 20000 128 128
//   chunk_shape 32 128 128
//   element_size 4
//   fill 0000803f                # optional, element_size bytes in hex
//   filter 2 4                   # id then client data, in pipeline order
//   filter 1 1
//   chunk 0 0 0 4016 1530211 0   # element offset (rank values), file offset, size, mask
#ifndef PRESCIENT_CACHE_IO_RAW_LAYOUT_TEXT_H_
#define PRESCIENT_CACHE_IO_RAW_LAYOUT_TEXT_H_

#include <string>
#include <string_view>

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

// InvalidArgument naming the line for anything malformed.
Result<RawLayout> ParseRawLayoutText(std::string_view text);
std::string FormatRawLayoutText(const RawLayout& layout);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_RAW_LAYOUT_TEXT_H_
