#include "vol/serve/cache_client.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <numeric>
#include <span>
#include <variant>
#include <vector>

#include "cache/base/mutex.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/runtime/error.h"
#include "vol/runtime/process_anchor.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/schedule/node_ownership.h"

namespace prescient::vol {
namespace {

// Records why a read goes to HDF5 after all, and says so: false, TryServe's
// answer then.
bool Forwarded(ReadRecord* record, ForwardReason reason) {
  record->forward_reason = reason;
  return false;
}

// A read larger than this share of the cache is forwarded: caching it would
// only push out rows that are needed again.
constexpr std::uint64_t kMaxShareOfCache = 4;
// Dataset records a segment gets beyond the schedule's files x fields (other
// datasets the job reads), and at most (BoundFields' table).
constexpr std::uint64_t kDatasetHeadroom = 4096;
constexpr std::uint64_t kMaxDatasets = 1ull << 22;

void RowsInTransferOrder(const RowSelection& selection, std::vector<std::uint64_t>& rows) {
  rows.clear();
  // A run at a time: a group read whole is one run of hundreds of rows.
  selection.ForEachRun([&rows](const RowRun& run) {
    const std::size_t at = rows.size();
    rows.resize(at + run.count);
    std::iota(rows.begin() + static_cast<std::ptrdiff_t>(at), rows.end(), run.first);
  });
}

// Whether `rows` (in transfer order) are every row of consecutive entries,
// ascending, each entry wholly inside the dataset: then entry i of the read
// is bytes [i * entry_bytes, (i + 1) * entry_bytes) of the caller's buffer.
bool WholeEntriesInOrder(std::span<const std::uint64_t> rows, const CachedDataset& cached) {
  const std::uint64_t g = cached.rows_per_entry();
  if (rows.empty() || rows.front() % g != 0 || rows.size() % g != 0 ||
      rows.front() + rows.size() > cached.num_rows()) {
    return false;
  }
  for (std::size_t k = 1; k < rows.size(); ++k) {
    if (rows[k] != rows[k - 1] + 1) return false;
  }
  return true;
}

// Bytes grown on demand and never value-initialised: a read of row parts
// copies its rows' parts (or whole loaded rows) into row-sized places here and
// cuts the parts out; zeroing 20 MB for a 3-D patch that takes 2 MB of it
// cost more than the copies.
class UninitializedBytes {
 public:
  std::byte* Get(std::size_t bytes) {
    if (bytes > capacity_) {
      data_.reset();
      data_.reset(new std::byte[bytes]);  // default-initialised: not zeroed
      capacity_ = bytes;
    }
    return data_.get();
  }
  std::byte* data() const { return data_.get(); }
  std::size_t capacity() const { return capacity_; }
  void Release() {
    data_.reset();
    capacity_ = 0;
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t capacity_ = 0;
};

// Places [begin, end) of a read's rows in transfer order.
struct PlaceRun {
  std::size_t begin = 0, end = 0;
};

// Working storage of TryServe, reused from read to read so that the hit path
// does not allocate (read callbacks are serialised by HDF5's lock, and a
// thread never serves two reads at once).
// Rows of a grouped read that follow each other within one entry: `bytes`
// from `offset` of the entry (GroupedParts: first its number, then its index
// in the read's entries) go to `out` of the caller's buffer.
struct GroupedPiece {
  std::uint64_t entry = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t out = 0;
};

struct ServeScratch {
  std::vector<std::uint64_t> rows, entries;
  // Of a grouped read: the bytes of each entry it takes (cache::RowParts),
  // and its pieces.
  std::vector<cache::RowPart> ranges;
  std::vector<std::uint32_t> first_range, next_range;
  std::vector<GroupedPiece> pieces;
  std::vector<std::byte> entry_bytes;
  UninitializedBytes whole_rows;  // the rows a read of row parts takes its parts from
  // A narrow read served in part (SplitByResidency): its cached rows, their
  // places in transfer order, and the runs of places read through HDF5.
  std::vector<std::uint8_t> resident;
  std::vector<std::uint64_t> cached_rows;
  std::vector<std::size_t> cached_at;
  std::vector<PlaceRun> through_hdf5;
};

// A row-part buffer larger than this is given back after the read: rows of
// tens of megabytes (a weather model's time step) would stay allocated in
// every worker thread otherwise.
constexpr std::size_t kKeptPartBufferBytes = 64ull << 20;

// A read of row parts copies only the parts of its hits when they are at
// most this many ranges (16 bytes each); a larger one copies whole rows.
constexpr std::size_t kMaxPartRanges = std::size_t{1} << 20;

// Copies the selected part of each row (`part`, in elements of
// `element_bytes`) from consecutive whole rows to `out`, in transfer order;
// with `places`, row k's part to place places[k] of the read (a read served
// in part).
void ScatterRowParts(std::span<const std::byte> rows, std::uint64_t row_bytes,
                     std::span<const ElementRun> part, std::uint64_t element_bytes, std::byte* out,
                     std::span<const std::size_t> places = {}) {
  std::uint64_t part_bytes = 0;
  for (const ElementRun& run : part) part_bytes += run.count * element_bytes;
  std::byte* const base = out;
  for (std::size_t at = 0, k = 0; at < rows.size(); at += row_bytes, ++k) {
    if (!places.empty()) out = base + places[k] * part_bytes;
    for (const ElementRun& run : part) {
      const std::size_t n = run.count * element_bytes;
      std::memcpy(out, rows.data() + at + run.offset * element_bytes, n);
      out += n;
    }
  }
}

// The same part (`part`, in elements of `element_bytes`) of each of `rows`
// rows, as cache::RowParts in scratch.ranges and first_range.
void PartOfEveryRow(std::span<const ElementRun> part, std::uint64_t element_bytes, std::size_t rows,
                    ServeScratch& scratch) {
  scratch.ranges.clear();
  scratch.first_range.clear();
  for (std::size_t i = 0; i < rows; ++i) {
    scratch.first_range.push_back(static_cast<std::uint32_t>(scratch.ranges.size()));
    for (const ElementRun& run : part) {
      scratch.ranges.push_back(
          {.offset = run.offset * element_bytes, .bytes = run.count * element_bytes});
    }
  }
  scratch.first_range.push_back(static_cast<std::uint32_t>(scratch.ranges.size()));
}

// Reads the parts of a narrow read's rows at `runs` (places in transfer
// order) through HDF5, each to its place in `buf`. False, with the
// fallback counted, if one failed.
bool ReadPartsThroughHdf5(const CachedDataset& cached, const VolObject& dataset,
                          const ReadRequest& request, std::uint64_t stored_bytes,
                          std::span<const std::uint64_t> rows, std::span<const PlaceRun> runs,
                          std::byte* buf) {
  const std::uint64_t part_bytes = stored_bytes / rows.size();
  const std::uint64_t part_elements = request.selection.elements / rows.size();
  for (const PlaceRun& run : runs) {
    const cache::Status status = cached.ReadSelectedRowsThroughHdf5(
        dataset, request.file_space, rows[run.begin], rows[run.end - 1],
        (run.end - run.begin) * part_elements, buf + run.begin * part_bytes);
    if (!status.ok()) {
      Runtime::Get().Fallback(Counter::kFallbackServeFailed,
                              "reading the uncached rows of a narrow read through HDF5 failed (" +
                                  status.message() + "); it was forwarded to HDF5 whole");
      return false;
    }
  }
  return true;
}

// A narrow read whose whole rows do not pay (CachedDataset::NarrowPartsPay)
// is served from the rows the cache holds now, and its other rows' parts
// are read through HDF5, a read per run of them: so a cache that keeps only
// some of the rows (smaller than the data, or filled ahead by the prefetch
// leader) serves what it has without loading a whole row for a part.
// Each run costs a read of HDF5's own, so at most this many, and at least
// half the rows cached; otherwise the whole read is forwarded.
constexpr std::size_t kMaxRunsThroughHdf5 = 4;

enum class Residency { kAll, kPart, kTooLittle };

// Which of `rows` (a narrow read's, in transfer order) the cache holds now:
// kPart fills scratch.cached_rows, cached_at and through_hdf5. Rows must
// ascend for kPart (a hyperslab's do), so a run of places is a range of rows.
Residency SplitByResidency(cache::NodeCache& cache, cache::DatasetSlot slot,
                           std::span<const std::uint64_t> rows, ServeScratch& scratch) {
  scratch.cached_rows.clear();
  scratch.cached_at.clear();
  scratch.through_hdf5.clear();
  scratch.resident.resize(rows.size());
  const std::size_t resident = cache.Resident(slot, rows, scratch.resident);
  if (resident == rows.size()) return Residency::kAll;
  if (2 * resident < rows.size()) return Residency::kTooLittle;
  for (std::size_t k = 0; k < rows.size(); ++k) {
    if (k > 0 && rows[k] <= rows[k - 1]) return Residency::kTooLittle;
    if (scratch.resident[k] != 0) {
      scratch.cached_rows.push_back(rows[k]);
      scratch.cached_at.push_back(k);
    } else if (!scratch.through_hdf5.empty() && scratch.through_hdf5.back().end == k) {
      scratch.through_hdf5.back().end = k + 1;
    } else if (scratch.through_hdf5.size() == kMaxRunsThroughHdf5) {
      return Residency::kTooLittle;
    } else {
      scratch.through_hdf5.push_back({k, k + 1});
    }
  }
  return Residency::kPart;
}

// The entries holding `rows` into scratch.entries (ascending, distinct), the
// read's pieces into scratch.pieces (runs of rows that follow each other
// within one entry, in transfer order: Phase 5 copies each with one memcpy),
// and the bytes the read takes of each entry into scratch.ranges and
// first_range (cache::RowParts: labels read out of 64 KiB of labels copy
// their rows from a hit, not the entry; pieces that continue each other in an
// entry are one range). The work is per piece, not per row: a slice of a
// 1-D dataset of 4-byte elements (a sparse matrix's `indices[a:b]`, a window
// of tokens) is thousands of rows in one or two pieces; done row by row, it
// cost more than the read (RESULTS.md, "h5torch").
void GroupedParts(std::span<const std::uint64_t> rows, const CachedDataset& cached,
                  ServeScratch& scratch) {
  const std::uint64_t g = cached.rows_per_entry();
  const std::uint64_t row_bytes = cached.row_bytes();
  std::vector<GroupedPiece>& pieces = scratch.pieces;
  pieces.clear();
  for (std::size_t i = 0; i < rows.size();) {
    const std::uint64_t entry = rows[i] / g;
    const std::uint64_t entry_end = (entry + 1) * g;
    std::size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1 && rows[j] < entry_end) ++j;
    pieces.push_back({.entry = entry,
                      .offset = (rows[i] % g) * row_bytes,
                      .bytes = (j - i) * row_bytes,
                      .out = i * row_bytes});
    i = j;
  }
  std::vector<std::uint64_t>& entries = scratch.entries;
  for (const GroupedPiece& piece : pieces) entries.push_back(piece.entry);
  if (!std::is_sorted(entries.begin(), entries.end())) std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  std::vector<std::uint32_t>& first = scratch.first_range;
  std::vector<std::uint32_t>& next = scratch.next_range;
  first.assign(entries.size() + 1, 0);
  for (GroupedPiece& piece : pieces) {
    // From here on, the piece's entry is its index into `entries`.
    piece.entry = static_cast<std::uint64_t>(
        std::lower_bound(entries.begin(), entries.end(), piece.entry) - entries.begin());
    ++first[piece.entry + 1];
  }
  // Each entry's pieces in transfer order, then merged where they continue.
  std::partial_sum(first.begin(), first.end(), first.begin());
  next.assign(first.begin(), first.end() - 1);
  std::vector<cache::RowPart>& ranges = scratch.ranges;
  ranges.resize(pieces.size());
  for (const GroupedPiece& piece : pieces) {
    ranges[next[piece.entry]++] = {piece.offset, piece.bytes};
  }
  std::uint32_t kept = 0;
  for (std::size_t e = 0; e + 1 < first.size(); ++e) {
    const std::uint32_t begin = first[e], end = first[e + 1];
    first[e] = kept;
    for (std::uint32_t k = begin; k < end; ++k) {
      if (kept > first[e] && ranges[kept - 1].offset + ranges[kept - 1].bytes == ranges[k].offset) {
        ranges[kept - 1].bytes += ranges[k].bytes;
      } else {
        ranges[kept++] = ranges[k];
      }
    }
  }
  first.back() = kept;
  ranges.resize(kept);
}

// Read-around: the other rows of every slab (CachedDataset::slab_rows) a
// miss touches, which a cold epoch will ask for anyway. Returns those rows
// not in `missing` (ascending), capped.
std::vector<std::uint64_t> SlabMates(const CachedDataset& cached,
                                     std::span<const std::uint64_t> missing) {
  constexpr std::uint64_t kMaxReadAroundBytes = 64ull << 20;
  std::vector<std::uint64_t> extra;
  const std::uint64_t rows_per_slab = cached.slab_rows();
  if (rows_per_slab <= 1) return extra;
  const std::uint64_t budget = std::max<std::uint64_t>(
      1, kMaxReadAroundBytes / std::max<std::uint64_t>(1, cached.row_bytes()));
  std::uint64_t last_slab = UINT64_MAX;
  std::size_t next_missing = 0;
  for (std::uint64_t row : missing) {
    const std::uint64_t slab = row / rows_per_slab;
    if (slab == last_slab) continue;
    last_slab = slab;
    const std::uint64_t end = std::min(cached.num_rows(), (slab + 1) * rows_per_slab);
    for (std::uint64_t r = slab * rows_per_slab; r < end && extra.size() < budget; ++r) {
      while (next_missing < missing.size() && missing[next_missing] < r) ++next_missing;
      if (next_missing < missing.size() && missing[next_missing] == r) continue;
      extra.push_back(r);
    }
  }
  return extra;
}

// Tells the admission thread how it takes a newly registered dataset's rows:
// small rows cached several to an entry are left to their readers; others
// it reads again itself when `read_again` (PRESCIENT_ADMIT_READ_AGAIN) and
// their layout allows.
void ShareWithAdmission(AdmissionWorker& admission, const std::shared_ptr<CachedDataset>& cached,
                        bool read_again) {
  if (cached->grouped()) {
    admission.LeaveToReaders(cached->slot());
    return;
  }
  if (AdmissionWorker::RowsReadAgainCheaply(*cached)) admission.MayLeaveUnkept(cached->slot());
  if (read_again) admission.ReadRowsAgainFrom(cached->slot(), cached);
}

// How a dataset's misses load, for the info log.
std::string LoadingNote(const CachedDataset& cached) {
  if (!cached.raw_layout()) return "reads through HDF5: " + cached.raw_reason();
  std::string note =
      "raw reads, coalescing gap " + std::to_string(cached.coalescing().max_gap_bytes) + " bytes";
  if (cached.grouped()) {
    note += "; small rows cached " + std::to_string(cached.rows_per_entry()) + " to an entry";
  }
  return note;
}

// A virtual dataset's source files behind the entries these rows are in
// (what a miss loads and a hit serves), looked at once per open of it.
bool SourcesChangedFor(const CachedDataset& cached, const VolObject& dataset,
                       std::span<const std::uint64_t> rows) {
  if (rows.empty() || dataset.dataset == nullptr) return false;
  const auto [low, high] = std::minmax_element(rows.begin(), rows.end());
  const std::uint64_t per_entry = cached.rows_per_entry();
  const std::uint64_t first = *low / per_entry * per_entry;
  const std::uint64_t last =
      std::min(cached.num_rows() - 1, (*high / per_entry + 1) * per_entry - 1);
  return cached.SourcesChanged(dataset.dataset->open_serial(), first, last);
}

}  // namespace

CacheClient& CacheClient::Get() {
  static CacheClient* client = new CacheClient();  // never destroyed: used from HDF5's atexit
  return *client;
}

CacheClient::CacheClient() {
  ::pthread_atfork(&CacheClient::AtForkPrepare, &CacheClient::AtForkParent,
                   &CacheClient::AtForkChild);
}

// fork() (a DataLoader starting its workers) runs no work of Prescient's:
// the segment was opened, the datasets registered and the schedule bound when
// the datasets were opened. The handlers only make the locks consistent: they
// are taken before fork() (no thread of the parent is then inside the state
// they guard, inside the schedule reader, or inside HDF5 resolving a dataset
// for the prefetch leader) and released on both sides.
void CacheClient::AtForkPrepare() {
  DatasetResolver::LockForFork();  // first: a resolution holds HDF5's lock, and none of ours
  CacheClient& client = Get();
  client.mutex_.Lock();
  if (client.admission_) client.admission_->LockForFork();
  if (ScheduleFollower* follower = client.follower_.load()) follower->LockForFork();
  if (client.cache_) client.cache_->LockForFork();  // last: a leaf
}

void CacheClient::AtForkParent() {
  CacheClient& client = Get();
  if (client.cache_) client.cache_->UnlockAfterFork();
  if (ScheduleFollower* follower = client.follower_.load()) follower->UnlockAfterFork();
  if (client.admission_) client.admission_->UnlockAfterFork();
  client.mutex_.Unlock();
  DatasetResolver::UnlockAfterFork();
}

void CacheClient::AtForkChild() {
  CacheClient& client = Get();
  if (client.cache_) client.cache_->UnlockAfterFork();
  if (ScheduleFollower* follower = client.follower_.load()) follower->UnlockAfterFork();
  if (client.admission_) {
    client.admission_->UnlockAfterFork();
    client.admission_->ForgetAfterForkInChild();
  }
  client.mutex_.Unlock();
  DatasetResolver::AfterForkInChild();
  DatasetResolver::UnlockAfterFork();
}

std::unique_ptr<cache::NodeCache> CacheClient::ExchangeSegmentForTesting(
    std::unique_ptr<cache::NodeCache> segment) {
  cache::MutexLock lock(&mutex_);
  if (admission_) admission_->Drain();
  std::swap(cache_, segment);
  if (admission_) admission_->Attach(cache_.get());
  return segment;
}

void CacheClient::DrainAdmissions() noexcept {
  cache::MutexLock lock(&mutex_);
  if (admission_) admission_->Drain();
}

void CacheClient::Shutdown() noexcept {
  cache::MutexLock lock(&mutex_);
  // Rows waiting for the admission thread are published while everything
  // they need is still there.
  if (admission_) admission_->Drain();
  // Terminate holds HDF5's lock: a prefetch thread resolving a dataset waits
  // for it, and is left running (its follower never freed) rather than
  // joined, which would hang the application's exit.
  constexpr auto kCaller = StopCaller::kHoldingHdf5Lock;
  if (follower_owner_ && !follower_owner_->Stop(kCaller)) (void)follower_owner_.release();
  for (Retired& retired : retired_) {
    if (retired.follower && (retired.pid != ::getpid() || !retired.follower->Stop(kCaller))) {
      (void)retired.follower.release();
    }
  }
  retired_.clear();  // each has joined its prefetch thread
  datasets_.clear();
  open_attempted_ = true;  // no reopening during shutdown
  // The follower (whose oracle the segment's users may still hold) and the
  // segment go together, the follower first.
  follower_.store(nullptr);
  follower_owner_.reset();
  cache_.reset();
}

cache::CacheOptions CacheClient::SegmentOptions(const Options& options,
                                                const ScheduleBinding* binding) {
  cache::CacheOptions cache_options = options.cache;
  if (binding != nullptr) {
    const std::uint64_t mapped =
        binding->map().files().size() * binding->map().fields().size() + kDatasetHeadroom;
    cache_options.max_datasets = static_cast<std::uint32_t>(
        std::clamp<std::uint64_t>(mapped, cache::DatasetTableFor(cache_options), kMaxDatasets));
  }
  return cache_options;
}

cache::NodeCache* CacheClient::OpenCacheLocked() {
  if (cache_ || open_attempted_) return cache_.get();
  open_attempted_ = true;
  Runtime& runtime = Runtime::Get();
  const Options& options = runtime.options();
  if (!options.enable || !options.cache_enabled) return nullptr;
  // The schedule first: a sample map over many files needs a dataset record
  // for each of its files' fields, and the segment's table is sized at creation.
  std::shared_ptr<ScheduleBinding> binding;
  if (!options.follow) {
    binding = ScheduleFollower::OpenBinding(options);
  } else if (!options.schedule_path.empty()) {
    // Not there yet is normal: the follower publishes it when an epoch starts.
    watch_ = std::make_unique<ScheduleWatch>(options.schedule_path);
    if (watch_->Changed()) binding = ScheduleFollower::OpenBinding(options);
  }
  cache::CacheOptions cache_options = SegmentOptions(options, binding.get());
  cache_options.anchor = SegmentAnchor();
  cache_options.keeper_executable = KeeperExecutable();
  cache::Result<std::unique_ptr<cache::NodeCache>> opened = cache::NodeCache::Open(cache_options);
  if (!opened.ok()) {
    runtime.Log(LogLevel::kWarn, "the node cache is unavailable (" + opened.status().message() +
                                     "); reads are forwarded to HDF5 uncached");
    return nullptr;
  }
  cache_ = std::move(opened.value());
  // What opening it took that the user should hear of (a leftover replaced,
  // another user's file at our names, the cache directory on a disk, no
  // keeper installed): once per process that opens it, as a warning.
  for (const std::string& notice : cache_->notices()) runtime.Log(LogLevel::kWarn, notice);
  capacity_bytes_ = cache_->Stats().capacity_bytes;
  if (options.admit_behind_bytes > 0) {
    admission_ = std::make_unique<AdmissionWorker>(
        AdmissionWorkerOptions{.budget_bytes = options.admit_behind_bytes,
                               .only_on_spare_cpu = !options.admit_behind_always,
                               .busy_unkept_run_bytes = options.busy_unkept_run_bytes});
    admission_->Attach(cache_.get());
  }
  runtime.Log(LogLevel::kInfo, "node cache " + cache_->path() + " open");
  node_snapshot_.Take(*cache_, runtime.stats());
  // Only a job that prefetches by a schedule reads the memo.
  if (options.follow || !options.schedule_path.empty())
    memo_ = std::make_unique<ResolutionMemo>(cache_->memo_path());
  follower_owner_ = ScheduleFollower::Create(
      std::move(binding), options, *cache_,
      [this](auto prepared) { return Adopt(std::move(prepared)); }, memo_.get());
  follower_.store(follower_owner_.get());
  return cache_.get();
}

std::shared_ptr<CachedDataset> CacheClient::PreparedLocked(const VolObject& dataset) {
  const DatasetState* state = dataset.dataset.get();
  const Identity key{state->identity().hash[0], state->identity().hash[1]};
  auto it = datasets_.find(key);
  if (it != datasets_.end()) {
    // The same identity from a fresh open: the file was unchanged when it was opened.
    if (it->second && dataset.file != nullptr) {
      it->second->FileUnchangedAt(dataset.file->identified_ns);
      if (dataset.file->swmr_read) it->second->CheckEveryRead();
    }
    return it->second;
  }
  std::shared_ptr<CachedDataset> cached;
  try {
    std::string why_not;
    cached =
        CachedDataset::Prepare(dataset, *state, Runtime::Get().options().cache_virtual, &why_not);
    if (cached != nullptr && cached->virtual_dataset()) {
      Runtime::Get().stats().Add(cached->raw_layout() ? Counter::kVirtualDatasetsRaw
                                                      : Counter::kVirtualDatasetsViaHdf5);
    }
    if (cached != nullptr && !cached->raw_layout()) {
      Runtime::Get().stats().Add(Counter::kDatasetsViaHdf5);
      Runtime::Get().Log(LogLevel::kInfo, "caching " + state->identity().description +
                                              ", its rows loaded through HDF5 (" +
                                              cached->raw_reason() + ")");
    }
    if (cached == nullptr && !why_not.empty()) {
      Runtime::Get().Log(LogLevel::kInfo, "not caching " + state->identity().description + " (" +
                                              why_not + "): its reads are forwarded");
    }
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kWarn,
                       "not caching " + state->identity().description + ": " + e.what());
  }
  if (cached && dataset.file != nullptr && dataset.file->swmr_read) cached->CheckEveryRead();
  if (cached && cached->raw_layout() && memo_ && follower_.load() == nullptr) {
    // While a followed sampler is being learned (no schedule yet), for the
    // prefetch leader of the first followed epoch (a group per sample: the
    // groups this worker opens), written in batches. Later epochs' workers,
    // new each epoch, would only write the same records again: the leaders
    // remember what they resolve.
    memo_->Remember(state->identity().name, *cached);
    memo_->Flush(/*batched=*/true);
  }
  datasets_.emplace(key, cached);  // a failure is remembered too: warn once
  return cached;
}

