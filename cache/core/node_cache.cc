// NodeCache: opening, attaching, detaching, datasets, leadership, counters.
// The row paths are in read_rows.cc and prefetch_claims.cc.
#include "cache/core/node_cache.h"

#include <unistd.h>

#include <algorithm>
#include <new>
#include <string>
#include <utility>

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

bool SameGeometry(const detail::LayoutPlan& a, const detail::LayoutPlan& b) {
  return a.segment_bytes == b.segment_bytes && a.block_bytes == b.block_bytes &&
         a.max_datasets == b.max_datasets && a.num_entries == b.num_entries;
}

}  // namespace

Result<std::unique_ptr<NodeCache>> NodeCache::Open(const CacheOptions& options) noexcept try {
  const std::uint64_t capacity =
      options.capacity_bytes != 0 ? options.capacity_bytes : DefaultCapacityBytes(options.shm_dir);
  if (capacity == 0) {
    return Status::InvalidArgument("cache: cannot determine a default size from " +
                                   options.shm_dir + "; set the cache size explicitly");
  }
  auto plan =
      detail::PlanLayout(capacity, options.block_bytes, options.max_datasets, options.max_rows);
  if (!plan.ok()) return plan.status();
  const std::string path = SegmentPath(options);
  const ProcessIdentity self = SelfIdentity();
  std::vector<std::string> notices;

  for (int attempt = 0; attempt < 16; ++attempt) {
    detail::MappedSegment segment;
    Status error;
    switch (detail::OpenSegment(path, &segment, &error)) {
      case detail::OpenOutcome::kFailed:
        return error;
      case detail::OpenOutcome::kCorrupt:
        notices.push_back(error.message());  // removed: make a fresh one
        continue;
      case detail::OpenOutcome::kNotFound: {
        switch (detail::CreateSegment(path, plan.value(), options.keep_after_exit, self, &segment,
                                      &error)) {
          case detail::CreateOutcome::kCreated:
            return std::unique_ptr<NodeCache>(new NodeCache(options, path, std::move(segment), self,
                                                            /*slot=*/0, std::move(notices)));
          case detail::CreateOutcome::kExists:
            continue;  // another process created it first: open theirs
          case detail::CreateOutcome::kFailed:
            return error;
        }
        continue;
      }
      case detail::OpenOutcome::kOpened:
        break;
    }
    SegmentTables t(segment.base(), segment.geometry);
    Result<std::uint16_t> slot = Status::Unavailable("retry");
    bool retry = false;
    if (!t.AnyAttachedAliveUnlocked()) {
      // Nobody alive uses it: whatever state its lock is in, a segment that
      // is not kept is removed without touching the lock (a leftover whose
      // mutex bytes are garbage must not make every later job wait).
      if (t.raw_header().keep_after_exit == 0) {
        detail::UnlinkIfSame(path, segment);
        detail::UnmapSegment(&segment);
        continue;
      }
    }
    {
      SegmentLock lock(t, options.lock_timeout);
      if (!lock.ok()) {
        if (!t.AnyAttachedAliveUnlocked()) {  // a kept leftover with an unusable lock
          notices.push_back("cache segment " + path + " was kept but its lock is unusable (" +
                            lock.status().message() + "); replaced it");
          detail::UnlinkIfSame(path, segment);
          detail::UnmapSegment(&segment);
          continue;
        }
        detail::UnmapSegment(&segment);
        return lock.status();
      }
      SegmentHeader& h = t.header();
      if (h.state == detail::kSegmentRetired) {  // its last user is unlinking it
        retry = true;
      } else if (t.ReapDead() == 0) {
        // A stale segment: everyone attached died (or it was kept on purpose).
        if (h.keep_after_exit == 0 || !SameGeometry(segment.geometry, plan.value())) {
          h.state = detail::kSegmentRetired;
          detail::UnlinkIfSame(path, segment);
          retry = true;
        } else {
          t.Repair(/*verify_backing=*/true);  // reuse the kept rows; validate everything first
        }
      }
      if (!retry) slot = t.Attach(self);
    }
    if (retry) {
      detail::UnmapSegment(&segment);
      continue;
    }
    if (!slot.ok()) {
      detail::UnmapSegment(&segment);
      return slot.status();
    }
    return std::unique_ptr<NodeCache>(
        new NodeCache(options, path, std::move(segment), self, slot.value(), std::move(notices)));
  }
  return Status::Unavailable("cache: segment " + path + " kept changing while opening it");
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory while opening the segment");
}

