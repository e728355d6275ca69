// Raw layouts: where the rows of one HDF5 dataset live in its file, in the form
// the VOL connector extracts them from HDF5 1.14 on the caller's thread
// (H5Dget_offset for contiguous storage; H5Dchunk_iter or H5Dget_chunk_info
// plus the dcpl's filter pipeline for chunked storage). With a raw layout the
// I/O threads can pread and decode rows without ever calling HDF5.
//
// A "row" is one index along dimension 0; its bytes are the C-order elements
// of dimensions 1..n-1, exactly what H5Dread with the stored (native) type
// produces for that row. These are plain value types, safe to share read-only
// between threads.
//
// Not representable here (the VOL must load these through HDF5): compact and
// virtual layouts, external storage, contiguous datasets never written (no
// address), filters other than deflate, shuffle and bitshuffle (none or LZ4),
// and any type conversion.
// (A virtual dataset whose rows are runs of contiguous sources reads as a
// ContiguousLayout at offset 0 of those runs spliced; one over sources
// chunked alike, as a ChunkedLayout over the source files spliced whole:
// spliced_source.h.)
#ifndef PRESCIENT_CACHE_IO_RAW_LAYOUT_H_
#define PRESCIENT_CACHE_IO_RAW_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "cache/io/status.h"

namespace prescient::cache::io {

// HDF5 filter ids (H5Zpublic.h). Repeated here because cache/ must not include HDF5.
inline constexpr int kFilterDeflate = 1;  // client data: {level}
inline constexpr int kFilterShuffle = 2;  // client data: {element size}

// One stage of a chunked dataset's filter pipeline, as H5Pget_filter2 reports
// it. Which pipelines can be undone without HDF5: filter_codecs.h.
struct Filter {
  int id = 0;
  std::vector<std::uint32_t> client_data{};
};

struct ContiguousLayout {
  std::string path{};             // informational: the loader reads through a RandomAccessSource
  std::uint64_t data_offset = 0;  // H5Dget_offset: file address of row 0
  std::uint64_t row_bytes = 0;    // element size x product of dims 1..n-1
  std::uint64_t num_rows = 0;     // dims[0]

  Status Validate() const;
  std::uint64_t RowOffset(std::uint64_t row) const { return data_offset + row * row_bytes; }
};

// Where one allocated chunk is stored (H5Dget_chunk_info / H5Dchunk_iter).
struct ChunkLocation {
  std::uint64_t file_offset = 0;
  std::uint64_t stored_size = 0;  // bytes on disk, after filtering
  std::uint32_t filter_mask = 0;  // bit i set: pipeline stage i was skipped for this chunk
};

// A chunked dataset. The chunk index is dense over the chunk grid in C order;
// chunks never written are absent and read as the fill value. Edge chunks
// are stored full size; the part beyond the dataset's extent is discarded.
class ChunkedLayout {
 public:
  // REQUIRES (else InvalidArgument): 1 <= rank == chunk rank, every chunk dim
  // >= 1, element_size >= 1, fill_value empty (zero fill) or element_size bytes,
  // and a chunk grid of at most 2^28 chunks.
  static Result<ChunkedLayout> Make(std::string path, std::vector<std::uint64_t> shape,
                                    std::vector<std::uint64_t> chunk_shape,
                                    std::uint64_t element_size, std::vector<Filter> filters,
                                    std::vector<std::byte> fill_value = {});

  // Records an allocated chunk by its logical offset in elements (the
  // chunk_offset HDF5 reports: a multiple of the chunk shape in every dim).
  Status SetChunk(std::span<const std::uint64_t> element_offset, ChunkLocation location);

  const std::string& path() const { return path_; }
  std::size_t rank() const { return shape_.size(); }
  const std::vector<std::uint64_t>& shape() const { return shape_; }
  const std::vector<std::uint64_t>& chunk_shape() const { return chunk_shape_; }
  const std::vector<std::uint64_t>& grid_shape() const { return grid_shape_; }
  std::uint64_t element_size() const { return element_size_; }
  const std::vector<Filter>& filters() const { return filters_; }
  const std::vector<std::byte>& fill_value() const { return fill_value_; }

  std::uint64_t num_rows() const { return shape_[0]; }
  std::uint64_t row_bytes() const { return row_bytes_; }
  std::uint64_t chunk_bytes() const { return chunk_bytes_; }  // decoded size of every chunk
  std::uint64_t num_chunks() const { return chunks_.size(); }
  // Chunks per "slab": all chunks sharing one dim-0 grid coordinate. A row
  // needs every chunk of its slab; slab s owns linear chunk indices
  // [s * chunks_per_slab(), (s + 1) * chunks_per_slab()).
  std::uint64_t chunks_per_slab() const { return chunks_per_slab_; }
  std::uint64_t SlabOfRow(std::uint64_t row) const { return row / chunk_shape_[0]; }

  // The chunk at a linear (C-order) grid index; nullopt when never written.
  const std::optional<ChunkLocation>& chunk(std::uint64_t linear_index) const {
    return chunks_[linear_index];
  }
  // Grid coordinates of a linear chunk index.
  std::vector<std::uint64_t> GridCoords(std::uint64_t linear_index) const;
  std::uint64_t allocated_chunks() const;

 private:
  ChunkedLayout() = default;

  std::string path_;
  std::vector<std::uint64_t> shape_;
  std::vector<std::uint64_t> chunk_shape_;
  std::vector<std::uint64_t> grid_shape_;
  std::uint64_t element_size_ = 0;
  std::vector<Filter> filters_;
  std::vector<std::byte> fill_value_;
  std::uint64_t row_bytes_ = 0;
  std::uint64_t chunk_bytes_ = 0;
  std::uint64_t chunks_per_slab_ = 0;
  std::vector<std::optional<ChunkLocation>> chunks_;
};

using RawLayout = std::variant<ContiguousLayout, ChunkedLayout>;

std::uint64_t NumRows(const RawLayout& layout);
const std::string& PathOf(const RawLayout& layout);
std::uint64_t RowBytes(const RawLayout& layout);

}  // namespace prescient::cache::io

#endif  // PRESCIENT_CACHE_IO_RAW_LAYOUT_H_