bool CacheClient::RegisterLocked(const std::shared_ptr<CachedDataset>& cached) {
  if (cached->registered()) return true;
  Runtime& runtime = Runtime::Get();
  const cache::Status status =
      cached->Register(*cache_, runtime.options().cache.block_bytes, runtime.options().coalesce_gap,
                       MissReadWindowBytes(runtime.options()));
  if (!status.ok()) {
    const Identity key{cached->key().hi, cached->key().lo};
    if (status.code() == cache::Status::Code::kResourceExhausted) {
      // A full dataset table stays full: one warning for the process, and
      // each dataset is tried once (datasets_ remembers it as uncacheable).
      datasets_[key] = nullptr;
      if (!warned_table_full_) {
        warned_table_full_ = true;
        runtime.Log(LogLevel::kWarn, "not caching " + cached->description() +
                                         " and further new datasets: " + status.message());
      }
      return false;
    }
    if (status.code() == cache::Status::Code::kInvalidArgument) datasets_[key] = nullptr;
    runtime.Log(LogLevel::kWarn, "not caching " + cached->description() + ": " + status.message());
    return false;
  }
  runtime.Log(LogLevel::kInfo,
              "caching " + cached->description() + " (" + LoadingNote(*cached) + ")");
  if (admission_) ShareWithAdmission(*admission_, cached, runtime.options().admit_read_again);
  if (ScheduleFollower* follower = follower_.load()) follower->OnRegistered(cached);
  return true;
}

