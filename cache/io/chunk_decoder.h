// Undoes a chunk's filter pipeline without HDF5: each stage by its entry in
// filter_codecs.h (deflate and shuffle are defined here).
//
// HDF5 applies a pipeline's filters in order when writing (stage 0 first) and
// undoes them in reverse when reading; bit i of a chunk's filter mask says
// stage i was skipped for that chunk (deflate is an optional filter: HDF5
// stores a chunk raw when compressing it fails). Deflate is a zlib stream
// (compress2 format: header + adler32); shuffle stores byte 0 of every
// element, then byte 1 of every element, and so on.
//
// Thread-safe: no shared state; each call uses the caller's buffers (and, with
// libdeflate, a decompressor private to the calling thread).
#ifndef PRESCIENT_CACHE_IO_CHUNK_DECODER_H_
#define PRESCIENT_CACHE_IO_CHUNK_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"

namespace prescient::cache::io {

// Scratch space for DecodeChunk; reuse it across chunks to avoid reallocation.
struct DecodeBuffers {
  std::vector<std::byte> a;
  std::vector<std::byte> b;
};

// Decodes `stored` (one chunk's bytes on disk) into the chunk's `chunk_bytes`
// C-order bytes. The result views either `stored` itself (no stage applies)
// or one of `buffers`, and stays valid until `buffers` is next used.
// Corruption (with the codec's message) when a stage is damaged or the
// decoded size is not chunk_bytes; Unsupported for a pipeline that
// CheckRawDecodable refuses.
Result<std::span<const std::byte>> DecodeChunk(std::span<const std::byte> stored,
                                               std::span<const Filter> pipeline,
                                               std::uint32_t filter_mask,
                                               std::uint64_t element_size,
                                               std::uint64_t chunk_bytes, DecodeBuffers& buffers);

// Inflates a whole zlib stream into exactly out.size() bytes (libdeflate when
// built with it, else zlib; errors are always diagnosed by zlib).
Status Inflate(std::span<const std::byte> in, std::span<std::byte> out);

// Inverse of HDF5's shuffle: in and out have the same size and must not
// overlap. Trailing bytes that do not fill an element are copied as they are
// (HDF5 leaves them unshuffled).
void Unshuffle(std::span<const std::byte> in, std::size_t element_size, std::span<std::byte> out);

// The forward shuffle, for tests and tools that build HDF5-compatible chunks.
void Shuffle(std::span<const std::byte> in, std::size_t element_size, std::span<std::byte> out);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_CHUNK_DECODER_H_
