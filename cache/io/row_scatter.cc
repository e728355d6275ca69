#include "cache/io/row_scatter.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace prescient::cache::io {
namespace {

// The copy geometry shared by every row of one chunk: the chunk's hyperslab
// over dims 1..n-1, walked as runs that are contiguous in both the chunk and
// the row.
struct Geometry {
  std::size_t outer_dims = 0;             // dims 1..outer_dims are walked one index at a time
  std::vector<std::uint64_t> extent;      // per dim: elements inside the dataset
  std::vector<std::uint64_t> src_stride;  // per dim: element stride inside the chunk
  std::vector<std::uint64_t> dst_stride;  // per dim: element stride inside a row
  std::uint64_t src_base = 0;            // chunk element of the hyperslab's origin (dim 0 excluded)
  std::uint64_t dst_base = 0;            // row element where it goes
  std::uint64_t run_elements = 0;        // contiguous elements per run
  std::uint64_t chunk_row_elements = 0;  // elements of one dim-0 index inside the chunk
};

Geometry MakeGeometry(const ChunkedLayout& layout, std::span<const std::uint64_t> coords) {
  const std::size_t rank = layout.rank();
  const auto& shape = layout.shape();
  const auto& chunk = layout.chunk_shape();
  Geometry g;
  g.extent.assign(rank, 1);
  g.src_stride.assign(rank, 1);
  g.dst_stride.assign(rank, 1);
  for (std::size_t d = rank; d-- > 1;) {
    const std::uint64_t start = coords[d] * chunk[d];
    g.extent[d] = std::min(chunk[d], shape[d] - start);
    if (d + 1 < rank) {
      g.src_stride[d] = g.src_stride[d + 1] * chunk[d + 1];
      g.dst_stride[d] = g.dst_stride[d + 1] * shape[d + 1];
    }
    g.dst_base += start * g.dst_stride[d];
  }
  g.chunk_row_elements = rank > 1 ? g.src_stride[1] * chunk[1] : 1;
  // Fold trailing dims the chunk covers completely into one contiguous run.
  std::size_t innermost = rank - 1;
  g.run_elements = rank > 1 ? g.extent[rank - 1] : 1;
  while (innermost > 1 && g.extent[innermost] == chunk[innermost] &&
         chunk[innermost] == shape[innermost]) {
    --innermost;
    g.run_elements *= g.extent[innermost];
  }
  g.outer_dims = rank > 1 ? innermost - 1 : 0;  // dims 1..innermost-1 are walked
  return g;
}

// Calls copy(src_element, dst_element) for every run of the hyperslab.
template <typename Fn>
void ForEachRun(const Geometry& g, Fn&& copy) {
  std::vector<std::uint64_t> index(g.outer_dims + 1, 0);  // index[d] for dims 1..outer_dims
  while (true) {
    std::uint64_t src = 0;
    std::uint64_t dst = g.dst_base;
    for (std::size_t d = 1; d <= g.outer_dims; ++d) {
      src += index[d] * g.src_stride[d];
      dst += index[d] * g.dst_stride[d];
    }
    copy(src, dst);
    std::size_t d = g.outer_dims;
    while (d >= 1 && ++index[d] == g.extent[d]) index[d--] = 0;
    if (d == 0) return;
  }
}

// REQUIRES: !fill.empty() (zero fill is a memset).
void FillElements(std::byte* dst, std::uint64_t elements, std::span<const std::byte> fill) {
  for (std::uint64_t i = 0; i < elements; ++i) {
    std::memcpy(dst + i * fill.size(), fill.data(), fill.size());
  }
}

}  // namespace

void ScatterChunkToRows(const ChunkedLayout& layout, std::uint64_t chunk_index,
                        std::span<const std::byte> chunk, std::span<const std::uint64_t> rows,
                        std::span<std::byte* const> row_buffers) {
  const std::vector<std::uint64_t> coords = layout.GridCoords(chunk_index);
  const Geometry g = MakeGeometry(layout, coords);
  const std::uint64_t es = layout.element_size();
  const std::uint64_t first_row = coords[0] * layout.chunk_shape()[0];
  const std::span<const std::byte> fill = layout.fill_value();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::byte* row = row_buffers[i];
    if (row == nullptr) continue;
    const std::uint64_t src_row = (rows[i] - first_row) * g.chunk_row_elements;
    ForEachRun(g, [&](std::uint64_t src, std::uint64_t dst) {
      if (chunk.empty()) {
        if (fill.empty()) {
          std::memset(row + dst * es, 0, g.run_elements * es);
        } else {
          FillElements(row + dst * es, g.run_elements, fill);
        }
      } else {
        std::memcpy(row + dst * es, chunk.data() + (src_row + src) * es, g.run_elements * es);
      }
    });
  }
}

}  // namespace prescient::cache::io