std::shared_ptr<CachedDataset> CacheClient::Adopt(std::shared_ptr<CachedDataset> prepared) {
  cache::MutexLock lock(&mutex_);
  if (!cache_) return nullptr;
  const Identity key{prepared->key().hi, prepared->key().lo};
  const auto it = datasets_.try_emplace(key, prepared).first;
  if (it->second == nullptr) return nullptr;  // known as not cacheable
  // Registered the way a dataset the job opens is, the current follower
  // binding it before the lock is let go. A dataset registered here but bound
  // only by the caller, later, was for that moment visible to the job's reads
  // unbound (read without the schedule: a followed epoch came up one match
  // short), and one adopted by a follower just retired was never bound to
  // the one that replaced it.
  std::shared_ptr<CachedDataset> cached = it->second;
  return RegisterLocked(cached) ? cached : nullptr;
}

void CacheClient::DatasetOpened(const VolObject& dataset) noexcept {
  try {
    const DatasetState* state = dataset.dataset.get();
    if (state == nullptr || !state->fixed_size() || state->changed() || dataset.file == nullptr ||
        dataset.file->writable || state->dims().empty() ||
        !Runtime::Get().options().cache_enabled) {
      return;
    }
    // Everything happens now, in the callback: the HDF5 work of preparing the
    // dataset, opening the node's segment, registering the dataset and
    // binding the schedule. A DataLoader's main process, which opens the
    // dataset only to ask its length, is then attached before it forks its
    // workers (so the segment outlives each generation of them), and fork()
    // itself has nothing left to do.
    cache::MutexLock lock(&mutex_);
    std::shared_ptr<CachedDataset> cached = PreparedLocked(dataset);
    if (cached && OpenCacheLocked() != nullptr) RegisterLocked(cached);
  } catch (...) {
  }
}

