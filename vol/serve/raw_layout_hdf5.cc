#include "vol/serve/raw_layout_hdf5.h"

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"
#include "vol/serve/chunked_layout_hdf5.h"
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

io::Result<io::RawLayout> Chunked(const DatasetQueries& dataset, const FileState& file,
                                  const DatasetState& state, hid_t dcpl) {
  ScopedId type(state.NewStoredTypeId(), &H5Tclose);
  if (type.get() < 0) return io::Status::Unsupported("cannot rebuild its type");
  io::Result<io::ChunkedLayout> layout =
      ReadChunkedLayout(dataset, dcpl, file.name, state.dims(), type.get());
  if (!layout.ok()) return layout.status();
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

// Whether some of the dataset may never have been written and read as
// nothing (HDF5 leaving the reader's buffer as it was there).
bool MayReadAsNothing(const DatasetQueries& dataset, hid_t dcpl) {
  switch (H5Pget_layout(dcpl)) {
    case H5D_CONTIGUOUS:
      return dataset.Offset() == HADDR_UNDEF && UnwrittenDataReadsAsNothing(dcpl);
    case H5D_CHUNKED:
      return UnwrittenDataReadsAsNothing(dcpl);
    default:  // compact: always written
      return false;
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
  io::Result<VirtualRows> rows =
      io::Status::Unsupported("the connector underneath is not the native one");
  if (dataset.Native()) rows = ReadVirtualRows(dcpl, state, *file, sources.value());
  if (!rows.ok() && caching == VirtualCaching::kRaw) {
    return Elsewhere("a virtual dataset whose rows cannot be read raw from its sources (" +
                     rows.status().message() + "), and PRESCIENT_CACHE_VIRTUAL is raw, not 1");
  }
  // Loaded through HDF5 instead, every byte must be one HDF5 writes.
  if (!rows.ok() && VirtualMayReadAsNothing(dcpl, *file, sources.value())) {
    return Elsewhere(
        "a virtual dataset whose rows cannot be read raw from its sources (" +
        rows.status().message() +
        "), and of which HDF5 may read parts as nothing (no fill value where never written)");
  }
  StoredRows stored =
      Stored(0, io::Status::Unsupported("a virtual dataset whose rows are not read raw: " +
                                        rows.status().message()));
  if (rows.ok()) {
    if (const auto* chunked = std::get_if<io::ChunkedLayout>(&rows.value().layout))
      stored.chunk_rows = chunked->chunk_shape()[0];
    stored.layout = std::move(rows.value().layout);
    stored.source = std::move(rows.value().source);
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
    io::Result<io::RawLayout> layout = *not_raw != '\0'
                                           ? io::Status::Unsupported(not_raw)
                                           : FromCreationPlist(dataset, dcpl.get(), *file, state);
    // Rows not read raw are loaded through HDF5 into the cache, which must
    // then hold every byte of them: none where HDF5 writes nothing.
    if (!layout.ok() && MayReadAsNothing(dataset, dcpl.get())) {
      return Elsewhere(
          "parts never written read as nothing (fill time never, or no fill value), and its "
          "rows are not read raw (" +
          layout.status().message() + ")");
    }
    return Stored(ChunkRows(dcpl.get()), std::move(layout));
  } catch (const std::exception& e) {
    return Elsewhere(std::string("reading its layout failed: ") + e.what());
  } catch (...) {
    return Elsewhere("reading its layout failed");
  }
}

}  // namespace prescient::vol
