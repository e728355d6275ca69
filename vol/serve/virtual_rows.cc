#include "vol/serve/virtual_rows.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/io/pattern_source.h"
#include "cache/io/spliced_source.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/name_query.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"
#include "vol/serve/chunked_layout_hdf5.h"
#include "vol/serve/file_handles.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// When the selection of `space` is one box (every point between its bounds
// selected) within `dims` that spans dimensions 1.. whole: its rows.
struct Rows {
  hsize_t first = 0;
  hsize_t count = 0;
};
std::optional<Rows> WholeRowsOf(hid_t space, const std::vector<hsize_t>& dims) {
  if (H5Sget_simple_extent_ndims(space) != static_cast<int>(dims.size()) || dims.empty())
    return std::nullopt;
  std::vector<hsize_t> start(dims.size()), end(dims.size());
  if (H5Sget_select_bounds(space, start.data(), end.data()) < 0) return std::nullopt;
  const hssize_t points = H5Sget_select_npoints(space);
  if (points <= 0) return std::nullopt;
  hsize_t box = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (end[d] < start[d] || end[d] >= dims[d]) return std::nullopt;
    if (d > 0 && (start[d] != 0 || end[d] != dims[d] - 1)) return std::nullopt;
    const hsize_t side = end[d] - start[d] + 1;
    if (box > static_cast<hsize_t>(points) / side) return std::nullopt;
    box *= side;
  }
  if (box != static_cast<hsize_t>(points)) return std::nullopt;
  return Rows{start[0], end[0] - start[0] + 1};
}

FileIdentity IdentityOfDescriptor(int fd) {
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) return {};
  return IdentityOf(st);
}

// A source file opened for the addresses of its datasets, and the
// descriptor its rows will be read through.
struct OpenSource {
  std::string path;
  std::shared_ptr<const io::RandomAccessSource> reader;  // through the process's pool
  hid_t hdf5 = H5I_INVALID_HID;
  OpenSource() = default;
  OpenSource(const OpenSource&) = delete;
  OpenSource& operator=(const OpenSource&) = delete;
  ~OpenSource() {
    if (hdf5 >= 0) H5Fclose(hdf5);
  }
};

io::Status Refuse(std::string why) { return io::Status::Unsupported(std::move(why)); }

// Opens `path`, which must still be the version `identity` describes.
io::Status Open(const std::string& path, const FileIdentity& identity, OpenSource* out) {
  const std::shared_ptr<FileState> state =
      FileState::Make(path.c_str(), /*writable=*/false, /*posix_driver=*/true);
  if (!SameVersion(state->identity, identity))
    return Refuse("source " + path + " changed since it was identified");
  out->path = path;
  // Rows are read through the process's pool of descriptors (a job of many
  // virtual datasets must not hold a descriptor per source each), which
  // reopens the file by path only while it is the same (device, inode).
  out->reader = FileHandles::Get().Source(*state);
  ScopedId fapl(H5Pcreate(H5P_FILE_ACCESS), &H5Pclose);
  if (fapl.get() < 0 || H5Pset_vol(fapl.get(), H5VL_NATIVE, nullptr) < 0 ||
      H5Pset_fapl_stdio(fapl.get()) < 0 ||
      // Never a lock: an application's write open of the file must not fail
      // because of this read (which is over before the callback returns).
      H5Pset_file_locking(fapl.get(), /*use_file_locking=*/false,
                          /*ignore_when_disabled=*/true) < 0) {
    return Refuse("cannot make a file access property list");
  }
  out->hdf5 = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
  if (out->hdf5 < 0) return Refuse("HDF5 cannot open source " + path);
  void* handle = nullptr;
  if (H5Fget_vfd_handle(out->hdf5, fapl.get(), &handle) < 0 || handle == nullptr)
    return Refuse("no descriptor for source " + path);
  // The stdio driver's handle is the address of its FILE*.
  FILE* const stream = *static_cast<FILE**>(handle);
  if (stream == nullptr || !SameVersion(IdentityOfDescriptor(fileno(stream)), identity))
    return Refuse("source " + path + " changed since it was identified");
  return io::Status();
}

// A mapping's rows as found in its source: where the rows it takes begin,
// and how the source stores them (contiguous at `address`, or `chunks`).
struct SourceRows {
  std::string what;         // "dataset in file", for messages
  std::uint64_t first = 0;  // the source's first row the mapping takes
  std::optional<std::uint64_t> address;
  std::optional<io::ChunkedLayout> chunks;
};

