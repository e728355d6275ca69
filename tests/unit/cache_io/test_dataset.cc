#include "test_dataset.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "cache/io/chunk_decoder.h"

namespace prescient::cache::io::testing {

std::vector<std::byte> Hex(const std::string& hex) {
  std::vector<std::byte> out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<std::byte>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

Status MemorySource::ReadExact(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > bytes_.size() || out.size() > bytes_.size() - offset) {
    return Status::IoError("'" + name_ + "': file ends at " + std::to_string(bytes_.size()));
  }
  std::memcpy(out.data(), bytes_.data() + offset, out.size());
  return Status();
}

std::vector<std::byte> MakeArray(std::uint64_t elements, std::uint64_t element_size) {
  std::vector<std::byte> out(elements * element_size);
  for (std::uint64_t i = 0; i < out.size(); ++i) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    out[i] = static_cast<std::byte>(h & 0xff);
  }
  return out;
}

std::vector<std::byte> Deflate(const std::vector<std::byte>& in, int level) {
  uLongf size = compressBound(static_cast<uLong>(in.size()));
  std::vector<std::byte> out(size);
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(in.data()), static_cast<uLong>(in.size()),
                level) != Z_OK) {
    throw std::runtime_error("compress2 failed");
  }
  out.resize(size);
  return out;
}

TestDataset MakeContiguous(std::uint64_t rows, std::uint64_t row_bytes, std::uint64_t data_offset,
                           ContiguousLayout& layout) {
  TestDataset d;
  d.row_bytes = row_bytes;
  d.array = MakeArray(rows * row_bytes, 1);
  d.file = MakeArray(data_offset, 1);  // some "metadata" before the data
  d.file.insert(d.file.end(), d.array.begin(), d.array.end());
  layout = ContiguousLayout{
      .path = "memory", .data_offset = data_offset, .row_bytes = row_bytes, .num_rows = rows};
  return d;
}

TestDataset MakeChunked(const ChunkedSpec& spec, ChunkedLayout& layout,
                        std::vector<std::byte> fill) {
  const std::size_t rank = spec.shape.size();
  const std::uint64_t es = spec.element_size;
  std::uint64_t elements = 1, chunk_elements = 1;
  for (std::size_t d = 0; d < rank; ++d) {
    elements *= spec.shape[d];
    chunk_elements *= spec.chunk_shape[d];
  }
  TestDataset data;
  data.array = MakeArray(elements, es);
  data.row_bytes = spec.shape[0] == 0 ? 0 : elements * es / spec.shape[0];
  data.fill = fill;
  std::vector<Filter> filters;
  if (spec.shuffle)
    filters.push_back({.id = kFilterShuffle, .client_data = {static_cast<std::uint32_t>(es)}});
  if (spec.deflate) filters.push_back({.id = kFilterDeflate, .client_data = {6}});
  layout = ChunkedLayout::Make("memory", spec.shape, spec.chunk_shape, es, filters, fill).value();

  std::vector<std::uint64_t> order;
  for (std::uint64_t i = 0; i < layout.num_chunks(); ++i) order.push_back(i);
  if (spec.reverse_file_order) std::reverse(order.begin(), order.end());
  data.file = MakeArray(512, 1);  // a "superblock"
  for (const std::uint64_t index : order) {
    const std::vector<std::uint64_t> coords = layout.GridCoords(index);
    // Gather the chunk (full size; elements outside the dataset are junk, as in HDF5).
    std::vector<std::byte> chunk(chunk_elements * es, std::byte{0xEE});
    const bool unallocated = std::find(spec.unallocated.begin(), spec.unallocated.end(), index) !=
                             spec.unallocated.end();
    for (std::uint64_t e = 0; e < chunk_elements; ++e) {
      std::uint64_t rest = e, linear = 0;
      bool inside = true;
      std::vector<std::uint64_t> local(rank);
      for (std::size_t d = rank; d-- > 0;) {
        local[d] = rest % spec.chunk_shape[d];
        rest /= spec.chunk_shape[d];
      }
      for (std::size_t d = 0; d < rank; ++d) {
        const std::uint64_t global = coords[d] * spec.chunk_shape[d] + local[d];
        inside = inside && global < spec.shape[d];
        linear = linear * spec.shape[d] + global;
      }
      if (!inside) continue;
      std::byte* element = data.array.data() + linear * es;
      if (unallocated) {
        for (std::uint64_t b = 0; b < es; ++b) element[b] = fill.empty() ? std::byte{0} : fill[b];
      } else {
        std::memcpy(chunk.data() + e * es, element, es);
      }
    }
    if (unallocated) continue;
    std::vector<std::byte> stored = chunk;
    if (spec.shuffle && !(spec.filter_mask & 1u)) {
      Shuffle(chunk, es, stored);
    }
    const std::uint32_t deflate_bit = spec.shuffle ? 2u : 1u;
    if (spec.deflate && !(spec.filter_mask & deflate_bit)) stored = Deflate(stored);
    data.file.resize(data.file.size() + spec.gap_between_chunks, std::byte{0x55});
    std::vector<std::uint64_t> offset(rank);
    for (std::size_t d = 0; d < rank; ++d) offset[d] = coords[d] * spec.chunk_shape[d];
    const Status status = layout.SetChunk(offset, {.file_offset = data.file.size(),
                                                   .stored_size = stored.size(),
                                                   .filter_mask = spec.filter_mask});
    if (!status.ok()) throw std::runtime_error(status.ToString());
    data.file.insert(data.file.end(), stored.begin(), stored.end());
  }
  return data;
}

}  // namespace prescient::cache::io::testing