bool CacheClient::TooSmallToCache(const VolObject& dataset) noexcept {
  try {
    const Options& options = Runtime::Get().options();
    const std::uint64_t min_bytes = options.min_dataset_bytes;
    // The file is the one the dataset was opened through: a dataset another
    // file holds (a mount, an external link) is at worst forwarded, never
    // served wrong. A schedule file may name any dataset (the follower's
    // published order names only what its workers' recorded reads did).
    if (dataset.file == nullptr || dataset.file->writable || min_bytes == 0 ||
        !options.cache_enabled || (!options.follow && !options.schedule_path.empty())) {
      return false;
    }
    // Two questions, since this is asked at every open of a dataset: only
    // contiguous data has an address (chunks are apart from the header,
    // found through an index, and a hit saves decoding them), and its
    // storage size is then its bytes. Failed queries must not leave errors
    // behind a successful open.
    PreservedErrorStack keep;
    const UnderDataset queries(dataset);
    const haddr_t address = queries.Offset();
    if (address == HADDR_UNDEF) return false;  // chunked, or a failure: `keep` looks
    const std::optional<std::uint64_t> bytes = queries.StorageSize();
    if (!bytes) return false;
    keep.CallsSucceeded();
    if (*bytes >= min_bytes) return false;
    if (!options.follow) return true;
    const FileIdentity& file = dataset.file->identity;
    if (!file.valid) return false;
    cache::MutexLock lock(&mutex_);
    return small_datasets_.NoteAndCheckMany({file.device, file.inode, file.size, file.mtime_ns},
                                            address);
  } catch (...) {
    return false;
  }
}