// The `rows` rows `srcspace` selects of source dataset `name`, or why they
// cannot be read raw. `vds_dims` and `vds_type` are the VDS's.
io::Result<SourceRows> DescribeSource(const OpenSource& file, const std::string& name,
                                      hid_t srcspace, const std::vector<hsize_t>& vds_dims,
                                      hid_t vds_type, hsize_t rows) {
  SourceRows found;
  found.what = name + " in " + file.path;
  const std::string& what = found.what;
  ScopedId dataset(H5Dopen2(file.hdf5, name.c_str(), H5P_DEFAULT), &H5Dclose);
  if (dataset.get() < 0) return Refuse("no source dataset " + what);
  {
    ScopedId type(H5Dget_type(dataset.get()), &H5Tclose);
    if (type.get() < 0 || H5Tequal(type.get(), vds_type) <= 0)
      return Refuse("source " + what + " has another type than the virtual dataset");
  }
  std::vector<hsize_t> dims;
  {
    ScopedId space(H5Dget_space(dataset.get()), &H5Sclose);
    const int rank = space.get() < 0 ? -1 : H5Sget_simple_extent_ndims(space.get());
    if (rank < 1) return Refuse("cannot read the dataspace of " + what);
    dims.resize(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  }
  // HDF5 applies the mapping's selection to the source's present extent (the
  // extent stored with the selection is not the source's).
  if (dims.size() != vds_dims.size() ||
      !std::equal(dims.begin() + 1, dims.end(), vds_dims.begin() + 1)) {
    return Refuse("source " + what + " has rows shaped unlike the virtual dataset's");
  }
  // "All" is the whole source as it is now (h5py's VirtualSource without a
  // selection stores it with a scalar extent); a selection is taken on the
  // source's present extent too.
  const std::optional<Rows> selected = H5Sget_select_type(srcspace) == H5S_SEL_ALL
                                           ? std::optional<Rows>(Rows{0, dims[0]})
                                           : WholeRowsOf(srcspace, dims);
  if (!selected) return Refuse("a mapping from " + what + " takes parts of rows, or rows it lacks");
  if (selected->count != rows) return Refuse("a mapping from " + what + " is uneven");
  found.first = selected->first;

  ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
  if (dcpl.get() < 0 || H5Pget_external_count(dcpl.get()) != 0)
    return Refuse("source " + what + " is in external raw files");
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CONTIGUOUS: {
      const haddr_t address = H5Dget_offset(dataset.get());
      if (address == HADDR_UNDEF) return Refuse("source " + what + " was never written");
      found.address = address;
      return found;
    }
    case H5D_CHUNKED: {
      io::Result<io::ChunkedLayout> chunks =
          ReadChunkedLayout(PublicDataset(dataset.get()), dcpl.get(), what, dims, vds_type);
      if (!chunks.ok()) return Refuse("source " + what + ": " + chunks.status().message());
      found.chunks = std::move(chunks.value());
      return found;
    }
    default:
      return Refuse("source " + what + " is compact or virtual");
  }
}

// The dataset mapping `i` of `dcpl` names, and the file it is found in
// ("." being the file naming the VDS).
struct MappingSource {
  std::string dataset;
  VirtualSources::Located where;
};
io::Result<MappingSource> SourceOfMapping(hid_t dcpl, std::size_t i, const FileState& file,
                                          const VirtualSources& sources) {
  const std::optional<std::string> file_name = QueryNameByLength(
      [&](char* t, std::size_t n) { return H5Pget_virtual_filename(dcpl, i, t, n); });
  std::optional<std::string> dataset_name = QueryNameByLength(
      [&](char* t, std::size_t n) { return H5Pget_virtual_dsetname(dcpl, i, t, n); });
  if (!file_name || !dataset_name) return Refuse("cannot read a mapping's source");
  std::optional<VirtualSources::Located> where =
      *file_name == "." ? VirtualSources::Located{file.name, file.identity}
                        : sources.Where(*file_name);
  if (!where) return Refuse("source file " + *file_name + " is not located");
  return MappingSource{std::move(*dataset_name), std::move(*where)};
}

// What each mapping names and fills, learnt before anything is opened.
struct Named {
  std::string dataset;
  VirtualSources::Located where;
  Rows rows;
};

// The rows no mapping gives, and the element they read as (empty when none).
struct Filled {
  std::vector<Rows> gaps;
  std::vector<std::byte> fill;
};

io::Result<std::uint64_t> SizeOf(const OpenSource& source) {
  io::Result<std::uint64_t> size = source.reader->Size();
  if (!size.ok() || size.value() == 0) return Refuse("cannot size source " + source.path);
  return size;
}

