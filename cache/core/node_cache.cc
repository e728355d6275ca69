// NodeCache: opening, attaching, detaching, datasets, leadership, counters.
// The row paths are in read_rows.cc and prefetch_claims.cc.
#include "cache/core/node_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <string>
#include <utility>

#include "cache/core/segment_keeper.h"
#include "cache/core/segment_place.h"
#include "cache/core/segment_registry.h"

namespace prescient::cache {

using detail::SegmentHeader;
using detail::SegmentLock;
using detail::SegmentTables;

namespace {

std::uint64_t Pack(std::int32_t pid, std::uint16_t slot) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 16 | slot;
}
std::int32_t PackedPid(std::uint64_t packed) { return static_cast<std::int32_t>(packed >> 16); }
std::uint16_t PackedSlot(std::uint64_t packed) { return static_cast<std::uint16_t>(packed); }

// Join()'s answer when the segment found cannot be used and Open should look again.
constexpr const char* kRetry = "cache: retry";

std::uint32_t AttachFlags(const CacheOptions& options) {
  return options.claims_awaited_in_full ? detail::kAttachAwaitedInFull : 0;
}

bool SameGeometry(const detail::LayoutPlan& a, const detail::LayoutPlan& b) {
  return a.segment_bytes == b.segment_bytes && a.block_bytes == b.block_bytes &&
         a.max_datasets == b.max_datasets && a.num_entries == b.num_entries;
}

// Makes sure a keeper holds `segment` while the anchor of `options` lives
// (segment_keeper.h); called with the registry locked, after registering.
void KeepForAnchor(const CacheOptions& options, const detail::SegmentPlace& place,
                   const detail::MappedSegment& segment, const ProcessIdentity& self,
                   detail::SegmentRegistry& registry, std::vector<std::string>* notices) {
  const ProcessIdentity& anchor = options.anchor;
  if (anchor.pid == 0 || anchor.pid == self.pid || registry.HasLiveKeeperFor(anchor) ||
      !IsAlive(anchor)) {
    return;
  }
  if (options.keeper_executable.empty()) {
    notices->push_back(
        "cache: no segment keeper is installed next to the connector; the node cache will not "
        "outlive DataLoader workers that exit every epoch");
    return;
  }
  Result<ProcessIdentity> keeper = detail::SpawnKeeper(options.keeper_executable, segment.fd.get(),
                                                       anchor, place.Path(detail::kRegistrySuffix));
  if (!keeper.ok()) {
    notices->push_back(
        keeper.status().message() +
        "; the node cache will not outlive DataLoader workers that exit every epoch");
    return;
  }
  registry.RegisterKeeper(segment, keeper.value(), detail::kKeeperSegmentFd, anchor);
}

}  // namespace