void CacheClient::FollowNewScheduleLocked() {
  if (!watch_ || !cache_ || !watch_->Changed()) return;
  const Options& options = Runtime::Get().options();
  std::unique_ptr<ScheduleFollower> follower = ScheduleFollower::Create(
      ScheduleFollower::OpenBinding(options), options, *cache_,
      [this](auto prepared) { return Adopt(std::move(prepared)); }, memo_.get());
  if (!follower) return;  // unusable (warned): the current one stays
  for (const auto& [identity, cached] : datasets_) {
    if (cached && cached->registered()) follower->OnRegistered(cached);
  }
  const long pid = ::getpid();
  if (follower_owner_) {
    follower_owner_->RequestStop();
    retired_.push_back({std::move(follower_owner_), pid});
  }
  follower_owner_ = std::move(follower);
  follower_.store(follower_owner_.get());
  std::erase_if(retired_, [pid](Retired& retired) {
    // A forked child never touches its parent's followers (their threads were
    // the parent's, and may have held their locks at the fork): it lets go.
    if (retired.pid != pid) (void)retired.follower.release();
    return retired.follower == nullptr || retired.follower->Idle();
  });
}

CacheClient::Registered CacheClient::Lookup(const VolObject& dataset) {
  if (dataset.dataset == nullptr) return {};
  cache::MutexLock lock(&mutex_);
  std::shared_ptr<CachedDataset> cached = PreparedLocked(dataset);
  if (cached == nullptr || OpenCacheLocked() == nullptr || !RegisterLocked(cached)) return {};
  FollowNewScheduleLocked();
  return {std::move(cached), cache_.get(), capacity_bytes_};
}

