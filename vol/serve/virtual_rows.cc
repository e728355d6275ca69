#include "vol/serve/virtual_rows.h"

#include <sys/stat.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cache/io/spliced_source.h"
#include "vol/objects/name_query.h"
#include "vol/objects/scoped_id.h"
#include "vol/runtime/error.h"
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

// Where the `rows` rows `srcspace` selects of source dataset `name` begin in
// its file, or why they cannot be read raw. `vds_dims` and `vds_type` are the
// VDS's.
io::Result<std::uint64_t> SourceRowsOffset(const OpenSource& file, const std::string& name,
                                           hid_t srcspace, const std::vector<hsize_t>& vds_dims,
                                           hid_t vds_type, std::uint64_t row_bytes, hsize_t rows) {
  const std::string what = name + " in " + file.path;
  ScopedId dataset(H5Dopen2(file.hdf5, name.c_str(), H5P_DEFAULT), &H5Dclose);
  if (dataset.get() < 0) return Refuse("no source dataset " + what);
  {
    ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    if (dcpl.get() < 0 || H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS ||
        H5Pget_external_count(dcpl.get()) != 0) {
      return Refuse("source " + what + " is not contiguous in its file");
    }
  }
  const haddr_t address = H5Dget_offset(dataset.get());
  if (address == HADDR_UNDEF) return Refuse("source " + what + " was never written");
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
  return static_cast<std::uint64_t>(address) + selected->first * row_bytes;
}

}  // namespace

io::Result<std::shared_ptr<const io::RandomAccessSource>> VirtualRowSource(
    hid_t dcpl, const DatasetState& state, const FileState& file, const VirtualSources& sources) {
  const std::uint64_t row_bytes = state.row_bytes();
  if (row_bytes == 0 || state.dims().empty()) return Refuse("rows of no bytes");
  if (!file.posix_driver || !file.identity.valid)
    return Refuse("the file naming it was not opened with the POSIX driver");
  // A source HDF5 cannot open, or without the dataset named, is an answer
  // (HDF5's read gives fill values there), not an error to print.
  QuietErrorPrinting quiet;
  std::size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0) return Refuse("cannot read its mappings");
  ScopedId vds_type(state.NewStoredTypeId(), &H5Tclose);
  if (vds_type.get() < 0) return Refuse("cannot rebuild its type");
  // What each mapping names and fills, before anything is opened: a dataset
  // that cannot be read raw for its shape is turned down at no cost.
  struct Named {
    std::string dataset;
    VirtualSources::Located where;
    Rows rows;
  };
  std::vector<Named> mappings;
  mappings.reserve(count);
  std::map<std::string, OpenSource> open;  // by the path opened
  std::uint64_t mapped_rows = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::optional<std::string> file_name = QueryNameByLength(
        [&](char* t, std::size_t n) { return H5Pget_virtual_filename(dcpl, i, t, n); });
    std::optional<std::string> dataset_name = QueryNameByLength(
        [&](char* t, std::size_t n) { return H5Pget_virtual_dsetname(dcpl, i, t, n); });
    if (!file_name || !dataset_name) return Refuse("cannot read a mapping's source");
    if (dataset_name->find('%') != std::string::npos)
      return Refuse("source dataset names are printf-style patterns");
    std::optional<VirtualSources::Located> where =
        *file_name == "." ? VirtualSources::Located{file.name, file.identity}
                          : sources.Where(*file_name);
    if (!where) return Refuse("source file " + *file_name + " is not located");
    ScopedId vspace(H5Pget_virtual_vspace(dcpl, i), &H5Sclose);
    const std::optional<Rows> rows =
        vspace.get() < 0 ? std::nullopt : WholeRowsOf(vspace.get(), state.dims());
    if (!rows) return Refuse("a mapping fills parts of rows of the virtual dataset");
    mapped_rows += rows->count;
    open.try_emplace(where->path);
    if (open.size() > kMaxRawVirtualSourceFiles) {
      return Refuse("more than " + std::to_string(kMaxRawVirtualSourceFiles) + " source files");
    }
    mappings.push_back({std::move(*dataset_name), std::move(*where), *rows});
  }
  // Rows no mapping gives read as the fill value; rows two give, as HDF5 decides.
  if (mapped_rows != state.dims()[0])
    return Refuse("its mappings do not give every row exactly once");
  std::vector<io::SplicedSource::Run> runs;
  runs.reserve(count);
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    const Named& mapping = mappings[i];
    OpenSource& source = open.at(mapping.where.path);
    if (source.hdf5 < 0) {
      if (io::Status s = Open(mapping.where.path, mapping.where.identity, &source); !s.ok())
        return s;
    }
    ScopedId srcspace(H5Pget_virtual_srcspace(dcpl, i), &H5Sclose);
    if (srcspace.get() < 0) return Refuse("cannot read a mapping's source selection");
    io::Result<std::uint64_t> offset =
        SourceRowsOffset(source, mapping.dataset, srcspace.get(), state.dims(), vds_type.get(),
                         row_bytes, mapping.rows.count);
    if (!offset.ok()) return offset.status();
    const std::uint64_t bytes = mapping.rows.count * row_bytes;
    io::Result<std::uint64_t> size = source.reader->Size();
    if (!size.ok() || size.value() < offset.value() || size.value() - offset.value() < bytes) {
      return Refuse("source " + mapping.dataset + " in " + mapping.where.path + " ends early");
    }
    runs.push_back({.begin = mapping.rows.first * row_bytes,
                    .bytes = bytes,
                    .file = source.reader,
                    .file_offset = offset.value()});
  }
  io::Result<std::unique_ptr<io::SplicedSource>> spliced =
      io::SplicedSource::Make(std::move(runs), file.name + " (virtual dataset sources)");
  if (!spliced.ok()) return Refuse("its mappings do not give every row exactly once");
  return std::shared_ptr<const io::RandomAccessSource>(std::move(spliced.value()));
}

}  // namespace prescient::vol