// Contiguous sources: each mapping's rows are one byte range of its file,
// spliced in row order; row r of the VDS is at r * row_bytes.
io::Result<VirtualRows> SpliceContiguous(const std::vector<Named>& mappings,
                                         const std::vector<SourceRows>& found,
                                         const std::map<std::string, OpenSource>& open,
                                         const Filled& filled, const DatasetState& state,
                                         const std::string& name) {
  const std::uint64_t row_bytes = state.row_bytes();
  std::vector<io::SplicedSource::Run> runs;
  runs.reserve(mappings.size() + filled.gaps.size());
  if (!filled.gaps.empty()) {
    // Rows no mapping gives: the fill value, from a run of its own each.
    io::Result<std::unique_ptr<io::PatternSource>> pattern =
        io::PatternSource::Make(filled.fill, state.dims()[0] * row_bytes, name + " (fill value)");
    if (!pattern.ok()) return pattern.status();
    const std::shared_ptr<const io::RandomAccessSource> fill = std::move(pattern.value());
    for (const Rows& gap : filled.gaps) {
      runs.push_back({.begin = gap.first * row_bytes,
                      .bytes = gap.count * row_bytes,
                      .file = fill,
                      .file_offset = 0});
    }
  }
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const OpenSource& source = open.at(mappings[i].where.path);
    const std::uint64_t offset = *found[i].address + found[i].first * row_bytes;
    const std::uint64_t bytes = mappings[i].rows.count * row_bytes;
    io::Result<std::uint64_t> size = SizeOf(source);
    if (!size.ok()) return size.status();
    if (size.value() < offset || size.value() - offset < bytes)
      return Refuse("source " + found[i].what + " ends early");
    runs.push_back({.begin = mappings[i].rows.first * row_bytes,
                    .bytes = bytes,
                    .file = source.reader,
                    .file_offset = offset});
  }
  io::Result<std::unique_ptr<io::SplicedSource>> spliced =
      io::SplicedSource::Make(std::move(runs), name);
  if (!spliced.ok()) return Refuse("its mappings give some rows twice");
  io::ContiguousLayout layout;
  layout.path = name;
  layout.row_bytes = row_bytes;
  layout.num_rows = state.dims()[0];
  if (io::Status s = layout.Validate(); !s.ok()) return s;
  return VirtualRows{.layout = std::move(layout), .source = std::move(spliced.value())};
}

bool SameFilters(const std::vector<io::Filter>& a, const std::vector<io::Filter>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const io::Filter& x, const io::Filter& y) {
                      return x.id == y.id && x.client_data == y.client_data;
                    });
}

