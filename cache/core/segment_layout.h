// The shared-memory layout of a cache segment and the plain structs in it.
//
//   [SegmentHeader | DatasetRecord x max_datasets | AttachRecord x kMaxAttach |
//    ParticipantRecord x kMaxParticipants | Entry x num_entries | bucket x hash_buckets | heap slot
//    x num_entries | block_next x num_blocks | repair bitmap | ghost x ghost_slots |
//    (page-aligned) data blocks]
//
// Everything is position independent (indices, never pointers), so every
// process may map the segment at a different address. All fields are guarded
// by SegmentHeader::lock except those accessed through std::atomic_ref (the
// counters, the node step, the leader identity and each entry's futex word).
#ifndef PRESCIENT_CACHE_CORE_SEGMENT_LAYOUT_H_
#define PRESCIENT_CACHE_CORE_SEGMENT_LAYOUT_H_

#include <cstdint>
#include <limits>

#include "cache/base/status.h"
#include "cache/core/dataset_key.h"
#include "cache/core/shm_sync.h"

namespace prescient::cache::detail {

inline constexpr std::uint64_t kMagic = 0x3143484353455250ull;  // "PRESCHC1"
// 17 had no DatasetRecord::hints; 16 had no AttachRecord::flags; 15 had no
// SegmentCounters::claims_released_late; 14 kept a bare step in SegmentHeader::participant_floor
// (no registration tag); 13 had no shared stall memo (SegmentHeader::stuck_pid_beat); 12
// initialised every entry and bucket.
inline constexpr std::uint32_t kLayoutVersion = 18;
inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
// Processes attached at once (ranks x (1 + DataLoader workers) per node).
inline constexpr std::uint32_t kMaxAttach = 1024;
// Rows one process may have pinned at once (pins are short: one copy-out).
inline constexpr std::uint32_t kPinsPerAttach = 64;
// Participants (ranks of the schedule) whose progress the segment tracks.
inline constexpr std::uint32_t kMaxParticipants = 256;

enum SegmentState : std::uint32_t {
  kSegmentReady = 1,
  kSegmentRetired = 2,  // unlinked by its last user; openers must retry
};

enum EntryState : std::uint8_t {
  kEntryFree = 0,
  kEntryLoading = 1,  // claimed by `owner`; may already hold its blocks
  kEntryReady = 2,    // bytes valid; evictable when pins == 0
  // Taken away from its row (dataset dropped, claim taken over): invisible to
  // lookups (Find skips it) but still indexed, so its owner finds it, and
  // still holding its blocks while its owner may write them or readers have
  // it pinned. Freed when owner == kNoOwner and pins == 0.
  kEntryRevoked = 3,
};
// Entry::owner of a revoked entry no process owns any more.
inline constexpr std::uint16_t kNoOwner = 0xffff;

struct DatasetRecord {
  DatasetKey key;
  std::uint64_t row_bytes;
  std::uint64_t num_rows;
  std::uint32_t blocks_per_row;
  // 0 empty, 1 in use, 2 retired (invalidated by repair or dropped; keeps the
  // probe chain, never matches a key again)
  std::uint32_t state;
  // What the node's processes found out about the dataset's reads
  // (DatasetHint bits): set lock-free by any of them, never cleared. The one
  // field that changes once the record is complete.
  std::uint32_t hints;
  std::uint32_t padding;
};

struct AttachRecord {
  std::int32_t pid;  // 0 = free slot
  std::uint32_t pins_used;
  std::uint64_t start_time;
  // Bit i: the copy-out under pin[i] is finished (set lock-free by the reader,
  // std::atomic_ref); the pin is dropped by the next lock holder who needs it
  // gone, so a hit costs no second lock round trip.
  std::uint64_t pins_done;
  // Bumped (lock-free) by the process on every call into the cache: others
  // tell a live but stuck process from a busy one by it (stall_watch.h).
  std::uint64_t heartbeat;
  std::uint32_t flags;  // kAttach*, written at attach
  std::uint32_t padding;
  std::uint32_t pin[kPinsPerAttach];  // entry indices pinned by this process, kNone = unused
};
static_assert(kPinsPerAttach == 64, "pins_done is a 64-bit mask");
// AttachRecord::flags: the process's claims are awaited until they are
// published, never loaded privately by an impatient reader (read_rows.cc,
// Wait): its loads are reads the node pays for once (the node agent's).
inline constexpr std::uint32_t kAttachAwaitedInFull = 1;

// One participant of the node (a rank of the schedule) and its progress. All
// fields are read lock-free (std::atomic_ref); a record is (re)written under
// the lock, `id_plus_one` last, so a reader that sees an id sees its record.
struct ParticipantRecord {
  std::uint32_t id_plus_one;  // 0 = free
  std::uint32_t flags;        // kParticipantFinished | kParticipantDead
  std::int32_t owner_pid;     // the rank's long-lived process (not a worker's)
  std::uint32_t padding;
  std::uint64_t owner_start_time;
  std::uint64_t step;  // only increases while the owner stays the same
};
inline constexpr std::uint32_t kParticipantFinished = 1;
inline constexpr std::uint32_t kParticipantDead = 2;

struct Entry {
  std::uint64_t row;
  std::uint64_t key;       // eviction priority: larger is evicted first (see eviction_keys.h)
  std::uint64_t heap_key;  // the key the heap is ordered by; >= key (lowered lazily)
  std::uint32_t seq;       // futex word, bumped on every state change (atomic_ref)
  std::uint32_t dataset;
  std::uint32_t first_block;  // chain of blocks_per_row blocks; next free entry when free
  std::uint32_t heap_pos;     // kNone unless Ready (pinned rows stay in the heap)
  std::uint16_t owner;        // attach slot of the loader while Loading
  std::uint16_t pins;
  std::uint8_t state;
  std::uint8_t waiters;  // someone sleeps on seq: wake on change
  std::uint8_t padding[2];
};
static_assert(sizeof(Entry) == 48);

// Node-wide counters, relaxed atomics (atomic_ref): cheap to read any time.
struct SegmentCounters {
  std::uint64_t hits;
  std::uint64_t misses;  // rows a ReadRows caller had to load
  std::uint64_t waits;   // rows a ReadRows caller waited for
  std::uint64_t evictions;
  std::uint64_t rejections;  // rows not admitted (would be evicted before their next use)
  std::uint64_t recoveries;  // repairs after a lock owner died
  std::uint64_t takeovers;   // rows reclaimed from a dead loader
  std::uint64_t bytes_resident;
  std::uint64_t rows_resident;
  std::uint64_t prefetch_declined;     // rows ClaimForPrefetch left out (no-admit rule)
  std::uint64_t backing_failures;      // data extents the filesystem could not back (full)
  std::uint64_t dropped_rows;          // resident or in-flight rows of dropped datasets
  std::uint64_t corruptions;           // out-of-range values found in the tables (then repaired)
  std::uint64_t stall_takeovers;       // rows taken from live loaders that made no progress
  std::uint64_t leader_takeovers;      // leaderships taken from live leaders that made no progress
  std::uint64_t claims_released_late;  // claims let go after the lock's holder resumed
};

struct alignas(64) SegmentHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t state;  // SegmentState
  std::uint64_t segment_bytes;
  std::uint32_t block_bytes;
  std::uint32_t max_datasets;
  std::uint64_t num_blocks;
  std::uint64_t num_entries;
  std::uint64_t hash_buckets;  // power of two
  std::uint64_t ghost_slots;   // power of two
  std::uint64_t off_datasets, off_attach, off_participants, off_entries, off_buckets, off_heap,
      off_block_next, off_bitmap, off_ghosts, off_data;