Result<std::unique_ptr<NodeCache>> NodeCache::Open(const CacheOptions& options) noexcept try {
  const std::uint64_t capacity =
      options.capacity_bytes != 0 ? options.capacity_bytes : DefaultCapacityBytes(options.shm_dir);
  if (capacity == 0) {
    return Status::InvalidArgument("cache: cannot determine a default size from " +
                                   options.shm_dir + "; set the cache size explicitly");
  }
  const std::uint32_t max_datasets =
      options.max_datasets != 0 ? options.max_datasets : DatasetTableSize(capacity);
  auto plan = detail::PlanLayout(capacity, options.block_bytes, max_datasets, options.max_rows);
  if (!plan.ok()) return plan.status();
  std::vector<std::string> notices;
  Result<detail::SegmentPlace> place = detail::OpenSegmentPlace(options, &notices);
  if (!place.ok()) return place.status();
  const ProcessIdentity self = SelfIdentityCached();
  // Every opener on the node in turn: the first creates, the others join.
  auto registry = detail::SegmentRegistry::Lock(place.value(), options.lock_timeout);
  if (!registry.ok()) return registry.status();
  for (int attempt = 0; attempt < 4; ++attempt) {
    // The segment registered by a live holder, else a kept one, else a new one.
    Status error;
    detail::UniqueFd fd = registry.value()->OpenThroughHolders();
    bool kept = false;
    if (!fd.valid()) {
      fd = detail::OpenNamed(place.value(), detail::kKeptSuffix, &error, &notices);
      if (!error.ok()) return error;
      kept = fd.valid();
    }
    if (!fd.valid()) break;
    struct stat named{};
    if (kept) fstat(fd.get(), &named);
    detail::MappedSegment segment;
    const std::string what = kept ? place.value().Path(detail::kKeptSuffix)
                                  : "registered in " + place.value().Path(detail::kRegistrySuffix);
    switch (detail::MapSegment(std::move(fd), what, &segment, &error)) {
      case detail::MapOutcome::kFailed:
        return error;
      case detail::MapOutcome::kCorrupt:
        notices.push_back(error.message());
        if (kept) {
          detail::MappedSegment gone;
          gone.device = named.st_dev;
          gone.inode = named.st_ino;
          detail::UnnameSegment(place.value(), gone, detail::kKeptSuffix);
        }
        registry.value()->Clear();
        continue;
      case detail::MapOutcome::kMapped:
        break;
    }
    Result<std::uint16_t> slot = Join(options, place.value(), segment, kept, plan.value(), self,
                                      *registry.value(), &notices);
    if (!slot.ok()) {
      if (slot.status().code() == Status::Code::kUnavailable && slot.status().message() == kRetry) {
        continue;
      }
      return slot.status();
    }
    return std::unique_ptr<NodeCache>(new NodeCache(options, std::move(place.value()),
                                                    std::move(segment), self, slot.value(),
                                                    std::move(notices)));
  }
  detail::MappedSegment segment;
  if (Status s =
          detail::CreateSegment(place.value(), plan.value(), self, AttachFlags(options), &segment);
      !s.ok()) {
    return s;
  }
  if (options.keep_after_exit) detail::NameSegment(place.value(), segment, detail::kKeptSuffix);
  registry.value()->Register(segment, self);
  KeepForAnchor(options, place.value(), segment, self, *registry.value(), &notices);
  return std::unique_ptr<NodeCache>(new NodeCache(
      options, std::move(place.value()), std::move(segment), self, /*slot=*/0, std::move(notices)));
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory while opening the segment");
}

Result<std::uint16_t> NodeCache::Join(const CacheOptions& options,
                                      const detail::SegmentPlace& place,
                                      const detail::MappedSegment& segment, bool kept,
                                      const detail::LayoutPlan& plan, const ProcessIdentity& self,
                                      detail::SegmentRegistry& registry,
                                      std::vector<std::string>* notices) {
  const Status retry = Status::Unavailable(kRetry);
  SegmentTables t(segment.base(), segment.geometry);
  // A segment nobody is attached to is reused when it has the geometry asked
  // for: a kept one, or one a keeper held between DataLoader worker
  // generations (segment_keeper.h). Otherwise it is replaced.
  const bool in_use = t.AnyAttachedAliveUnlocked();
  if (!in_use && !SameGeometry(segment.geometry, plan)) {
    if (kept) detail::UnnameSegment(place, segment, detail::kKeptSuffix);
    registry.Clear();
    return retry;
  }
  Result<std::uint16_t> slot = retry;
  {
    SegmentLock lock(t, options.lock_timeout);
    if (!lock.ok()) {
      if (in_use) return lock.status();
      // A kept leftover whose lock cannot be taken: replaced.
      notices->push_back("cache segment " + place.Path(detail::kKeptSuffix) +
                         " was kept but its lock is unusable (" + lock.status().message() +
                         "); replaced it");
      detail::UnnameSegment(place, segment, detail::kKeptSuffix);
      return retry;
    }
    if (t.ReapDead() == 0) {
      if (!SameGeometry(segment.geometry, plan)) {
        if (kept) detail::UnnameSegment(place, segment, detail::kKeptSuffix);
        registry.Clear();
        return retry;
      }
      // A kept segment may come from another job (or boot): validate
      // everything first. One a keeper held since its last user left was
      // tidied by ReapDead above (dead processes' claims and pins), and a
      // process that died inside the lock made taking it repair: a full
      // repair would cost every DataLoader worker generation O(cache size).
      if (kept) t.Repair(/*verify_backing=*/true);
    }
    slot = t.Attach(self, AttachFlags(options));
  }
  if (!slot.ok()) return slot.status();
  // The name follows this job's wish: kept for the next job, or not.
  if (kept && !options.keep_after_exit) {
    detail::UnnameSegment(place, segment, detail::kKeptSuffix);
  } else if (!kept && options.keep_after_exit) {
    detail::NameSegment(place, segment, detail::kKeptSuffix);
  }
  registry.Register(segment, self);
  KeepForAnchor(options, place, segment, self, registry, notices);
  return slot;
}

