// Copies the part of a decoded chunk that belongs to each requested row into
// that row's buffer (or fills it with the fill value for a chunk never
// written). With chunks that split inner dimensions, a row is assembled from
// every chunk of its slab, each contributing a hyperslab; edge chunks
// contribute only the part inside the dataset.
#ifndef PRESCIENT_CACHE_IO_ROW_SCATTER_H_
#define PRESCIENT_CACHE_IO_ROW_SCATTER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/io/raw_layout.h"

namespace prescient::cache::io {

// For each i, writes chunk `chunk_index`'s part of row rows[i] into
// row_buffers[i] (row_bytes() long; nullptr = skip that row). `chunk` holds
// the decoded chunk (chunk_bytes() long), or is empty to write the fill value.
// REQUIRES: every row lies in the chunk's slab.
void ScatterChunkToRows(const ChunkedLayout& layout, std::uint64_t chunk_index,
                        std::span<const std::byte> chunk, std::span<const std::uint64_t> rows,
                        std::span<std::byte* const> row_buffers);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_ROW_SCATTER_H_