// Chunked sources: the files spliced whole, one after another, and the VDS a
// chunked dataset whose chunks are its sources', moved to their offsets in
// the splice. A mapping must take whole chunks' rows (from a chunk boundary
// of the source, to one of the VDS: a chunk is never shared by two
// mappings), and every source be chunked, filtered and filled alike.
io::Result<VirtualRows> SpliceChunked(const std::vector<Named>& mappings,
                                      const std::vector<SourceRows>& found,
                                      const std::map<std::string, OpenSource>& open,
                                      const Filled& filled, const DatasetState& state,
                                      const std::string& name) {
  const io::ChunkedLayout& model = *found[0].chunks;
  // Rows no mapping gives are chunks never written, read as the sources'
  // fill value: it must be the VDS's. (They are whole chunks: every mapping
  // begins at a chunk boundary and ends at one, or at the dataset's end.)
  if (!filled.gaps.empty()) {
    const std::vector<std::byte> zeros(model.element_size());
    if (filled.fill != (model.fill_value().empty() ? zeros : model.fill_value()))
      return Refuse("rows no mapping gives fill unlike its sources' chunks never written");
  }
  for (const SourceRows& source : found) {
    const io::ChunkedLayout& chunks = *source.chunks;
    if (chunks.chunk_shape() != model.chunk_shape() ||
        !SameFilters(chunks.filters(), model.filters()) ||
        chunks.fill_value() != model.fill_value()) {
      return Refuse("source " + source.what + " is chunked, filtered or filled unlike " +
                    found[0].what);
    }
  }
  struct Placed {
    std::uint64_t base = 0;
    std::uint64_t size = 0;
  };
  std::map<std::string, Placed> placed;  // by path
  std::vector<io::SplicedSource::Run> runs;
  std::uint64_t end = 0;
  for (const Named& mapping : mappings) {
    const OpenSource& source = open.at(mapping.where.path);
    if (placed.contains(source.path)) continue;
    io::Result<std::uint64_t> size = SizeOf(source);
    if (!size.ok()) return size.status();
    placed[source.path] = {end, size.value()};
    runs.push_back({.begin = end, .bytes = size.value(), .file = source.reader, .file_offset = 0});
    end += size.value();
  }
  io::Result<io::ChunkedLayout> layout =
      io::ChunkedLayout::Make(name, {state.dims().begin(), state.dims().end()}, model.chunk_shape(),
                              model.element_size(), model.filters(), model.fill_value());
  if (!layout.ok()) return layout.status();
  const std::vector<std::uint64_t>& chunk_shape = model.chunk_shape();
  const std::uint64_t slab_rows = chunk_shape[0];
  const std::uint64_t per_slab = model.chunks_per_slab();
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const Rows& rows = mappings[i].rows;
    const SourceRows& source = found[i];
    const bool ends_the_dataset = rows.first + rows.count == state.dims()[0];
    if (rows.first % slab_rows != 0 || source.first % slab_rows != 0 ||
        (rows.count % slab_rows != 0 && !ends_the_dataset)) {
      return Refuse("a mapping from " + source.what + " takes rows that are not whole chunks");
    }
    const Placed& file = placed.at(mappings[i].where.path);
    const std::uint64_t slabs = (rows.count + slab_rows - 1) / slab_rows;
    for (std::uint64_t s = 0; s < slabs; ++s) {
      for (std::uint64_t j = 0; j < per_slab; ++j) {
        const std::optional<io::ChunkLocation>& chunk =
            source.chunks->chunk((source.first / slab_rows + s) * per_slab + j);
        if (!chunk) continue;  // the fill value, in the VDS as in its source
        if (chunk->file_offset > file.size || file.size - chunk->file_offset < chunk->stored_size)
          return Refuse("source " + source.what + " ends early");
        std::vector<std::uint64_t> offset = model.GridCoords(j);  // within slab 0
        offset[0] = rows.first / slab_rows + s;
        for (std::size_t d = 0; d < offset.size(); ++d) offset[d] *= chunk_shape[d];
        io::ChunkLocation moved = *chunk;
        moved.file_offset += file.base;
        if (io::Status set = layout.value().SetChunk(offset, moved); !set.ok()) return set;
      }
    }
  }
  io::Result<std::unique_ptr<io::SplicedSource>> spliced =
      io::SplicedSource::Make(std::move(runs), name);
  if (!spliced.ok()) return spliced.status();
  return VirtualRows{.layout = std::move(layout.value()), .source = std::move(spliced.value())};
}

// The runs of rows no mapping gives, in order; nullopt when a row is given
// twice (HDF5 decides what it reads there).
std::optional<std::vector<Rows>> RowsNotGiven(const std::vector<Named>& mappings, hsize_t rows) {
  std::vector<Rows> given;
  given.reserve(mappings.size());
  for (const Named& mapping : mappings) given.push_back(mapping.rows);
  std::sort(given.begin(), given.end(),
            [](const Rows& a, const Rows& b) { return a.first < b.first; });
  std::vector<Rows> gaps;
  hsize_t next = 0;
  for (const Rows& run : given) {
    if (run.first < next) return std::nullopt;
    if (run.first > next) gaps.push_back({next, run.first - next});
    next = run.first + run.count;
  }
  if (next > rows) return std::nullopt;
  if (next < rows) gaps.push_back({next, rows - next});
  return gaps;
}

// The element HDF5 reads where no mapping gives a row: the VDS's fill value
// (zeros unless one was set); Unsupported when it has none.
io::Result<std::vector<std::byte>> FillOf(hid_t dcpl, hid_t type, std::size_t element_size) {
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  if (H5Pfill_value_defined(dcpl, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED)
    return Refuse("rows no mapping gives, and no fill value");
  std::vector<std::byte> fill(element_size);
  if (defined == H5D_FILL_VALUE_USER_DEFINED && H5Pget_fill_value(dcpl, type, fill.data()) < 0)
    return Refuse("cannot read its fill value");
  return fill;
}

}  // namespace