  alignas(64) SharedLock lock;  // shm_sync.h
  // Guarded by lock.
  std::uint32_t free_block_head;
  std::uint32_t free_entry_head;
  std::uint64_t free_blocks;  // on the free list: backed, unused
  // Blocks [0, backed_blocks) have memory behind them; the rest of the data
  // area is a hole until handed out (written under the lock, read lock-free).
  std::uint64_t backed_blocks;
  std::uint64_t backing_retry_ns;  // CLOCK_MONOTONIC before which backing is not retried
  std::uint64_t used_entries;
  std::uint64_t heap_size;
  std::uint64_t lru_tick;
  std::uint64_t sweep_hand;
  std::uint32_t keep_after_exit;
  std::uint32_t num_datasets;
  // Entries [fresh_entries, num_entries) were never handed out: still the
  // zeroed memory of a new segment, free without being on the free list
  // (SegmentTables::Claim takes them in order once the list is empty). A new
  // segment so costs no pass over its entries, and scans stop here.
  std::uint64_t fresh_entries;
  // Misses a full cache without a next-use order declined so far (the clock
  // of the ghost records: SegmentTables::DeclinedBefore).
  std::uint64_t ghost_tick;

  // Lock-free (atomic_ref).
  alignas(64) std::int32_t leader_pid;
  std::uint32_t leader_slot;  // its attach slot (for its heartbeat)
  std::uint64_t leader_start_time;
  std::uint64_t node_step;          // AdvanceNodeStep's value (used while nobody reports progress)
  std::uint64_t participants_used;  // records [0, used) may hold a participant
  // NodeStep() from participants, tagged with a count of registrations
  // (participants.cc: FloorWord).
  std::uint64_t participant_floor;
  std::uint64_t participants_checked_ns;  // CLOCK_MONOTONIC of the last liveness check
  // The last loader a wait on the node found stuck (read_rows.cc), as
  // pid << 32 | its heartbeat's low 32 bits, and its CPU time then: a later
  // wait on it, in any process, takes its rows over at once while it still
  // shows no progress, instead of watching it for stall_timeout again (every
  // DataLoader worker of every epoch would otherwise pay that once for a
  // stopped node agent). A torn pair only misses the shortcut.
  std::uint64_t stuck_pid_beat;
  std::uint64_t stuck_cpu;
  SegmentCounters counters;
};

