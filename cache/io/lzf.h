// Undoes LZF, h5py's own compression filter (HDF5 filter 32000,
// `compression="lzf"`), without HDF5. h5py registers the filter in every
// process that imports it, so it is the compression most h5py-written data
// uses after gzip.
//
// The format (liblzf's, as h5py's filter stores a chunk: the stream alone, no
// header; the chunk's decoded size is the dataset's chunk size). A stream is a
// sequence of items, each led by a control byte c:
//   c < 32:  a literal run: the next c + 1 bytes are copied to the output;
//   c >= 32: a back reference: length L = c >> 5 (when L is 7, the next byte
//            is added to it), then distance D = ((c & 31) << 8) + next byte;
//            L + 2 bytes are copied from D + 1 bytes before the output's end,
//            one at a time (the copy may overlap what it writes: a run).
//
// Thread-safe: no state.
#ifndef PRESCIENT_CACHE_IO_LZF_H_
#define PRESCIENT_CACHE_IO_LZF_H_

#include <cstddef>
#include <span>

#include "cache/io/status.h"

namespace prescient::cache::io {

inline constexpr int kFilterLzf = 32000;

// Decodes the LZF stream `in` into exactly out.size() bytes. Corruption when
// the stream is damaged (a run past either end, a reference before the start)
// or decodes to another size.
Status LzfDecompress(std::span<const std::byte> in, std::span<std::byte> out);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_LZF_H_
