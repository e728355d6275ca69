// NodeCache's progress table: participants (the schedule's ranks on this
// node), their steps, and the node step derived from them.
//
// Records live in the segment (ParticipantRecord, kMaxParticipants). They are
// written under the segment lock (first report, new owner) and read and
// advanced lock-free: a report is an atomic max on the step, NodeStep() a scan
// of at most `participants_used` records. Owners' liveness costs a read of
// /proc per participant, so it is checked at most every kLivenessPeriod
// node-wide: the first caller past the period wins a CAS on the header's
// timestamp and does it.
//
// The node step is kept in the header's floor word, raised by NodeStep() scans
// and lowered by registrations. A scan may miss a participant that registers
// while it runs, so a scan's raise must fail if any registration happened
// since the scan read the floor, whether or not that registration lowered it
// (one registering between the floor and the others' steps lowers nothing).
// The word therefore carries a registration count beside the step, and a
// raise is a compare-exchange on the whole word.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <new>
#include <string>

#include "cache/core/node_cache.h"

namespace prescient::cache {

using detail::kMaxParticipants;
using detail::kParticipantDead;
using detail::kParticipantFinished;
using detail::ParticipantRecord;
using detail::SegmentHeader;
using detail::SegmentLock;

namespace {

constexpr std::uint64_t kLivenessPeriodNs = 250'000'000;

template <typename T>
std::atomic_ref<T> Atomic(T& field) {
  return std::atomic_ref<T>(field);
}

std::uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

void AtomicMax(std::uint64_t& field, std::uint64_t value) {
  std::atomic_ref<std::uint64_t> a(field);
  std::uint64_t seen = a.load(std::memory_order_relaxed);
  while (seen < value && !a.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

// The floor word: the low kStepBits hold the step (steps beyond are kept as
// the largest), the high bits count registrations (wrapping: a scan would
// have to overlap 2^16 registrations to be fooled).
struct FloorWord {
  static constexpr int kStepBits = 48;
  static constexpr std::uint64_t kStepMask = (std::uint64_t{1} << kStepBits) - 1;

  static std::uint64_t Step(std::uint64_t word) { return word & kStepMask; }
  static std::uint64_t WithStep(std::uint64_t word, std::uint64_t step) {
    return (word & ~kStepMask) | std::min(step, kStepMask);
  }
  // One more registration, the step lowered to `step` if that is lower.
  static std::uint64_t Registered(std::uint64_t word, std::uint64_t step) {
    const std::uint64_t tag = (word >> kStepBits) + 1;
    return (tag << kStepBits) | std::min(Step(word), std::min(step, kStepMask));
  }
};

std::uint32_t UsedRecords(SegmentHeader& h) {
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(
      Atomic(h.participants_used).load(std::memory_order_acquire), kMaxParticipants));
}

}  // namespace

std::uint32_t NodeCache::FindParticipant(std::uint32_t participant) const noexcept {
  const std::uint32_t used = UsedRecords(tables_.raw_header());
  for (std::uint32_t i = 0; i < used; ++i) {
    ParticipantRecord& r = tables_.participant(i);
    if (Atomic(r.id_plus_one).load(std::memory_order_acquire) == participant + 1u) return i;
  }
  return kMaxParticipants;
}

Status NodeCache::ReportProgress(std::uint32_t participant, std::uint64_t step,
                                 std::int32_t owner_pid) noexcept {
  if (participant == std::numeric_limits<std::uint32_t>::max()) {
    return Status::InvalidArgument("cache: participant id out of range");
  }
  // Fast path: a known participant with the same live owner.
  if (const std::uint32_t i = FindParticipant(participant); i != kMaxParticipants) {
    ParticipantRecord& r = tables_.participant(i);
    if (Atomic(r.owner_pid).load(std::memory_order_relaxed) == owner_pid &&
        (Atomic(r.flags).load(std::memory_order_relaxed) & kParticipantDead) == 0) {
      AtomicMax(r.step, step);
      return Status::Ok();
    }
  }
  // First report, or a new owner: register under the lock.
  const ProcessIdentity owner = IdentityOf(owner_pid);
  if (owner.pid == 0) {
    return Status::InvalidArgument("cache: participant " + std::to_string(participant) +
                                   " reported for process " + std::to_string(owner_pid) +
                                   ", which does not exist");
  }
  if (auto slot = EnsureAttached(); !slot.ok()) return slot.status();
  SegmentLock lock(tables_, options_.lock_timeout);
  if (!lock.ok()) return lock.status();
  SegmentHeader& h = tables_.header();
  std::uint32_t i = FindParticipant(participant);
  if (i != kMaxParticipants) {
    ParticipantRecord& r = tables_.participant(i);
    if (Atomic(r.owner_pid).load() == owner.pid &&
        Atomic(r.owner_start_time).load() == owner.start_time &&
        (Atomic(r.flags).load() & kParticipantDead) == 0) {
      AtomicMax(r.step, step);  // another thread registered it meanwhile
      return Status::Ok();
    }
  } else {
    // A never-used record, else one whose owner is gone.
    const std::uint32_t used = UsedRecords(h);
    if (used < kMaxParticipants) {
      i = used;
    } else {
      for (std::uint32_t k = 0; k < kMaxParticipants && i == kMaxParticipants; ++k) {
        ParticipantRecord& r = tables_.participant(k);
        const ProcessIdentity o{Atomic(r.owner_pid).load(), Atomic(r.owner_start_time).load()};
        if (Atomic(r.id_plus_one).load() == 0 || !IsAlive(o)) i = k;
      }
      if (i == kMaxParticipants) {
        return Status::ResourceExhausted("cache: more than " + std::to_string(kMaxParticipants) +
                                         " participants with live owners on this node");
      }
    }
  }
  ParticipantRecord& r = tables_.participant(i);
  Atomic(r.id_plus_one).store(0, std::memory_order_release);  // hidden while rewritten
  Atomic(r.owner_pid).store(owner.pid);
  Atomic(r.owner_start_time).store(owner.start_time);
  Atomic(r.step).store(step);
  Atomic(r.flags).store(0);
  Atomic(r.id_plus_one).store(participant + 1u, std::memory_order_release);
  if (i >= UsedRecords(h)) Atomic(h.participants_used).store(i + 1u, std::memory_order_release);
  // A rank that reports for the first time (or restarts) behind the node step
  // takes it back: its reads are still to come, and rows they need must not be
  // swept as stale predictions. (A rank whose first read came late, such as
  // one whose DataLoader workers started from a forkserver on a busy node,
  // found the node step at the other ranks' progress.) Published after the
  // record, so a NodeStep() that sees the new word also sees the record; the
  // word changes even when the step does not, which fails every raise by a
  // scan that began before (and may have missed the record).
  std::uint64_t word = Atomic(h.participant_floor).load();
  while (
      !Atomic(h.participant_floor).compare_exchange_weak(word, FloorWord::Registered(word, step))) {
  }
  return Status::Ok();
}

Status NodeCache::FinishParticipant(std::uint32_t participant) noexcept {
  const std::uint32_t i = FindParticipant(participant);
  if (i == kMaxParticipants) {
    return Status::InvalidArgument("cache: participant " + std::to_string(participant) +
                                   " never reported progress");
  }
  Atomic(tables_.participant(i).flags).fetch_or(kParticipantFinished);
  return Status::Ok();
}

std::optional<std::uint64_t> NodeCache::ParticipantStep(std::uint32_t participant) const noexcept {
  const std::uint32_t i = FindParticipant(participant);
  if (i == kMaxParticipants) return std::nullopt;
  return Atomic(tables_.participant(i).step).load(std::memory_order_relaxed);
}

std::vector<NodeCache::ParticipantProgress> NodeCache::Participants() const {
  CheckParticipantsLiveness();
  std::vector<ParticipantProgress> out;
  const std::uint32_t used = UsedRecords(tables_.raw_header());
  for (std::uint32_t i = 0; i < used; ++i) {
    ParticipantRecord& r = tables_.participant(i);
    const std::uint32_t id = Atomic(r.id_plus_one).load(std::memory_order_acquire);
    if (id == 0) continue;
    const std::uint32_t flags = Atomic(r.flags).load();
    out.push_back({.participant = id - 1,
                   .step = Atomic(r.step).load(),
                   .owner_pid = Atomic(r.owner_pid).load(),
                   .finished = (flags & kParticipantFinished) != 0,
                   .owner_alive = (flags & kParticipantDead) == 0});
  }
  return out;
}

void NodeCache::CheckParticipantsLiveness() const noexcept {
  SegmentHeader& h = tables_.raw_header();
  const std::uint64_t now = MonotonicNs();
  std::uint64_t last = Atomic(h.participants_checked_ns).load(std::memory_order_relaxed);
  if (now - last < kLivenessPeriodNs && now >= last) return;
  if (!Atomic(h.participants_checked_ns).compare_exchange_strong(last, now)) return;  // another did
  const std::uint32_t used = UsedRecords(h);
  for (std::uint32_t i = 0; i < used; ++i) {
    ParticipantRecord& r = tables_.participant(i);
    if (Atomic(r.id_plus_one).load() == 0 || (Atomic(r.flags).load() & kParticipantDead) != 0) {
      continue;
    }
    const std::int32_t pid = Atomic(r.owner_pid).load();
    const ProcessIdentity owner{pid, Atomic(r.owner_start_time).load()};
    // Re-read the owner: a record rewritten meanwhile (new owner) is not judged.
    if (!IsAlive(owner) && Atomic(r.owner_pid).load() == pid &&
        Atomic(r.owner_start_time).load() == owner.start_time) {
      Atomic(r.flags).fetch_or(kParticipantDead);
    }
  }
}

void NodeCache::AdvanceNodeStep(std::uint64_t step) noexcept {
  AtomicMax(tables_.raw_header().node_step, step);
}

std::uint64_t NodeCache::NodeStep() const noexcept {
  SegmentHeader& h = tables_.raw_header();
  // Before the table is read: a registration publishes its record, then
  // changes the floor word, so a scan that follows a changed word sees the
  // record.
  const std::uint64_t word_before = Atomic(h.participant_floor).load();
  const std::uint32_t used = UsedRecords(h);
  if (used == 0) return Atomic(h.node_step).load(std::memory_order_relaxed);
  CheckParticipantsLiveness();
  std::uint64_t slowest = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t furthest = 0;
  bool any = false;
  for (std::uint32_t i = 0; i < used; ++i) {
    ParticipantRecord& r = tables_.participant(i);
    if (Atomic(r.id_plus_one).load(std::memory_order_acquire) == 0) continue;
    const std::uint64_t step = Atomic(r.step).load(std::memory_order_relaxed);
    any = true;
    furthest = std::max(furthest, step);
    if (Atomic(r.flags).load(std::memory_order_relaxed) == 0) slowest = std::min(slowest, step);
  }
  if (!any) return FloorWord::Step(Atomic(h.participant_floor).load());
  // Nobody live and unfinished: nobody holds the node back.
  const std::uint64_t candidate =
      slowest != std::numeric_limits<std::uint64_t>::max() ? slowest : furthest;
  // Raised only from the word seen before the scan: any change since (a
  // registration, or another scan's raise) fails the exchange, and what is
  // there is kept.
  if (FloorWord::Step(word_before) < candidate) {
    std::uint64_t seen = word_before;
    while (!Atomic(h.participant_floor)
                .compare_exchange_weak(seen, FloorWord::WithStep(word_before, candidate)) &&
           seen == word_before) {
      // a spurious failure: try again
    }
  }
  return FloorWord::Step(Atomic(h.participant_floor).load());
}

}  // namespace prescient::cache
