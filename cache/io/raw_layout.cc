#include "cache/io/raw_layout.h"

#include <limits>
#include <string>

namespace prescient::cache::io {
namespace {

constexpr std::uint64_t kMaxGridChunks = std::uint64_t{1} << 28;

// a * b, or nullopt on overflow.
std::optional<std::uint64_t> CheckedMul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::string DimsToString(const std::vector<std::uint64_t>& dims) {
  std::string out = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ",";
    out += std::to_string(dims[i]);
  }
  return out + ")";
}

}  // namespace

Status ContiguousLayout::Validate() const {
  if (row_bytes == 0) return Status::InvalidArgument("contiguous layout: row_bytes is 0");
  const auto bytes = CheckedMul(row_bytes, num_rows);
  if (!bytes || *bytes > std::numeric_limits<std::uint64_t>::max() - data_offset) {
    return Status::InvalidArgument("contiguous layout: data_offset + size overflows");
  }
  return Status();
}

Result<ChunkedLayout> ChunkedLayout::Make(std::string path, std::vector<std::uint64_t> shape,
                                          std::vector<std::uint64_t> chunk_shape,
                                          std::uint64_t element_size, std::vector<Filter> filters,
                                          std::vector<std::byte> fill_value) {
  if (shape.empty() || shape.size() != chunk_shape.size()) {
    return Status::InvalidArgument("chunked layout: shape " + DimsToString(shape) +
                                   " and chunk shape " + DimsToString(chunk_shape) +
                                   " must have the same rank >= 1");
  }
  if (element_size == 0) return Status::InvalidArgument("chunked layout: element_size is 0");
  if (!fill_value.empty() && fill_value.size() != element_size) {
    return Status::InvalidArgument("chunked layout: fill value has " +
                                   std::to_string(fill_value.size()) + " bytes, element size is " +
                                   std::to_string(element_size));
  }
  ChunkedLayout layout;
  layout.grid_shape_.resize(shape.size());
  std::uint64_t grid_chunks = 1;
  std::optional<std::uint64_t> chunk_bytes = element_size;
  std::optional<std::uint64_t> row_bytes = element_size;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (chunk_shape[d] == 0) return Status::InvalidArgument("chunked layout: a chunk dim is 0");
    layout.grid_shape_[d] = shape[d] / chunk_shape[d] + (shape[d] % chunk_shape[d] != 0);
    const auto grid = CheckedMul(grid_chunks, layout.grid_shape_[d]);
    if (chunk_bytes) chunk_bytes = CheckedMul(*chunk_bytes, chunk_shape[d]);
    if (d > 0 && row_bytes) row_bytes = CheckedMul(*row_bytes, shape[d]);
    if (!grid || *grid > kMaxGridChunks || !chunk_bytes || !row_bytes) {
      return Status::InvalidArgument("chunked layout: shape " + DimsToString(shape) +
                                     " with chunks " + DimsToString(chunk_shape) +
                                     " is too large for a dense chunk index");
    }
    grid_chunks = *grid;
  }
  layout.path_ = std::move(path);
  layout.shape_ = std::move(shape);
  layout.chunk_shape_ = std::move(chunk_shape);
  layout.element_size_ = element_size;
  layout.filters_ = std::move(filters);
  layout.fill_value_ = std::move(fill_value);
  layout.row_bytes_ = *row_bytes;
  layout.chunk_bytes_ = *chunk_bytes;
  layout.chunks_per_slab_ = layout.grid_shape_[0] == 0 ? 0 : grid_chunks / layout.grid_shape_[0];
  layout.chunks_.resize(grid_chunks);
  return layout;
}

Status ChunkedLayout::SetChunk(std::span<const std::uint64_t> element_offset,
                               ChunkLocation location) {
  if (element_offset.size() != rank()) {
    return Status::InvalidArgument("chunk offset has rank " +
                                   std::to_string(element_offset.size()) + ", dataset has rank " +
                                   std::to_string(rank()));
  }
  std::uint64_t linear = 0;
  for (std::size_t d = 0; d < rank(); ++d) {
    const std::uint64_t offset = element_offset[d];
    if (offset % chunk_shape_[d] != 0 || offset / chunk_shape_[d] >= grid_shape_[d]) {
      return Status::InvalidArgument("chunk offset " + std::to_string(offset) + " in dim " +
                                     std::to_string(d) + " is not a chunk boundary inside " +
                                     DimsToString(shape_));
    }
    linear = linear * grid_shape_[d] + offset / chunk_shape_[d];
  }
  if (location.stored_size == 0) {
    return Status::InvalidArgument("chunk " + std::to_string(linear) + " has stored size 0");
  }
  chunks_[linear] = location;
  return Status();
}

std::vector<std::uint64_t> ChunkedLayout::GridCoords(std::uint64_t linear_index) const {
  std::vector<std::uint64_t> coords(rank());
  for (std::size_t d = rank(); d-- > 0;) {
    coords[d] = linear_index % grid_shape_[d];
    linear_index /= grid_shape_[d];
  }
  return coords;
}

std::uint64_t ChunkedLayout::allocated_chunks() const {
  std::uint64_t count = 0;
  for (const auto& chunk : chunks_) count += chunk.has_value();
  return count;
}

std::uint64_t NumRows(const RawLayout& layout) {
  if (const auto* contiguous = std::get_if<ContiguousLayout>(&layout)) return contiguous->num_rows;
  return std::get<ChunkedLayout>(layout).num_rows();
}

const std::string& PathOf(const RawLayout& layout) {
  if (const auto* contiguous = std::get_if<ContiguousLayout>(&layout)) return contiguous->path;
  return std::get<ChunkedLayout>(layout).path();
}

std::uint64_t RowBytes(const RawLayout& layout) {
  if (const auto* contiguous = std::get_if<ContiguousLayout>(&layout)) return contiguous->row_bytes;
  return std::get<ChunkedLayout>(layout).row_bytes();
}

}  // namespace prescient::cache::io