io::Result<VirtualRows> ReadVirtualRows(hid_t dcpl, const DatasetState& state,
                                        const FileState& file, const VirtualSources& sources) {
  if (state.row_bytes() == 0 || state.dims().empty()) return Refuse("rows of no bytes");
  if (!file.posix_driver || !file.identity.valid)
    return Refuse("the file naming it was not opened with the POSIX driver");
  // A source HDF5 cannot open, or without the dataset named, is an answer
  // (HDF5's read gives fill values there), not an error to print.
  QuietErrorPrinting quiet;
  std::size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0 || count == 0)
    return Refuse("cannot read its mappings");
  ScopedId vds_type(state.NewStoredTypeId(), &H5Tclose);
  if (vds_type.get() < 0) return Refuse("cannot rebuild its type");
  // A dataset that cannot be read raw for its shape is turned down before
  // any source is opened.
  std::vector<Named> mappings;
  mappings.reserve(count);
  std::map<std::string, OpenSource> open;  // by the path opened
  for (std::size_t i = 0; i < count; ++i) {
    io::Result<MappingSource> source = SourceOfMapping(dcpl, i, file, sources);
    if (!source.ok()) return source.status();
    if (source.value().dataset.find('%') != std::string::npos)
      return Refuse("source dataset names are printf-style patterns");
    std::string& dataset_name = source.value().dataset;
    VirtualSources::Located& where = source.value().where;
    ScopedId vspace(H5Pget_virtual_vspace(dcpl, i), &H5Sclose);
    const std::optional<Rows> rows =
        vspace.get() < 0 ? std::nullopt : WholeRowsOf(vspace.get(), state.dims());
    if (!rows) return Refuse("a mapping fills parts of rows of the virtual dataset");
    open.try_emplace(where.path);
    if (open.size() > kMaxRawVirtualSourceFiles) {
      return Refuse("more than " + std::to_string(kMaxRawVirtualSourceFiles) + " source files");
    }
    mappings.push_back({std::move(dataset_name), std::move(where), *rows});
  }
  // Rows two mappings give read as HDF5 decides; rows none gives, as the fill value.
  const std::optional<std::vector<Rows>> gaps = RowsNotGiven(mappings, state.dims()[0]);
  if (!gaps) return Refuse("its mappings give some rows twice");
  Filled filled{.gaps = *gaps, .fill = {}};
  if (!filled.gaps.empty()) {
    io::Result<std::vector<std::byte>> fill = FillOf(dcpl, vds_type.get(), state.type_size());
    if (!fill.ok()) return fill.status();
    filled.fill = std::move(fill.value());
  }
  std::vector<SourceRows> found;
  found.reserve(count);
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const Named& mapping = mappings[i];
    OpenSource& source = open.at(mapping.where.path);
    if (source.hdf5 < 0) {
      if (io::Status s = Open(mapping.where.path, mapping.where.identity, &source); !s.ok())
        return s;
    }
    ScopedId srcspace(H5Pget_virtual_srcspace(dcpl, i), &H5Sclose);
    if (srcspace.get() < 0) return Refuse("cannot read a mapping's source selection");
    io::Result<SourceRows> described = DescribeSource(
        source, mapping.dataset, srcspace.get(), state.dims(), vds_type.get(), mapping.rows.count);
    if (!described.ok()) return described.status();
    if (!found.empty() && described.value().chunks.has_value() != found[0].chunks.has_value())
      return Refuse("some of its sources are chunked and some are not");
    found.push_back(std::move(described.value()));
  }
  const std::string name = file.name + " (virtual dataset sources)";
  return found[0].chunks ? SpliceChunked(mappings, found, open, filled, state, name)
                         : SpliceContiguous(mappings, found, open, filled, state, name);
}

bool VirtualMayReadAsNothing(hid_t dcpl, const FileState& file, const VirtualSources& sources) {
  QuietErrorPrinting quiet;
  H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
  std::size_t count = 0;
  if (H5Pfill_value_defined(dcpl, &defined) < 0 || defined == H5D_FILL_VALUE_UNDEFINED ||
      H5Pget_virtual_count(dcpl, &count) < 0) {
    return true;
  }
  std::map<std::string, OpenSource> open;  // by the path opened
  for (std::size_t i = 0; i < count; ++i) {
    const io::Result<MappingSource> mapping = SourceOfMapping(dcpl, i, file, sources);
    if (!mapping.ok()) return true;
    const VirtualSources::Located& where = mapping.value().where;
    OpenSource& source = open[where.path];
    if (source.hdf5 < 0 && !Open(where.path, where.identity, &source).ok()) return true;
    // A source dataset missing reads as the VDS's fill value (defined).
    ScopedId dataset(H5Dopen2(source.hdf5, mapping.value().dataset.c_str(), H5P_DEFAULT),
                     &H5Dclose);
    if (dataset.get() < 0) continue;
    ScopedId source_dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    if (source_dcpl.get() < 0) return true;
    if (!UnwrittenDataReadsAsNothing(source_dcpl.get())) continue;
    H5D_space_status_t allocated = H5D_SPACE_STATUS_ERROR;
    if (H5Dget_space_status(dataset.get(), &allocated) < 0 ||
        allocated != H5D_SPACE_STATUS_ALLOCATED) {
      return true;
    }
  }
  return false;
}

}  // namespace prescient::vol
