#include "vol/serve/raw_layout_hdf5.h"

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"
#include "vol/serve/virtual_rows.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

io::Result<io::RawLayout> Contiguous(const FileState& file, const DatasetState& state,
                                     haddr_t address) {
  io::ContiguousLayout layout;
  layout.path = file.name;
  layout.data_offset = address;
  layout.row_bytes = state.row_bytes();
  layout.num_rows = state.dims().empty() ? 0 : state.dims()[0];
  if (io::Status s = layout.Validate(); !s.ok()) return s;
  return io::RawLayout(std::move(layout));
}

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

io::Result<io::RawLayout> Chunked(const DatasetQueries& dataset, const FileState& file,
                                  const DatasetState& state, hid_t dcpl) {
  const std::size_t rank = state.dims().size();
  std::vector<hsize_t> chunk(rank);
  if (rank == 0 ||
      H5Pget_chunk(dcpl, static_cast<int>(rank), chunk.data()) != static_cast<int>(rank)) {
    return io::Status::Unsupported("cannot read the chunk shape");
  }
  io::Result<std::vector<io::Filter>> filters = Filters(dcpl);
  if (!filters.ok()) return filters.status();
  if (io::Status s = io::CheckRawDecodable(filters.value(), state.type_size()); !s.ok()) return s;

  std::vector<std::byte> fill;
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (H5Pfill_value_defined(dcpl, &defined) >= 0 && defined == H5D_FILL_VALUE_USER_DEFINED) {
    fill.resize(state.type_size());
    const hid_t type = state.NewStoredTypeId();
    const herr_t got = type < 0 ? -1 : H5Pget_fill_value(dcpl, type, fill.data());
    if (type >= 0) H5Tclose(type);
    if (got < 0) return io::Status::Unsupported("cannot read the fill value");
  }
  io::Result<io::ChunkedLayout> layout = io::ChunkedLayout::Make(
      file.name, {state.dims().begin(), state.dims().end()}, {chunk.begin(), chunk.end()},
      state.type_size(), std::move(filters.value()), std::move(fill));
  if (!layout.ok()) return layout.status();

  ChunkVisit visit{&layout.value(), rank, {}};
  if (dataset.ChunkIter(&VisitChunk, &visit) < 0) {
    return visit.status.ok() ? io::Status::Unsupported("chunk iteration failed") : visit.status;
  }
  return io::RawLayout(std::move(layout.value()));
}

// Whether rows can be read raw: why not, or "" when they can.
const char* NotRawReadable(const DatasetQueries& dataset, const FileState* file) {
  if (file == nullptr || !file->posix_driver || !file->identity.valid) {
    return "file not opened with the POSIX driver";
  }
  if (!dataset.Native()) return "the connector underneath is not the native one";
  return "";
}

// The layout from the creation property list (the data's address was not
// enough: chunked, compact, virtual, external or unallocated).
io::Result<io::RawLayout> FromCreationPlist(const DatasetQueries& dataset, hid_t dcpl,
                                            const FileState& file, const DatasetState& state) {
  if (dcpl < 0) return io::Status::Unsupported("cannot read the creation property list");
  if (H5Pget_external_count(dcpl) > 0) return io::Status::Unsupported("external storage");
  switch (H5Pget_layout(dcpl)) {
    case H5D_CONTIGUOUS:
      return io::Status::Unsupported("contiguous data not allocated");
    case H5D_CHUNKED:
      return Chunked(dataset, file, state, dcpl);
    default:
      return io::Status::Unsupported("compact or virtual layout");
  }
}

std::uint64_t ChunkRows(hid_t dcpl) {
  if (dcpl < 0 || H5Pget_layout(dcpl) != H5D_CHUNKED) return 0;
  hsize_t chunk[H5S_MAX_RANK];
  if (H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk) < 1) return 0;
  return chunk[0];
}

StoredRows Stored(std::uint64_t chunk_rows, io::Result<io::RawLayout> layout) {
  StoredRows stored{.chunk_rows = chunk_rows,
                    .layout = std::move(layout),
                    .bytes_elsewhere = false,
                    .elsewhere_reason = {},
                    .sources = nullptr,
                    .source = nullptr};
  return stored;
}