cache::Status CacheClient::LoadWithReadAround(cache::NodeCache& cache, const CachedDataset& cached,
                                              const VolObject& dataset,
                                              std::span<const std::uint64_t> missing,
                                              std::span<std::byte* const> dest, LoadCounters* load,
                                              const cache::NextUseOracle* oracle,
                                              std::uint64_t* read_around) {
  std::vector<std::uint64_t> claimed;
  const bool scheduled = oracle != nullptr;
  std::vector<std::uint64_t> extra;
  if (cached.ReadAroundPays(cache.Stats(), scheduled)) extra = SlabMates(cached, missing);
  if (scheduled && cached.chunk_rows() == 0 && !extra.empty()) {
    // A miss with a schedule comes where the prefetcher is behind (the start
    // of an epoch, a short one): its slab is read with it, as without a
    // schedule, but only the contiguous rows this node reads again, and under
    // a node agent owns (others' are the agents' to fetch); a chunk's other
    // rows are decoded anyway. Before, such a miss read its row alone and the
    // prefetcher the rest: dlio's first epoch (16 files, every row wanted)
    // took 716-834 storage requests of 105-110 MB for 64 MiB, against 272
    // of 67 MB without a schedule.
    const std::uint64_t now = cache.NodeStep();
    std::erase_if(extra, [&](std::uint64_t row) {
      return !ReadAgainHere(oracle->NextUse(cached.slot(), row, now));
    });
  }
  if (!extra.empty()) {
    cache::Result<std::vector<std::uint64_t>> c = cache.Claim(cached.slot(), extra, oracle);
    if (c.ok()) claimed = std::move(c.value());
  }
  if (claimed.empty()) return cached.LoadEntries(&dataset, missing, dest, load);

  // Load requested and claimed rows in one plan, so each chunk is decoded once.
  std::vector<std::byte> staging(claimed.size() * cached.entry_bytes());
  std::vector<std::uint64_t> rows;
  std::vector<std::byte*> targets;
  rows.reserve(missing.size() + claimed.size());
  targets.reserve(missing.size() + claimed.size());
  for (std::size_t i = 0, j = 0; i < missing.size() || j < claimed.size();) {
    if (j == claimed.size() || (i < missing.size() && missing[i] < claimed[j])) {
      rows.push_back(missing[i]);
      targets.push_back(dest[i++]);
    } else {
      rows.push_back(claimed[j]);
      targets.push_back(staging.data() + j++ * cached.entry_bytes());
    }
  }
  const cache::Status status = cached.LoadEntries(&dataset, rows, targets, load);
  for (std::size_t j = 0; j < claimed.size(); ++j) {
    if (!status.ok()) {
      cache.Abandon(cached.slot(), claimed[j]);
    } else {
      cache.Publish(cached.slot(), claimed[j], staging.data() + j * cached.entry_bytes(), oracle);
    }
  }
  if (status.ok()) *read_around += claimed.size();
  return status;
}