NodeCache::NodeCache(const CacheOptions& options, detail::SegmentPlace place,
                     detail::MappedSegment segment, const ProcessIdentity& self, std::uint16_t slot,
                     std::vector<std::string> notices)
    : options_(options),
      place_(std::move(place)),
      path_(place_.dir_path + "/" + place_.base),
      notices_(std::move(notices)),
      segment_(std::move(segment)),
      backing_(segment_),
      tables_(segment_.base(), segment_.geometry, &backing_),
      local_datasets_(static_cast<LocalDataset*>(
          std::calloc(segment_.geometry.max_datasets, sizeof(LocalDataset)))) {
  if (local_datasets_ == nullptr) throw std::bad_alloc();
  attachment_.store(Pack(self.pid, slot));
  self_start_time_.store(self.start_time);
}

NodeCache::~NodeCache() {
  const std::uint64_t packed = attachment_.load();
  if (PackedPid(packed) != CurrentPid()) return;  // a forked child that never attached
  std::uint32_t live = 1;
  {
    SegmentLock lock(tables_, options_.lock_timeout);
    if (lock.ok()) {
      SegmentHeader& h = tables_.header();
      if (std::atomic_ref<std::int32_t>(h.leader_pid).load() == PackedPid(packed)) {
        std::atomic_ref<std::int32_t>(h.leader_pid).store(0);
      }
      tables_.ReleaseAttachment(PackedSlot(packed), /*died=*/false);
      live = tables_.ReapDead();
    }
  }
  // The segment itself goes when its last holder closes it (it has no name),
  // unless it is kept for the next job.
  if (live == 0 && options_.keep_after_exit) {
    detail::NameSegment(place_, segment_, detail::kKeptSuffix);
  }
  auto registry = detail::SegmentRegistry::Lock(place_, std::chrono::milliseconds(200));
  if (registry.ok()) {
    registry.value()->Unregister(segment_, {PackedPid(packed), self_start_time_.load()});
    // The last one out leaves no file behind (a kept segment has its own name).
    if (!registry.value()->AnyLiveHolder()) registry.value()->Remove();
  }
}

Result<std::uint16_t> NodeCache::EnsureAttached() noexcept {
  const auto pid = CurrentPid();
  const std::uint64_t packed = attachment_.load(std::memory_order_acquire);
  if (PackedPid(packed) == pid) {
    tables_.Beat(PackedSlot(packed));  // every call is progress (stall_watch.h)
    if (any_unsettled_.load(std::memory_order_relaxed)) SettleClaims();
    return PackedSlot(packed);
  }
  // First call in a forked child: the inherited slot is the parent's.
  const ProcessIdentity self = SelfIdentityCached();
  Result<std::uint16_t> slot = Status::Unavailable("cache: not attached");
  {
    SegmentLock lock(tables_, options_.lock_timeout);
    if (!lock.ok()) return lock.status();
    // Another thread of this child may have attached meanwhile.
    const std::uint64_t again = attachment_.load(std::memory_order_acquire);
    if (PackedPid(again) == pid) return PackedSlot(again);
    slot = tables_.Attach(self, AttachFlags(options_));
    if (!slot.ok()) return slot.status();
    self_start_time_.store(self.start_time);
    attachment_.store(Pack(pid, slot.value()), std::memory_order_release);
  }
  // Register as a holder too (it holds the inherited descriptor), so a process
  // opening the cache later still finds the segment if the parent is gone.
  // Best effort, briefly: the worker's first read should not wait for it.
  auto registry = detail::SegmentRegistry::Lock(place_, std::chrono::milliseconds(100));
  if (registry.ok()) registry.value()->Register(segment_, self);
  return slot;
}