// Never cached: `why` goes to the log.
StoredRows Elsewhere(std::string why) {
  StoredRows stored = Stored(0, io::Status::Unsupported("not cached: " + why));
  stored.bytes_elsewhere = true;
  stored.elsewhere_reason = std::move(why);
  return stored;
}

// A virtual dataset is cached only under a key that includes its source
// files' identities (virtual_sources.h); its rows are read raw from the
// sources where its mappings allow (virtual_rows.h), else through HDF5.
StoredRows Virtual(const DatasetQueries& dataset, hid_t dcpl, const FileState* file,
                   const DatasetState& state, VirtualCaching caching) {
  if (file == nullptr || !file->identity.valid)
    return Elsewhere("a virtual dataset in an unknown file");
  io::Result<VirtualSources> sources = VirtualSources::Find(dataset, dcpl, *file);
  if (!sources.ok()) return Elsewhere("a virtual dataset: " + sources.status().message());
  io::Result<std::shared_ptr<const io::RandomAccessSource>> rows =
      io::Status::Unsupported("the connector underneath is not the native one");
  if (dataset.Native()) rows = VirtualRowSource(dcpl, state, *file, sources.value());
  // Row r at r * row_bytes of the spliced sources: a contiguous layout at 0.
  io::ContiguousLayout layout;
  layout.row_bytes = state.row_bytes();
  layout.num_rows = state.dims()[0];
  const io::Status raw = rows.ok() ? layout.Validate() : rows.status();
  if (!raw.ok() && caching == VirtualCaching::kRaw) {
    return Elsewhere("a virtual dataset whose rows cannot be read raw from its sources (" +
                     raw.message() + "), and PRESCIENT_CACHE_VIRTUAL is raw, not 1");
  }
  StoredRows stored = Stored(
      0,
      io::Status::Unsupported("a virtual dataset whose rows are not read raw: " + raw.message()));
  if (raw.ok()) {
    layout.path = rows.value()->name();
    stored.layout = io::RawLayout(std::move(layout));
    stored.source = std::move(rows.value());
  }
  stored.sources = std::make_shared<const VirtualSources>(std::move(sources.value()));
  return stored;
}

}  // namespace

StoredRows ReadStoredRows(const DatasetQueries& dataset, const FileState* file,
                          const DatasetState& state, VirtualCaching cache_virtual) noexcept {
  PreservedErrorStack keep;  // failed probes must not leave errors behind
  try {
    const char* not_raw = NotRawReadable(dataset, file);
    if (*not_raw == '\0') {
      // HDF5 gives an address only for contiguous data that is allocated and
      // not in external files: enough to read it raw, and no creation
      // property list (HDF5 copies one for every request; the copy and its
      // close cost more than the rest of preparing a small dataset).
      if (const haddr_t address = dataset.Offset(); address != HADDR_UNDEF) {
        return Stored(0, Contiguous(*file, state, address));
      }
    }
    ScopedId dcpl(dataset.CreationPlist(), &H5Pclose);
    if (dcpl.get() < 0) return Elsewhere("cannot read its creation property list");
    if (H5Pget_layout(dcpl.get()) == H5D_VIRTUAL) {
      if (cache_virtual == VirtualCaching::kOff)
        return Elsewhere("a virtual dataset, and PRESCIENT_CACHE_VIRTUAL is off");
      return Virtual(dataset, dcpl.get(), file, state, cache_virtual);
    }
    if (H5Pget_external_count(dcpl.get()) != 0) {
      return Elsewhere("its rows are in external raw files, which are not watched for changes");
    }
    const std::uint64_t chunk_rows = ChunkRows(dcpl.get());
    if (*not_raw != '\0') return Stored(chunk_rows, io::Status::Unsupported(not_raw));
    return Stored(chunk_rows, FromCreationPlist(dataset, dcpl.get(), *file, state));
  } catch (const std::exception& e) {
    return Elsewhere(std::string("reading its layout failed: ") + e.what());
  } catch (...) {
    return Elsewhere("reading its layout failed");
  }
}

}  // namespace prescient::vol