NodeCache::NodeCache(const CacheOptions& options, std::string path, detail::MappedSegment segment,
                     const ProcessIdentity& self, std::uint16_t slot,
                     std::vector<std::string> notices)
    : options_(options),
      path_(std::move(path)),
      notices_(std::move(notices)),
      segment_(std::move(segment)),
      backing_(path_, segment_),
      tables_(segment_.base(), segment_.geometry, &backing_),
      local_datasets_(new LocalDataset[segment_.geometry.max_datasets]) {
  attachment_.store(Pack(self.pid, slot));
  self_start_time_.store(self.start_time);
}

NodeCache::~NodeCache() {
  const std::uint64_t packed = attachment_.load();
  if (PackedPid(packed) == CurrentPid()) {
    SegmentLock lock(tables_, options_.lock_timeout);
    if (lock.ok()) {
      SegmentHeader& h = tables_.header();
      const std::uint16_t slot = PackedSlot(packed);
      if (std::atomic_ref<std::int32_t>(h.leader_pid).load() == PackedPid(packed)) {
        std::atomic_ref<std::int32_t>(h.leader_pid).store(0);
      }
      tables_.ReleaseAttachment(slot, /*died=*/false);
      if (tables_.ReapDead() == 0) {
        if (options_.keep_after_exit) {
          h.keep_after_exit = 1;
        } else {
          h.state = detail::kSegmentRetired;
          detail::UnlinkIfSame(path_, segment_);
        }
      }
    }
  }
  // A forked child that never attached only drops its inherited mapping.
  detail::UnmapSegment(&segment_);
}

Result<std::uint16_t> NodeCache::EnsureAttached() noexcept {
  const auto pid = CurrentPid();
  const std::uint64_t packed = attachment_.load(std::memory_order_acquire);
  if (PackedPid(packed) == pid) {
    tables_.Beat(PackedSlot(packed));  // every call is progress (stall_watch.h)
    return PackedSlot(packed);
  }
  // First call in a forked child: the inherited slot is the parent's.
  const ProcessIdentity self = SelfIdentity();
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  // Another thread of this child may have attached meanwhile.
  const std::uint64_t again = attachment_.load(std::memory_order_acquire);
  if (PackedPid(again) == pid) return PackedSlot(again);
  auto slot = tables_.Attach(self);
  if (!slot.ok()) return slot.status();
  self_start_time_.store(self.start_time);
  attachment_.store(Pack(pid, slot.value()), std::memory_order_release);
  return slot.value();
}

bool NodeCache::ShapeOf(DatasetSlot ds, DatasetShape* shape, bool or_retired) const noexcept {
  if (ds >= tables_.geometry().max_datasets) return false;
  if (tables_.PublishedDataset(ds) == nullptr && !(or_retired && tables_.RetiredDataset(ds))) {
    return false;
  }
  const LocalDataset& local = local_datasets_[ds];
  shape->row_bytes = local.row_bytes.load(std::memory_order_acquire);
  if (shape->row_bytes == 0) return false;
  shape->num_rows = local.num_rows.load(std::memory_order_relaxed);
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
    local.num_rows.store(num_rows, std::memory_order_relaxed);
    local.row_bytes.store(row_bytes, std::memory_order_release);
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
  s.segment_bytes = g.segment_bytes;
  s.node_step = NodeStep();
  return s;
}

}  // namespace prescient::cache