bool NodeCache::ShapeOf(DatasetSlot ds, DatasetShape* shape, bool or_retired) const noexcept {
  if (ds >= tables_.geometry().max_datasets) return false;
  if (tables_.PublishedDataset(ds) == nullptr && !(or_retired && tables_.RetiredDataset(ds))) {
    return false;
  }
  LocalDataset& local = local_datasets_[ds];
  shape->row_bytes = std::atomic_ref(local.row_bytes).load(std::memory_order_acquire);
  if (shape->row_bytes == 0) return false;
  shape->num_rows = std::atomic_ref(local.num_rows).load(std::memory_order_relaxed);
  const std::uint64_t block = tables_.geometry().block_bytes;
  shape->blocks_per_row = static_cast<std::uint32_t>((shape->row_bytes + block - 1) / block);
  return true;
}

bool NodeCache::ValidSlot(DatasetSlot ds) const noexcept {
  DatasetShape shape;
  return ShapeOf(ds, &shape);
}

std::uint64_t NodeCache::RowBytes(DatasetSlot ds) const noexcept {
  DatasetShape shape;
  return ShapeOf(ds, &shape) ? shape.row_bytes : 0;
}

Result<DatasetSlot> NodeCache::RegisterDataset(const DatasetKey& key, std::uint64_t row_bytes,
                                               std::uint64_t num_rows) noexcept try {
  if (auto slot = EnsureAttached(); !slot.ok()) return slot.status();
  Result<DatasetSlot> slot = Status::Unavailable("cache: segment lock");
  {
    SegmentLock lock(tables_, options_.lock_timeout);
    if (!lock.ok()) return lock.status();
    slot = tables_.FindOrAddDataset(key, row_bytes, num_rows);
  }
  if (slot.ok()) {
    LocalDataset& local = local_datasets_[slot.value()];
    std::atomic_ref(local.num_rows).store(num_rows, std::memory_order_relaxed);
    std::atomic_ref(local.row_bytes).store(row_bytes, std::memory_order_release);
  }
  return slot;
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory");
}

void NodeCache::Heartbeat() noexcept { (void)EnsureAttached(); }

bool NodeCache::TryBecomeLeader() noexcept {
  auto attached = EnsureAttached();
  if (!attached.ok()) return false;
  const ProcessIdentity self{CurrentPid(), self_start_time_.load()};
  // Is the current leader stuck? (Judged outside the lock: it reads /proc.)
  SegmentHeader& raw = tables_.raw_header();
  const ProcessIdentity seen{std::atomic_ref<std::int32_t>(raw.leader_pid).load(),
                             std::atomic_ref<std::uint64_t>(raw.leader_start_time).load()};
  bool stuck = false;
  if (seen.pid != 0 && !(seen == self)) {
    const ProcessStatus status = StatusOf(seen);
    const std::uint64_t beats =
        tables_.Heartbeat(std::atomic_ref<std::uint32_t>(raw.leader_slot).load());
    MutexLock watch(&leader_watch_mu_);
    stuck = status.alive &&
            leader_watch_.Observe(seen, beats, status, detail::StallWatch::Clock::now()) >=
                options_.stall_timeout;
  }
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return false;
  SegmentHeader& h = tables_.header();
  std::atomic_ref<std::int32_t> leader_pid(h.leader_pid);
  std::atomic_ref<std::uint64_t> leader_start(h.leader_start_time);
  const ProcessIdentity current{leader_pid.load(), leader_start.load()};
  const bool stuck_now = stuck && current == seen;
  const bool take = current.pid == 0 || current == self || !IsAlive(current) || stuck_now;
  if (take) {
    if (stuck_now) SegmentTables::Add(h.counters.leader_takeovers, 1);
    leader_pid.store(0);  // never show a half-written identity as ours
    std::atomic_ref<std::uint32_t>(h.leader_slot).store(attached.value());
    leader_start.store(self.start_time);
    leader_pid.store(self.pid);
  }
  return take;
}

