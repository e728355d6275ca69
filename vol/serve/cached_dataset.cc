#include "vol/serve/cached_dataset.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <stdexcept>
#include <variant>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "vol/hdf5_ids.h"
#include "vol/objects/fingerprint.h"
#include "vol/serve/file_handles.h"
#include "vol/serve/raw_layout_hdf5.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// A dataset is grouped when its rows are at most this share of a block...
constexpr std::uint64_t kGroupRowShareOfBlock = 2;
// ...and either all of it is at most this share of the cache (its entries
// then stay resident: kept as needed right away with a schedule), or its
// rows would not fit the cache a block each. Cached a row to a block, a time
// series of 64-byte steps took 64 times its size: a cache a quarter of it
// held 0.4% of its rows, and every window read missed (0.89-0.97x native;
// RESULTS.md, "Sliding windows over a time series"). Rows that fit a block
// each stay one to an entry, each keyed by its own next use.
constexpr std::uint64_t kResidentDatasetShareOfCache = 16;
// A grouped entry holds about this many bytes of rows (at least a block):
// what native HDF5's sieve buffer reads around a small read anyway, so a
// miss reads no more than native would, and a hit copies only the rows it
// asks for (cache::RowParts). Entries of one block made a sample stored as a
// dataset of its own 64 entries for 256 KiB, and the cache's work per entry
// (lookup, eviction order, the loader's planning) 64 times a sample's.
constexpr std::uint64_t kGroupEntryBytes = CachedDataset::kHdf5DefaultSieveBytes;

// Rows per entry of a grouped dataset: entries of at most `entry_bytes`, as
// few as that allows and of equal size, so the last one is not mostly empty
// (every entry takes the blocks of a full one).
std::uint64_t GroupedRowsPerEntry(std::uint64_t num_rows, std::uint64_t row_bytes,
                                  std::uint64_t entry_bytes) {
  const std::uint64_t most =
      std::max<std::uint64_t>(1, std::min(num_rows, entry_bytes / row_bytes));
  const std::uint64_t entries = (num_rows + most - 1) / most;
  return entries == 0 ? 1 : (num_rows + entries - 1) / entries;
}

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::shared_ptr<CachedDataset> CachedDataset::Prepare(const VolObject& dataset,
                                                      const DatasetState& state,
                                                      VirtualCaching cache_virtual,
                                                      std::string* why_not) {
  if (dataset.file == nullptr) throw std::runtime_error("its file is unknown");
  return Prepare(UnderDataset(dataset), dataset.file, state, cache_virtual, why_not);
}

std::shared_ptr<CachedDataset> CachedDataset::Prepare(const DatasetQueries& dataset,
                                                      const std::shared_ptr<FileState>& file,
                                                      const DatasetState& state,
                                                      VirtualCaching cache_virtual,
                                                      std::string* why_not) {
  StoredRows stored = ReadStoredRows(dataset, file.get(), state, cache_virtual);
  if (stored.bytes_elsewhere) {
    if (why_not != nullptr) *why_not = std::move(stored.elsewhere_reason);
    return nullptr;
  }
  cache::DatasetKey key{state.identity().hash[0], state.identity().hash[1]};
  if (stored.sources) {
    // Other sources, another dataset to the cache (in every process).
    Fingerprint mixed;
    mixed.AddValue(key.hi);
    mixed.AddValue(key.lo);
    mixed.AddValue(stored.sources->fingerprint());
    const std::array<std::uint64_t, 2> both = mixed.Finish();
    key = cache::DatasetKey{both[0], both[1]};
  }
  Facts facts{.key = key,
              .description = state.identity().description,
              .name = state.identity().name,
              .row_bytes = state.row_bytes(),
              .chunk_rows = stored.chunk_rows,
              .dims = state.dims(),
              .layout = nullptr,
              .source = nullptr};
  if (stored.layout.ok()) {
    facts.layout = std::make_shared<const io::RawLayout>(std::move(stored.layout.value()));
    facts.source = std::move(stored.source);
  }
  std::shared_ptr<CachedDataset> cached = FromFacts(std::move(facts), file);
  if (!stored.layout.ok()) cached->raw_reason_ = stored.layout.status().message();
  cached->sources_ = std::move(stored.sources);
  return cached;
}