struct LayoutPlan {
  std::uint64_t segment_bytes = 0;
  std::uint32_t block_bytes = 0;
  std::uint32_t max_datasets = 0;
  std::uint64_t num_blocks = 0;
  std::uint64_t num_entries = 0;
  std::uint64_t hash_buckets = 0;
  std::uint64_t ghost_slots = 0;
  std::uint64_t off_datasets = 0, off_attach = 0, off_participants = 0, off_entries = 0,
                off_buckets = 0, off_heap = 0, off_block_next = 0, off_bitmap = 0, off_ghosts = 0,
                off_data = 0;
};

// Fits metadata and as many blocks as possible into segment_bytes. max_rows 0
// = num_blocks + num_blocks / 16. Fails if fewer than 16 blocks fit.
Result<LayoutPlan> PlanLayout(std::uint64_t segment_bytes, std::uint32_t block_bytes,
                              std::uint32_t max_datasets, std::uint64_t max_rows);

// The geometry a header claims, checked: every size in range, every offset
// exactly where PlanLayout puts it, the whole within `file_size`. A segment
// that fails is not used at all (see segment_file.cc). The result is what
// every process keeps and trusts afterwards, never the header's fields again.
Result<LayoutPlan> CheckedGeometry(const SegmentHeader& header, std::uint64_t file_size);

// The header's geometry as it is, unchecked (segments this process built).
LayoutPlan GeometryOf(const SegmentHeader& header);

// Writes a fresh, empty segment into zero-filled memory `base` (the creator's
// private file, not yet visible under its final name).
void InitializeSegment(void* base, const LayoutPlan& plan, bool keep_after_exit);

}  // namespace prescient::cache::detail

#endif  // PRESCIENT_CACHE_CORE_SEGMENT_LAYOUT_H_