bool CacheClient::TryServe(const VolObject& dataset, const ReadRequest& request, void* buf,
                           ReadRecord* record) noexcept {
  if (!request.simple) return false;  // its record says why
  if (request.fields == nullptr) return ServeStored(dataset, request, request.bytes, buf, record);
  // Some members of a compound: the stored elements into a staging buffer,
  // then the members gathered into the caller's (compound_fields.h). The
  // caller's buffer is written only once the read is served.
  try {
    const CompoundFields& fields = *request.fields;
    const std::uint64_t elements = request.selection.elements;
    thread_local UninitializedBytes staging;
    std::byte* stored = staging.Get(elements * fields.stored_size());
    if (!ServeStored(dataset, request, elements * fields.stored_size(), stored, record)) {
      return false;
    }
    fields.Gather(stored, static_cast<std::byte*>(buf), elements);
    if (staging.capacity() > kKeptPartBufferBytes) staging.Release();
    record->fields_gathered = true;
    return true;
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("cache serve failed: ") + e.what());
  } catch (...) {
  }
  return Forwarded(record, ForwardReason::kFailed);
}

bool CacheClient::ServeStored(const VolObject& dataset, const ReadRequest& request,
                              std::uint64_t stored_bytes, void* buf, ReadRecord* record) noexcept {
  try {
    if (request.selection.rows.rows() == 0) return Forwarded(record, ForwardReason::kSelection);
    // Phase 1: the dataset and the cache (one lock).
    const Registered found = Lookup(dataset);
    const std::shared_ptr<CachedDataset>& cached = found.dataset;
    if (cached == nullptr) return Forwarded(record, ForwardReason::kDataset);
    cache::NodeCache* cache = found.cache;
    // Read in narrow parts: the prefetch leader (another process, perhaps)
    // loads whole rows of the dataset ahead only where they would stay until
    // read (Prefetcher::WholeRowsPayAhead).
    if (request.narrow_row_part && cached->FirstNarrowRead()) {
      cache->AddDatasetHint(cached->slot(), cache::DatasetHint::kReadInParts);
    }
    if (request.selection.rows.rows() * cached->row_bytes() > found.capacity / kMaxShareOfCache)
      return Forwarded(record, ForwardReason::kLarge);
    // A part of each row (read_hook.cc) is cut from whole rows; its elements
    // must be the stored type's. Not for rows small enough to share an entry.
    const bool row_parts = !request.selection.whole_rows;
    std::uint64_t element_bytes = 0;
    if (row_parts) {
      const std::uint64_t row_elements = request.selection.row_elements;
      if (cached->grouped()) return Forwarded(record, ForwardReason::kSmallRowPart);
      if (row_elements == 0 || cached->row_bytes() % row_elements != 0)
        return Forwarded(record, ForwardReason::kSelection);
      element_bytes = cached->row_bytes() / row_elements;
      if (element_bytes * request.selection.elements != stored_bytes)
        return Forwarded(record, ForwardReason::kSelection);
    }
    auto forward_changed = [&] {
      // Its rows must never be served again: dropped from the node's cache
      // at once (every process sees the slot retired).
      if (cached->MarkDropped()) (void)cache->DropDataset(cached->slot());
      const std::string changed = cached->changed_file();
      Runtime::Get().Fallback(
          Counter::kFallbackFileChanged,
          changed + " changed on disk while open (size, modification or status time): " +
              (changed == cached->path()
                   ? std::string("its")
                   : "as a source of a virtual dataset in " + cached->path() + ", that dataset's") +
              " reads are forwarded to HDF5, never served from the cache");
      return Forwarded(record, ForwardReason::kFileChanged);
    };
    if (cached->FileChanged(&dataset)) return forward_changed();

    // Phase 2: rows in transfer order, and the cache entries holding them.
    thread_local ServeScratch scratch_space;
    std::vector<std::uint64_t>& rows = scratch_space.rows;
    std::vector<std::uint64_t>& entries = scratch_space.entries;
    RowsInTransferOrder(request.selection.rows, rows);
    if (cached->virtual_dataset() && SourcesChangedFor(*cached, dataset, rows))
      return forward_changed();
    entries.clear();
    // Whole entries in order (a dataset of small rows read whole, as a
    // sample's own dataset is): the entries land in the caller's buffer as
    // they are, with no copy row by row out of a scratch buffer.
    const bool whole_entries = cached->grouped() && WholeEntriesInOrder(rows, *cached);
    if (whole_entries) {
      const std::uint64_t first = rows.front() / cached->rows_per_entry();
      entries.resize(rows.size() / cached->rows_per_entry());
      std::iota(entries.begin(), entries.end(), first);
    } else if (cached->grouped()) {
      GroupedParts(rows, *cached, scratch_space);
    }
    // Under half a row: whole rows where they pay; else from the rows the
    // cache holds, the others' parts read through HDF5 (SplitByResidency).
    bool in_part = false;
    if (request.narrow_row_part &&
        !cached->NarrowPartsPay(rows, stored_bytes / rows.size(), cache->Stats())) {
      const Residency residency = SplitByResidency(*cache, cached->slot(), rows, scratch_space);
      if (residency == Residency::kTooLittle) return Forwarded(record, ForwardReason::kNarrow);
      in_part = residency == Residency::kPart;
    }
    const std::vector<std::uint64_t>& wanted = cached->grouped() ? entries
                                               : in_part         ? scratch_space.cached_rows
                                                                 : rows;

    // Phase 3, with a schedule: place the read in its rank's order first, so
    // its rows are keyed by their use after this read (ReadOracle).
    ScheduleFollower::ReadKeys keys;
    if (ScheduleFollower* follower = follower_.load()) {
      follower->OnRead(*cached, rows, record, &keys);
    }
    // A grouped dataset too large to stay resident is cached as without a
    // schedule; its reads are still placed in the order above (matches, the
    // rank's progress).
    const cache::NextUseOracle* oracle = cached->unkeyed_by_schedule() ? nullptr : keys.get();

    // Phase 4: the cache copies hits, loads misses through `loader` on this
    // thread (and publishes them), waits for rows others are loading.
    LoadCounters load;
    std::uint64_t read_around = 0;
    auto loader = [&](std::span<const std::uint64_t> missing, std::span<std::byte* const> dest) {
      return LoadWithReadAround(*cache, *cached, dataset, missing, dest, &load, oracle,
                                &read_around);
    };
    if (in_part &&
        !ReadPartsThroughHdf5(*cached, dataset, request, stored_bytes, rows,
                              scratch_space.through_hdf5, static_cast<std::byte*>(buf))) {
      return Forwarded(record, ForwardReason::kFailed);
    }
    std::vector<std::byte>& scratch = scratch_space.entry_bytes;
    std::byte* target = static_cast<std::byte*>(buf);
    if (cached->grouped() && !whole_entries) {
      scratch.resize(entries.size() * cached->entry_bytes());
      target = scratch.data();
    } else if (row_parts) {
      target = scratch_space.whole_rows.Get(wanted.size() * cached->row_bytes());
    }
    cache::ReadRowsStats read;
    cache::RowParts parts;
    if (cached->grouped() && !whole_entries) {
      parts = {.ranges = scratch_space.ranges, .first = scratch_space.first_range};
    } else if (row_parts && wanted.size() * request.selection.row_part.size() <= kMaxPartRanges) {
      // A hit copies only the part of each row (a 3-D patch is a ninth of
      // its z-planes); Phase 5 takes it from the same places.
      PartOfEveryRow(request.selection.row_part, element_bytes, wanted.size(), scratch_space);
      parts = {.ranges = scratch_space.ranges, .first = scratch_space.first_range};
    }
    const cache::Status status =
        cache->ReadRows(cached->slot(), wanted, target, loader, oracle, &read, parts);
    record->storage_reads += load.reads;
    record->storage_bytes += load.bytes;
    record->stall_storage_ns += static_cast<std::uint64_t>(read.load_time.count());
    record->stall_wait_ns += static_cast<std::uint64_t>(read.wait_time.count());
    record->admit_ns += static_cast<std::uint64_t>(read.admit_time.count());
    if (!status.ok()) {
      Runtime::Get().Fallback(Counter::kFallbackServeFailed,
                              "a read served from the node cache failed (" + status.message() +
                                  "); it was forwarded to HDF5, as are other reads that fail");
      return Forwarded(record, ForwardReason::kFailed);
    }
    // Phase 5: row parts are cut from their rows, and small rows copied out
    // of their entries, in transfer order.
    if (row_parts) {
      UninitializedBytes& whole = scratch_space.whole_rows;
      ScatterRowParts({whole.data(), wanted.size() * cached->row_bytes()}, cached->row_bytes(),
                      request.selection.row_part, element_bytes, static_cast<std::byte*>(buf),
                      in_part ? std::span<const std::size_t>(scratch_space.cached_at)
                              : std::span<const std::size_t>());
      if (whole.capacity() > kKeptPartBufferBytes) whole.Release();
    } else if (cached->grouped() && !whole_entries) {
      auto* out = static_cast<std::byte*>(buf);
      for (const GroupedPiece& piece : scratch_space.pieces) {
        std::memcpy(out + piece.out,
                    scratch.data() + piece.entry * cached->entry_bytes() + piece.offset,
                    piece.bytes);
      }
    }
    record->served = true;
    if (in_part) {
      record->narrow_in_part = true;
      record->rows_narrow_through_hdf5 = rows.size() - wanted.size();
    }
    node_snapshot_.MaybeTake(*cache, Runtime::Get().stats());
    if (!cached->grouped()) {
      record->rows_hit += read.hits;
      record->rows_loaded += read.loaded + read.uncached;
      record->rows_waited += read.waited;
      record->rows_not_awaited += read.not_awaited;
      record->rows_read_around += read_around;
      record->rows_admitted_behind += read.admitted_behind;
      record->rows_admitted_read_again += read.admitted_read_again;
      record->rows_not_admitted += read.not_admitted;
      record->rows_not_kept_busy += read.not_kept;
    } else {
      // Entries of several rows: rows brought from storage are whole entries;
      // the requested rows count as hits when their entries all were.
      const std::uint64_t g = cached->rows_per_entry();
      const std::uint64_t missed = read.loaded + read.uncached + read.waited;
      record->rows_hit += missed == 0 ? rows.size() : rows.size() * read.hits / entries.size();
      record->rows_loaded += (read.loaded + read.uncached) * g;
      record->rows_waited += read.waited * g;
      record->rows_not_awaited += read.not_awaited * g;
      record->rows_admitted_behind += read.admitted_behind * g;
      record->rows_admitted_read_again += read.admitted_read_again * g;
      record->rows_not_admitted += read.not_admitted * g;
      record->rows_not_kept_busy += read.not_kept * g;
    }
    return true;
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("cache serve failed: ") + e.what());
  } catch (...) {
  }
  return Forwarded(record, ForwardReason::kFailed);
}

}  // namespace prescient::vol