CachedDataset::Facts CachedDataset::facts() const {
  return {.key = key_,
          .description = description_,
          .name = name_,
          .row_bytes = row_bytes_,
          .chunk_rows = chunk_rows_,
          .dims = dims_,
          .layout = layout_,
          .source = rows_elsewhere_ ? source_ : nullptr};
}

std::shared_ptr<CachedDataset> CachedDataset::FromFacts(Facts facts,
                                                        const std::shared_ptr<FileState>& file) {
  auto cached = std::make_shared<CachedDataset>();
  cached->key_ = facts.key;
  cached->description_ = std::move(facts.description);
  cached->path_ = file->name;
  cached->name_ = std::move(facts.name);
  cached->file_identity_ = file->identity;
  cached->FileUnchangedAt(file->identified_ns);
  cached->row_bytes_ = facts.row_bytes;
  cached->dims_ = std::move(facts.dims);
  cached->num_rows_ = cached->dims_.empty() ? 0 : cached->dims_[0];
  cached->chunk_rows_ = facts.chunk_rows;
  cached->layout_ = std::move(facts.layout);
  if (cached->layout_) {
    cached->rows_elsewhere_ = facts.source != nullptr;
    cached->source_ =
        cached->rows_elsewhere_ ? std::move(facts.source) : FileHandles::Get().Source(*file);
  }
  return cached;
}

cache::Status CachedDataset::Register(cache::NodeCache& cache, std::uint64_t block_bytes,
                                      std::optional<std::uint64_t> fixed_gap,
                                      std::uint64_t miss_window_bytes) {
  if (registered()) return cache::Status::Ok();
  const std::uint64_t capacity = cache.Stats().capacity_bytes;
  if (row_bytes_ > 0 && row_bytes_ * kGroupRowShareOfBlock <= block_bytes) {
    const bool resident = row_bytes_ * num_rows_ <= capacity / kResidentDatasetShareOfCache;
    const bool a_block_each_fits = num_rows_ <= capacity / std::max<std::uint64_t>(1, block_bytes);
    if (resident || !a_block_each_fits) {
      rows_per_entry_ =
          GroupedRowsPerEntry(num_rows_, row_bytes_, std::max(block_bytes, kGroupEntryBytes));
      entries_stay_resident_ = resident && grouped();
    }
  }
  cache::DatasetKey key = key_;
  if (rows_per_entry_ > 1) key.lo ^= rows_per_entry_ * 0x9e3779b97f4a7c15ull;  // another geometry
  cache::Result<cache::DatasetSlot> slot = cache.RegisterDataset(key, entry_bytes(), num_entries());
  if (!slot.ok()) return slot.status();
  if (fixed_gap) coalescing_.max_gap_bytes = *fixed_gap;
  miss_coalescing_ = coalescing_;
  miss_coalescing_.read_window_bytes = miss_window_bytes;
  // Contiguous rows: an entry's rows are adjacent in the file, so whole
  // entries load as rows of entry_bytes(), planned entry by entry, not row
  // by row (a label entry is 8,192 rows).
  const auto* contiguous = layout_ ? std::get_if<io::ContiguousLayout>(layout_.get()) : nullptr;
  if (rows_per_entry_ > 1 && contiguous != nullptr && num_rows_ >= rows_per_entry_) {
    io::ContiguousLayout entries = *contiguous;
    entries.row_bytes = entry_bytes();
    entries.num_rows = num_rows_ / rows_per_entry_;
    entry_layout_ = std::make_shared<const io::RawLayout>(std::move(entries));
  }
  slot_ = slot.value();
  return cache::Status::Ok();
}

