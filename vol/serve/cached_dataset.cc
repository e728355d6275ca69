#include "vol/serve/cached_dataset.h"

#include <sys/stat.h>

#include <cstring>
#include <exception>
#include <stdexcept>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "cache/io/storage_calibration.h"
#include "vol/objects/file_state.h"
#include "vol/runtime/error.h"
#include "vol/serve/raw_layout_hdf5.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

cache::DatasetKey KeyOf(const DatasetState& state) {
  return cache::DatasetKey{state.identity().hash[0], state.identity().hash[1]};
}

// Opens the file for raw reads and checks it is the file HDF5 opened (same
// device and inode): a path can be replaced between H5Fopen and now.
io::Result<std::unique_ptr<io::PosixFile>> OpenSameFile(const FileState& file) {
  io::Result<std::unique_ptr<io::PosixFile>> opened =
      io::PosixFile::Open(file.name, io::AccessPattern::kRandom);
  if (!opened.ok()) return opened.status();
  struct stat st{};
  if (::fstat(opened.value()->fd(), &st) != 0 ||
      static_cast<std::uint64_t>(st.st_dev) != file.identity.device ||
      static_cast<std::uint64_t>(st.st_ino) != file.identity.inode) {
    return io::Status::Unsupported(file.name + " is no longer the file HDF5 opened");
  }
  return opened;
}

}  // namespace

std::shared_ptr<CachedDataset> CachedDataset::Prepare(const VolObject& dataset,
                                                      const DatasetState& state) {
  if (dataset.file == nullptr) throw std::runtime_error("its file is unknown");
  auto cached = std::make_shared<CachedDataset>();
  cached->key_ = KeyOf(state);
  cached->description_ = state.identity().description;
  cached->path_ = dataset.file->name;
  cached->file_size_ = dataset.file->identity.size;
  cached->file_mtime_ns_ = dataset.file->identity.mtime_ns;
  cached->row_bytes_ = state.row_bytes();
  cached->dims_ = state.dims();
  cached->num_rows_ = state.dims().empty() ? 0 : state.dims()[0];
  cached->chunk_rows_ = ChunkRows(dataset);
  io::Result<io::RawLayout> layout = ExtractRawLayout(dataset, state);
  if (!layout.ok()) {
    cached->raw_reason_ = layout.status().message();
    return cached;
  }
  io::Result<std::unique_ptr<io::PosixFile>> file = OpenSameFile(*dataset.file);
  if (!file.ok()) {
    cached->raw_reason_ = file.status().message();
    return cached;
  }
  cached->layout_ = std::make_shared<const io::RawLayout>(std::move(layout.value()));
  cached->source_ = std::shared_ptr<const io::RandomAccessSource>(std::move(file.value()));
  return cached;
}

cache::Status CachedDataset::Register(cache::NodeCache& cache,
                                      std::optional<std::uint64_t> fixed_gap) {
  if (registered()) return cache::Status::Ok();
  cache::Result<cache::DatasetSlot> slot = cache.RegisterDataset(key_, row_bytes_, num_rows_);
  if (!slot.ok()) return slot.status();
  if (layout_ && fixed_gap) {
    coalescing_.max_gap_bytes = *fixed_gap;
  } else if (layout_) {
    if (io::Result<io::StorageProfile> profile = io::CalibrateStorage(path_); profile.ok()) {
      coalescing_ = io::CoalescingFromProfile(profile.value());
      storage_profile_ = profile.value().ToString();
    }
  }
  slot_ = slot.value();
  return cache::Status::Ok();
}

cache::Status CachedDataset::Load(const VolObject* dataset, std::span<const std::uint64_t> rows,
                                  std::span<std::byte* const> dest,
                                  const io::CoalescingOptions& coalescing,
                                  LoadCounters* counters) const noexcept {
  try {
    if (layout_) return LoadRaw(rows, dest, coalescing, counters);
    if (dataset == nullptr)
      return cache::Status::Unsupported("rows of this dataset load only through HDF5");
    return LoadThroughHdf5(*dataset, rows, dest, counters);
  } catch (const std::exception& e) {
    return cache::Status::Internal(std::string("loading rows: ") + e.what());
  } catch (...) {
    return cache::Status::Internal("loading rows: unknown exception");
  }
}

cache::Status CachedDataset::LoadRaw(std::span<const std::uint64_t> rows,
                                     std::span<std::byte* const> dest,
                                     const io::CoalescingOptions& coalescing,
                                     LoadCounters* counters) const {
  io::Result<io::ReadPlan> plan = io::PlanReads(*layout_, rows, coalescing);
  if (!plan.ok()) return plan.status();
  const io::RowTargetFn target = io::RowTargetsFromArrays(rows, dest);
  for (const io::ReadTask& task : plan.value().tasks) {
    io::Status status = io::LoadTask(*layout_, *source_, task, target);
    if (!status.ok()) return status;
  }
  if (counters != nullptr) {
    counters->reads += plan.value().num_reads();
    counters->bytes += plan.value().bytes_read();
  }
  return cache::Status::Ok();
}

cache::Status CachedDataset::LoadThroughHdf5(const VolObject& dataset,
                                             std::span<const std::uint64_t> rows,
                                             std::span<std::byte* const> dest,
                                             LoadCounters* counters) const {
  // One hyperslab read per run of consecutive rows, into a staging buffer
  // (cache slots of consecutive rows need not be adjacent).
  // The stored type as memory type: the read returns the file's bytes unconverted.
  const hid_t mem_type = dataset.dataset->NewStoredTypeId();
  if (mem_type < 0) return cache::Status::Internal("cannot rebuild the stored type");
  const cache::Status status = ReadRunsThroughHdf5(dataset, mem_type, rows, dest, counters);
  H5Tclose(mem_type);
  return status;
}

cache::Status CachedDataset::ReadRunsThroughHdf5(const VolObject& dataset, hid_t mem_type,
                                                 std::span<const std::uint64_t> rows,
                                                 std::span<std::byte* const> dest,
                                                 LoadCounters* counters) const {
  const std::size_t rank = dims_.size();
  std::vector<hsize_t> start(rank, 0), count(dims_);
  std::vector<std::byte> staging;
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    start[0] = rows[i];
    count[0] = j - i;
    staging.resize(count[0] * row_bytes_);
    const hid_t file_space = H5Screate_simple(static_cast<int>(rank), dims_.data(), nullptr);
    const hid_t mem_space = H5Screate_simple(static_cast<int>(rank), count.data(), nullptr);
    herr_t status = H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr,
                                        count.data(), nullptr);
    if (status >= 0) {
      void* under = dataset.under;
      hid_t mem_space_id = mem_space, file_space_id = file_space;
      void* buf = staging.data();
      hid_t type = mem_type;
      status = H5VLdataset_read(1, &under, dataset.under_vol_id, &type, &mem_space_id,
                                &file_space_id, H5P_DATASET_XFER_DEFAULT, &buf, nullptr);
    }
    H5Sclose(mem_space);
    H5Sclose(file_space);
    if (status < 0) return cache::Status::IoError("reading rows through HDF5 failed");
    for (std::size_t k = i; k < j; ++k) {
      std::memcpy(dest[k], staging.data() + (k - i) * row_bytes_, row_bytes_);
    }
    if (counters != nullptr) {
      ++counters->reads;
      counters->bytes += count[0] * row_bytes_;
    }
    i = j;
  }
  return cache::Status::Ok();
}

}  // namespace prescient::vol