bool NodeCache::TakeLeadership() noexcept {
  auto attached = EnsureAttached();
  if (!attached.ok()) return false;
  const ProcessIdentity self{CurrentPid(), self_start_time_.load()};
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return false;
  SegmentHeader& h = tables_.header();
  std::atomic_ref<std::int32_t> leader_pid(h.leader_pid);
  leader_pid.store(0);  // never show a half-written identity as ours
  std::atomic_ref<std::uint32_t>(h.leader_slot).store(attached.value());
  std::atomic_ref<std::uint64_t>(h.leader_start_time).store(self.start_time);
  leader_pid.store(self.pid);
  return true;
}

bool NodeCache::IsLeader() const noexcept {
  SegmentHeader& h = tables_.raw_header();
  const auto pid = CurrentPid();
  const std::uint64_t packed = attachment_.load();
  if (PackedPid(packed) != pid) return false;  // forked, not attached yet
  const bool leader =
      std::atomic_ref<std::int32_t>(h.leader_pid).load() == pid &&
      std::atomic_ref<std::uint64_t>(h.leader_start_time).load() == self_start_time_.load();
  if (leader) tables_.Beat(PackedSlot(packed));  // the leader's heartbeat
  return leader;
}

void NodeCache::ResignLeader() noexcept {
  if (!IsLeader()) return;
  SegmentLock lock(tables_, options_.lock_timeout);
  if (lock.ok() && IsLeader()) {
    std::atomic_ref<std::int32_t>(tables_.header().leader_pid).store(0);
  }
}

bool NodeCache::OthersHold() const noexcept try {
  const std::int32_t self = CurrentPid();
  if (tables_.AnyAttachedAliveUnlocked(self)) return true;
  auto registry = detail::SegmentRegistry::Lock(place_, std::chrono::milliseconds(100));
  if (!registry.ok()) return true;
  return registry.value()->AnyOtherLiveHolderOf(segment_, self);
} catch (...) {
  return true;  // in doubt, the job is there
}

CacheStats NodeCache::Stats() const noexcept {
  SegmentHeader& h = tables_.raw_header();
  auto& c = h.counters;
  CacheStats s;
  s.hits = SegmentTables::Load(c.hits);
  s.misses = SegmentTables::Load(c.misses);
  s.waits = SegmentTables::Load(c.waits);
  s.evictions = SegmentTables::Load(c.evictions);
  s.rejections = SegmentTables::Load(c.rejections);
  s.recoveries = SegmentTables::Load(c.recoveries);
  s.takeovers = SegmentTables::Load(c.takeovers);
  s.prefetch_declined = SegmentTables::Load(c.prefetch_declined);
  s.bytes_resident = SegmentTables::Load(c.bytes_resident);
  s.rows_resident = SegmentTables::Load(c.rows_resident);
  const detail::LayoutPlan& g = tables_.geometry();
  s.capacity_bytes = g.num_blocks * g.block_bytes;
  s.backed_bytes =
      g.off_data + std::min(SegmentTables::Load(h.backed_blocks), g.num_blocks) * g.block_bytes;
  s.backing_failures = SegmentTables::Load(c.backing_failures);
  s.dropped_rows = SegmentTables::Load(c.dropped_rows);
  s.corruptions = SegmentTables::Load(c.corruptions);
  s.stall_takeovers = SegmentTables::Load(c.stall_takeovers);
  s.leader_takeovers = SegmentTables::Load(c.leader_takeovers);
  s.claims_released_late = SegmentTables::Load(c.claims_released_late);
  s.segment_bytes = g.segment_bytes;
  s.node_step = NodeStep();
  return s;
}

}  // namespace prescient::cache