cache::Status CachedDataset::LoadEntries(const VolObject* dataset,
                                         std::span<const std::uint64_t> entries,
                                         std::span<std::byte* const> dest,
                                         LoadCounters* counters) const noexcept {
  try {
    const io::PosixFile* borrowed = layout_ ? BorrowedFile(dataset) : nullptr;
    const io::RandomAccessSource* source = borrowed;
    if (source == nullptr) source = source_.get();
    std::size_t by_rows = 0;  // entries[by_rows...] load row by row
    if (entry_layout_) {
      const std::uint64_t whole = std::get<io::ContiguousLayout>(*entry_layout_).num_rows;
      while (by_rows < entries.size() && entries[by_rows] < whole) ++by_rows;
      if (by_rows > 0) {
        PRESCIENT_RETURN_IF_ERROR(LoadRaw(*entry_layout_, *source, entries.first(by_rows),
                                          dest.first(by_rows), counters));
      }
      entries = entries.subspan(by_rows);
      dest = dest.subspan(by_rows);
      if (entries.empty()) return cache::Status::Ok();
    }
    std::vector<std::uint64_t> rows;
    std::vector<std::byte*> targets;
    if (rows_per_entry_ == 1) {
      rows.assign(entries.begin(), entries.end());
      targets.assign(dest.begin(), dest.end());
    } else {
      rows.reserve(entries.size() * rows_per_entry_);
      targets.reserve(entries.size() * rows_per_entry_);
      for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::uint64_t first = entries[i] * rows_per_entry_;
        const std::uint64_t end = std::min(num_rows_, first + rows_per_entry_);
        for (std::uint64_t r = first; r < end; ++r) {
          rows.push_back(r);
          targets.push_back(dest[i] + (r - first) * row_bytes_);
        }
        // The last entry's rows past the end of the dataset.
        std::memset(dest[i] + (end - first) * row_bytes_, 0,
                    (first + rows_per_entry_ - end) * row_bytes_);
      }
    }
    if (layout_) return LoadRaw(*layout_, *source, rows, targets, counters);
    if (dataset == nullptr)
      return cache::Status::Unsupported("rows of this dataset load only through HDF5");
    return LoadThroughHdf5(*dataset, rows, targets, counters);
  } catch (const std::exception& e) {
    return cache::Status::Internal(std::string("loading rows: ") + e.what());
  } catch (...) {
    return cache::Status::Internal("loading rows: unknown exception");
  }
}

const io::PosixFile* CachedDataset::BorrowedFile(const VolObject* dataset) const noexcept {
  if (rows_elsewhere_ || dataset == nullptr || dataset->file == nullptr ||
      dataset->file->hdf5_file == nullptr) {
    return nullptr;
  }
  // (A borrowed descriptor's file always has a valid identity: FileState::Make.)
  const FileIdentity& of = dataset->file->identity;
  const bool same = file_identity_.valid && of.device == file_identity_.device &&
                    of.inode == file_identity_.inode;
  return same ? dataset->file->hdf5_file.get() : nullptr;
}

