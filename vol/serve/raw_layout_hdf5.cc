#include "vol/serve/raw_layout_hdf5.h"

#include <algorithm>
#include <array>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vol/objects/file_state.h"
#include "vol/runtime/error.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// Closes an HDF5 id on scope exit.
class ScopedId {
 public:
  ScopedId(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~ScopedId() {
    if (id_ >= 0) close_(id_);
  }
  ScopedId(const ScopedId&) = delete;
  ScopedId& operator=(const ScopedId&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

herr_t NativeDatasetOptional(const VolObject& dataset, int op,
                             H5VL_native_dataset_optional_args_t* args) {
  H5VL_optional_args_t optional{op, args};
  return H5VLdataset_optional(dataset.under, dataset.under_vol_id, &optional,
                              H5P_DATASET_XFER_DEFAULT, nullptr);
}

hid_t UnderDcpl(const VolObject& dataset) {
  H5VL_dataset_get_args_t args{};
  args.op_type = H5VL_DATASET_GET_DCPL;
  args.args.get_dcpl.dcpl_id = H5I_INVALID_HID;
  if (H5VLdataset_get(dataset.under, dataset.under_vol_id, &args, H5P_DATASET_XFER_DEFAULT,
                      nullptr) < 0) {
    return H5I_INVALID_HID;
  }
  return args.args.get_dcpl.dcpl_id;
}

io::Result<io::RawLayout> Contiguous(const VolObject& dataset, const DatasetState& state) {
  haddr_t address = HADDR_UNDEF;
  H5VL_native_dataset_optional_args_t args{};
  args.get_offset.offset = &address;
  if (NativeDatasetOptional(dataset, H5VL_NATIVE_DATASET_GET_OFFSET, &args) < 0 ||
      address == HADDR_UNDEF) {
    return io::Status::Unsupported("contiguous data not allocated");
  }
  io::ContiguousLayout layout;
  layout.path = dataset.file->name;
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

io::Result<io::RawLayout> Chunked(const VolObject& dataset, const DatasetState& state, hid_t dcpl) {
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
      dataset.file->name, {state.dims().begin(), state.dims().end()}, {chunk.begin(), chunk.end()},
      state.type_size(), std::move(filters.value()), std::move(fill));
  if (!layout.ok()) return layout.status();

  ChunkVisit visit{&layout.value(), rank, {}};
  H5VL_native_dataset_optional_args_t args{};
  args.chunk_iter.op = &VisitChunk;
  args.chunk_iter.op_data = &visit;
  if (NativeDatasetOptional(dataset, H5VL_NATIVE_DATASET_CHUNK_ITER, &args) < 0) {
    return visit.status.ok() ? io::Status::Unsupported("chunk iteration failed") : visit.status;
  }
  return io::RawLayout(std::move(layout.value()));
}

io::Result<io::RawLayout> Extract(const VolObject& dataset, const DatasetState& state) {
  if (dataset.file == nullptr || !dataset.file->posix_driver || !dataset.file->identity.valid) {
    return io::Status::Unsupported("file not opened with the POSIX driver");
  }
  H5VL_class_value_t under_value = -1;
  if (H5VLget_value(dataset.under_vol_id, &under_value) < 0 || under_value != H5_VOL_NATIVE) {
    return io::Status::Unsupported("the connector underneath is not the native one");
  }
  ScopedId dcpl(UnderDcpl(dataset), &H5Pclose);
  if (dcpl.get() < 0) return io::Status::Unsupported("cannot read the creation property list");
  if (H5Pget_external_count(dcpl.get()) > 0) return io::Status::Unsupported("external storage");
  switch (H5Pget_layout(dcpl.get())) {
    case H5D_CONTIGUOUS:
      return Contiguous(dataset, state);
    case H5D_CHUNKED:
      return Chunked(dataset, state, dcpl.get());
    default:
      return io::Status::Unsupported("compact or virtual layout");
  }
}

}  // namespace

std::uint64_t ChunkRows(const VolObject& dataset) noexcept {
  PreservedErrorStack keep;
  try {
    ScopedId dcpl(UnderDcpl(dataset), &H5Pclose);
    if (dcpl.get() < 0 || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return 0;
    hsize_t chunk[H5S_MAX_RANK];
    if (H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk) < 1) return 0;
    return chunk[0];
  } catch (...) {
    return 0;
  }
}

io::Result<io::RawLayout> ExtractRawLayout(const VolObject& dataset,
                                           const DatasetState& state) noexcept {
  PreservedErrorStack keep;  // failed probes must not leave errors behind
  try {
    return Extract(dataset, state);
  } catch (const std::exception& e) {
    return io::Status::Internal(std::string("raw layout: ") + e.what());
  } catch (...) {
    return io::Status::Internal("raw layout: unknown exception");
  }
}

}  // namespace prescient::vol
