#include "vol/serve/chunked_layout_hdf5.h"

#include <algorithm>
#include <array>
#include <exception>
#include <string>
#include <vector>

#include "cache/io/filter_codecs.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

io::Result<std::vector<io::Filter>> Filters(hid_t dcpl) {
  std::vector<io::Filter> filters;
  const int n = H5Pget_nfilters(dcpl);
  if (n < 0) return io::Status::Unsupported("cannot read the filter pipeline");
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, config = 0;
    std::size_t count = 8;
    std::vector<unsigned> values(count);
    char name[64];
    const H5Z_filter_t id = H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &count,
                                           values.data(), sizeof(name), name, &config);
    if (id < 0) return io::Status::Unsupported("cannot read filter " + std::to_string(i));
    if (count > values.size()) {  // more client data than the first guess: ask again
      values.resize(count);
      H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &count, values.data(), sizeof(name),
                     name, &config);
    }
    values.resize(count);
    filters.push_back(io::Filter{static_cast<int>(id), {values.begin(), values.end()}});
  }
  return filters;
}

struct ChunkVisit {
  io::ChunkedLayout* layout;
  std::size_t rank;
  io::Status status;
};

// Called by HDF5 from C for every chunk: must not throw. It allocates nothing
// (the offset goes into a fixed array) and turns anything thrown below it
// into a failed visit.
int VisitChunk(const hsize_t* offset, unsigned filter_mask, haddr_t address, hsize_t size,
               void* data) noexcept {
  auto* visit = static_cast<ChunkVisit*>(data);
  try {
    std::array<std::uint64_t, H5S_MAX_RANK> element_offset{};
    if (visit->rank > element_offset.size()) {
      visit->status = io::Status::Unsupported("chunk rank above H5S_MAX_RANK");
      return H5_ITER_ERROR;
    }
    std::copy(offset, offset + visit->rank, element_offset.begin());
    visit->status = visit->layout->SetChunk(std::span(element_offset.data(), visit->rank),
                                            io::ChunkLocation{address, size, filter_mask});
  } catch (const std::exception& e) {
    visit->status = io::Status::Internal(std::string("chunk index: ") + e.what());
  } catch (...) {
    visit->status = io::Status::Internal("chunk index: unknown exception");
  }
  return visit->status.ok() ? H5_ITER_CONT : H5_ITER_ERROR;
}

}  // namespace

bool UnwrittenDataReadsAsNothing(hid_t dcpl) {
  H5D_fill_time_t time = H5D_FILL_TIME_IFSET;
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  return H5Pget_fill_time(dcpl, &time) < 0 || time == H5D_FILL_TIME_NEVER ||
         H5Pfill_value_defined(dcpl, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED;
}

io::Result<io::ChunkedLayout> ReadChunkedLayout(const DatasetQueries& dataset, hid_t dcpl,
                                                std::string path, std::span<const hsize_t> dims,
                                                hid_t type) {
  const std::size_t rank = dims.size();
  const std::size_t type_size = type < 0 ? 0 : H5Tget_size(type);
  if (type_size == 0) return io::Status::Unsupported("cannot read the type's size");
  std::vector<hsize_t> chunk(rank);
  if (rank == 0 ||
      H5Pget_chunk(dcpl, static_cast<int>(rank), chunk.data()) != static_cast<int>(rank)) {
    return io::Status::Unsupported("cannot read the chunk shape");
  }
  io::Result<std::vector<io::Filter>> filters = Filters(dcpl);
  if (!filters.ok()) return filters.status();
  if (io::Status s = io::CheckRawDecodable(filters.value(), type_size); !s.ok()) return s;
  // A filter HDF5 has no plugin for here makes the native read fail: the
  // dataset stays with HDF5 so that the application sees that failure, not
  // bytes it could not have read without the connector.
  for (const io::Filter& filter : filters.value()) {
    if (H5Zfilter_avail(static_cast<H5Z_filter_t>(filter.id)) <= 0) {
      return io::Status::Unsupported("filter " + std::to_string(filter.id) +
                                     " is not available to HDF5 in this process");
    }
  }

  std::vector<std::byte> fill;
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (H5Pfill_value_defined(dcpl, &defined) >= 0 && defined == H5D_FILL_VALUE_USER_DEFINED) {
    fill.resize(type_size);
    if (H5Pget_fill_value(dcpl, type, fill.data()) < 0)
      return io::Status::Unsupported("cannot read the fill value");
  }
  io::Result<io::ChunkedLayout> layout = io::ChunkedLayout::Make(
      std::move(path), {dims.begin(), dims.end()}, {chunk.begin(), chunk.end()}, type_size,
      std::move(filters.value()), std::move(fill));
  if (!layout.ok()) return layout.status();

  ChunkVisit visit{&layout.value(), rank, {}};
  if (dataset.ChunkIter(&VisitChunk, &visit) < 0) {
    return visit.status.ok() ? io::Status::Unsupported("chunk iteration failed") : visit.status;
  }
  // HDF5 reads a chunk never written as the fill value, unless it has none
  // to write (fill time "never", or no fill value at all): then it leaves the
  // reader's buffer as it was, which no row read raw can stand for.
  if (layout.value().allocated_chunks() < layout.value().num_chunks() &&
      UnwrittenDataReadsAsNothing(dcpl)) {
    return io::Status::Unsupported(
        "chunks never written, and no fill value written in their place");
  }
  return layout;
}

}  // namespace prescient::vol