cache::Status CachedDataset::LoadRaw(const io::RawLayout& layout,
                                     const io::RandomAccessSource& source,
                                     std::span<const std::uint64_t> rows,
                                     std::span<std::byte* const> dest,
                                     LoadCounters* counters) const {
  io::Result<io::ReadPlan> plan = io::PlanReads(layout, rows, miss_coalescing_);
  if (!plan.ok()) return plan.status();
  const io::RowTargetFn target = io::RowTargetsFromArrays(rows, dest);
  for (const io::ReadTask& task : plan.value().tasks) {
    io::Status status = io::LoadTask(layout, source, task, target);
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
                                &file_space_id, hdf5::DefaultTransferList(), &buf, nullptr);
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

cache::Status CachedDataset::ReadSelectedRowsThroughHdf5(const VolObject& dataset, hid_t file_space,
                                                         std::uint64_t first_row,
                                                         std::uint64_t last_row,
                                                         std::uint64_t elements,
                                                         void* out) const noexcept try {
  if (dataset.dataset == nullptr || first_row > last_row || last_row >= num_rows_ ||
      dims_.empty()) {
    return cache::Status::InvalidArgument("rows outside the dataset");
  }
  // The read's selection narrowed to the rows: a hyperslab ANDed with a slab
  // keeps its order (HDF5 transfers a hyperslab's elements in row-major
  // order), so the elements come out as the whole read would place them.
  std::vector<hsize_t> start(dims_.size(), 0), count(dims_);
  start[0] = first_row;
  count[0] = last_row - first_row + 1;
  const hid_t space = H5Scopy(file_space);
  if (space < 0) return cache::Status::Internal("cannot copy the read's file selection");
  const hsize_t mem_elements = elements;
  const hid_t mem_space = H5Screate_simple(1, &mem_elements, nullptr);
  hid_t mem_type = dataset.dataset->NewStoredTypeId();
  herr_t status = mem_space < 0 || mem_type < 0 ? -1 : 0;
  if (status >= 0) {
    status =
        H5Sselect_hyperslab(space, H5S_SELECT_AND, start.data(), nullptr, count.data(), nullptr);
  }
  // Never a read of other elements than the ones expected.
  if (status >= 0 && H5Sget_select_npoints(space) != static_cast<hssize_t>(elements)) status = -1;
  if (status >= 0) {
    void* under = dataset.under;
    hid_t mem_space_id = mem_space, file_space_id = space;
    status = H5VLdataset_read(1, &under, dataset.under_vol_id, &mem_type, &mem_space_id,
                              &file_space_id, hdf5::DefaultTransferList(), &out, nullptr);
  }
  if (mem_type >= 0) H5Tclose(mem_type);
  if (mem_space >= 0) H5Sclose(mem_space);
  H5Sclose(space);
  if (status < 0) return cache::Status::IoError("reading rows' parts through HDF5 failed");
  return cache::Status::Ok();
} catch (const std::bad_alloc&) {
  return cache::Status::ResourceExhausted("reading rows' parts: out of memory");
}

void CachedDataset::FileUnchangedAt(std::int64_t checked_ns) const noexcept {
  const std::int64_t due = checked_ns + std::chrono::nanoseconds(kChangeCheckInterval).count();
  std::int64_t current = next_check_ns_.load(std::memory_order_relaxed);
  while (current < due && !next_check_ns_.compare_exchange_weak(current, due)) {
  }
}

bool CachedDataset::NarrowPartsPay(std::span<const std::uint64_t> rows, std::uint64_t part_bytes,
                                   const cache::CacheStats& stats) const {
  bool asked_enough = false;
  {
    cache::MutexLock lock(&evidence_mutex_);
    if (!evidence_) evidence_.emplace(num_rows_, row_bytes_);
    asked_enough = evidence_->NoteAndCheck(rows, part_bytes);
  }
  return asked_enough && RowsStayCached(stats);
}

bool CachedDataset::FileChanged(const VolObject* dataset) const noexcept {
  if (changed_.load(std::memory_order_acquire)) return true;
  if (!check_every_read_.load(std::memory_order_relaxed)) {
    const std::int64_t now = NowNs();
    std::int64_t due = next_check_ns_.load(std::memory_order_relaxed);
    if (now < due) return false;
    // One thread re-checks; the others go on with the last verdict.
    if (!next_check_ns_.compare_exchange_strong(
            due, now + std::chrono::nanoseconds(kChangeCheckInterval).count())) {
      return false;
    }
  }
  if (!file_identity_.valid) return false;
  const io::PosixFile* borrowed = BorrowedFile(dataset);
  const io::Result<FileIdentity> now_identity =
      borrowed != nullptr
          ? IdentityNow(*borrowed)
          : FileHandles::Get().Stat(path_, file_identity_.device, file_identity_.inode);
  const bool changed = !now_identity.ok() || !SameVersion(now_identity.value(), file_identity_);
  std::optional<std::string> changed_source;
  if (!changed && sources_) changed_source = sources_->FirstChanged();
  if (!changed && !changed_source) return false;
  NoteChanged(changed ? path_ : *changed_source);
  return true;
}

bool CachedDataset::SourcesChanged(std::uint64_t open_serial, std::uint64_t first_row,
                                   std::uint64_t last_row) const noexcept {
  if (!sources_) return false;
  if (changed_.load(std::memory_order_acquire)) return true;
  const std::optional<std::string> changed =
      sources_->ChangedForRows(open_serial, first_row, last_row);
  if (!changed) return false;
  NoteChanged(*changed);
  return true;
}

void CachedDataset::NoteChanged(const std::string& file) const noexcept {
  try {
    cache::MutexLock lock(&changed_file_mutex_);
    if (changed_file_.empty()) changed_file_ = file;
  } catch (...) {
  }
  changed_.store(true, std::memory_order_release);
}

std::string CachedDataset::changed_file() const {
  cache::MutexLock lock(&changed_file_mutex_);
  return changed_file_.empty() ? path_ : changed_file_;
}

}  // namespace prescient::vol
