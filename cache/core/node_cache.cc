// NodeCache: opening, attaching, detaching, datasets, leadership, counters.
// The row paths are in read_rows.cc and prefetch_claims.cc.
#include "cache/core/node_cache.h"

#include <unistd.h>

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

bool SameGeometry(const SegmentHeader& h, const detail::LayoutPlan& plan) {
  return h.segment_bytes == plan.segment_bytes && h.block_bytes == plan.block_bytes &&
         h.max_datasets == plan.max_datasets && h.num_entries == plan.num_entries;
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

  for (int attempt = 0; attempt < 16; ++attempt) {
    detail::MappedSegment segment;
    Status error;
    switch (detail::OpenSegment(path, &segment, &error)) {
      case detail::OpenOutcome::kFailed:
        return error;
      case detail::OpenOutcome::kNotFound: {
        switch (detail::CreateSegment(path, plan.value(), options.keep_after_exit, self, &segment,
                                      &error)) {
          case detail::CreateOutcome::kCreated:
            return std::unique_ptr<NodeCache>(
                new NodeCache(options, path, std::move(segment), self, /*slot=*/0));
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
    SegmentTables t(segment.base());
    Result<std::uint16_t> slot = Status::Unavailable("retry");
    bool retry = false;
    {
      SegmentLock lock(t, options.lock_timeout);
      if (!lock.ok()) {
        detail::UnmapSegment(&segment);
        return lock.status();
      }
      SegmentHeader& h = t.header();
      if (h.state == detail::kSegmentRetired) {  // its last user is unlinking it
        retry = true;
      } else if (t.ReapDead() == 0) {
        // A stale segment: everyone attached died (or it was kept on purpose).
        if (h.keep_after_exit == 0 || !SameGeometry(h, plan.value())) {
          h.state = detail::kSegmentRetired;
          detail::UnlinkIfSame(path, segment);
          retry = true;
        } else {
          t.Repair();  // reuse the kept rows; validate everything first
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
        new NodeCache(options, path, std::move(segment), self, slot.value()));
  }
  return Status::Unavailable("cache: segment " + path + " kept changing while opening it");
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory while opening the segment");
}

NodeCache::NodeCache(const CacheOptions& options, std::string path, detail::MappedSegment segment,
                     const ProcessIdentity& self, std::uint16_t slot)
    : options_(options),
      path_(std::move(path)),
      segment_(std::move(segment)),
      backing_(path_, segment_),
      tables_(segment_.base(), &backing_) {
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
  if (PackedPid(packed) == pid) return PackedSlot(packed);
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

bool NodeCache::ValidSlot(DatasetSlot ds) const noexcept {
  return tables_.PublishedDataset(ds) != nullptr;
}

std::uint64_t NodeCache::RowBytes(DatasetSlot ds) const noexcept {
  const detail::DatasetRecord* d = tables_.PublishedDataset(ds);
  return d != nullptr ? d->row_bytes : 0;
}

Result<DatasetSlot> NodeCache::RegisterDataset(const DatasetKey& key, std::uint64_t row_bytes,
                                               std::uint64_t num_rows) noexcept try {
  if (auto slot = EnsureAttached(); !slot.ok()) return slot.status();
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  return tables_.FindOrAddDataset(key, row_bytes, num_rows);
} catch (const std::bad_alloc&) {
  return Status::ResourceExhausted("cache: out of memory");
}

bool NodeCache::TryBecomeLeader() noexcept {
  if (!EnsureAttached().ok()) return false;
  const ProcessIdentity self{CurrentPid(), self_start_time_.load()};
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return false;
  SegmentHeader& h = tables_.header();
  std::atomic_ref<std::int32_t> leader_pid(h.leader_pid);
  std::atomic_ref<std::uint64_t> leader_start(h.leader_start_time);
  const ProcessIdentity current{leader_pid.load(), leader_start.load()};
  const bool take = current.pid == 0 || current == self || !IsAlive(current);
  if (take) {
    leader_pid.store(0);  // never show a half-written identity as ours
    leader_start.store(self.start_time);
    leader_pid.store(self.pid);
  }
  return take;
}

bool NodeCache::IsLeader() const noexcept {
  SegmentHeader& h = tables_.raw_header();
  const auto pid = CurrentPid();
  if (PackedPid(attachment_.load()) != pid) return false;  // forked, not attached yet
  return std::atomic_ref<std::int32_t>(h.leader_pid).load() == pid &&
         std::atomic_ref<std::uint64_t>(h.leader_start_time).load() == self_start_time_.load();
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
  s.capacity_bytes = h.num_blocks * h.block_bytes;
  s.backed_bytes = h.off_data + SegmentTables::Load(h.backed_blocks) * h.block_bytes;
  s.backing_failures = SegmentTables::Load(c.backing_failures);
  s.dropped_rows = SegmentTables::Load(c.dropped_rows);
  s.segment_bytes = h.segment_bytes;
  s.node_step = NodeStep();
  return s;
}

}  // namespace prescient::cache
