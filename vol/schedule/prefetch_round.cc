#include "vol/schedule/prefetch_round.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <variant>

#include "cache/base/mutex.h"
#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "cache/io/task_order.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/task_group.h"

namespace prescient::vol {

namespace io = cache::io;

struct PrefetchRound::DatasetWork {
  const CachedDataset* dataset = nullptr;
  std::vector<io::RowNeed> needs;      // normalized: by row, earliest step
  std::vector<std::uint64_t> claimed;  // to read from storage, ascending
  io::ReadPlan plan;
  std::unique_ptr<RemoteRows::Fetch> remote;  // rows asked of other nodes
};

struct PrefetchRound::Pending {
  DatasetWork* work;
  const io::ReadTask* task;
  std::uint64_t first_need;
};

namespace {

// The earliest step any row of `task` is needed (needs sorted by row).
std::uint64_t FirstNeed(const io::ReadTask& task, std::span<const io::RowNeed> needs) {
  std::uint64_t first = io::RowNeed::kNotNeeded;
  for (std::uint64_t row : task.rows) {
    const auto it =
        std::lower_bound(needs.begin(), needs.end(), row,
                         [](const io::RowNeed& n, std::uint64_t r) { return n.row < r; });
    if (it != needs.end() && it->row == row) first = std::min(first, it->step);
  }
  return first;
}

// `needs` (normalized) with each row not needed itself (read around) given
// the earliest step of its slab: sliced by deadline, a slab is then read in
// one request with the row that needs it, not in a later slice of its own.
std::vector<io::RowNeed> SlabDeadlines(std::span<const io::RowNeed> needs,
                                       std::uint64_t slab_rows) {
  std::vector<io::RowNeed> out(needs.begin(), needs.end());
  if (slab_rows <= 1) return out;
  for (std::size_t begin = 0; begin < out.size();) {
    const std::uint64_t slab = out[begin].row / slab_rows;
    std::size_t end = begin;
    std::uint64_t first = io::RowNeed::kNotNeeded;
    for (; end < out.size() && out[end].row / slab_rows == slab; ++end)
      first = std::min(first, out[end].step);
    for (std::size_t i = begin; i < end; ++i) {
      if (out[i].step == io::RowNeed::kNotNeeded) out[i].step = first;
    }
    begin = end;
  }
  return out;
}

// `needs` (normalized) and every other row of their slabs, not needed
// itself; normalized too (merged in order: no sort of slab_rows x the needs).
std::vector<io::RowNeed> WithSlabMates(std::span<const io::RowNeed> needs, std::uint64_t slab_rows,
                                       std::uint64_t num_rows) {
  std::vector<io::RowNeed> out;
  out.reserve(needs.size() * std::min<std::uint64_t>(slab_rows, 16));
  for (std::size_t i = 0; i < needs.size();) {
    const std::uint64_t first = needs[i].row / slab_rows * slab_rows;
    const std::uint64_t end = std::min(first + slab_rows, num_rows);
    for (std::uint64_t row = first; row < end; ++row) {
      if (i < needs.size() && needs[i].row == row) {
        out.push_back(needs[i++]);
      } else {
        out.push_back({.row = row});
      }
    }
    // A row at or past num_rows (never from a valid schedule) is kept as it
    // was, so that the claim refuses it as before.
    while (i < needs.size() && needs[i].row < first + slab_rows) out.push_back(needs[i++]);
  }
  return out;
}

}  // namespace

PrefetchRound::PrefetchRound(cache::NodeCache& cache, const cache::NextUseOracle* oracle,
                             io::Executor& executor, FieldOf field_of, KeyOf key_of,
                             RemoteRows* remote)
    : cache_(cache),
      oracle_(oracle),
      executor_(executor),
      field_of_(std::move(field_of)),
      key_of_(std::move(key_of)),
      remote_(remote) {}

void PrefetchRound::PlanDataset(DatasetWork& work) {
  const CachedDataset& dataset = *work.dataset;
  io::NormalizeNeeds(work.needs);
  std::vector<std::uint64_t> claimed = Claim(dataset, work.needs);
  // Then whole slabs (CachedDataset::slab_rows) when that pays: each chunk is
  // read and decoded once, and contiguous rows are read a slab to a request
  // while the cache can keep them; rows the cache would not admit are left
  // out by Claim. Only the slabs of rows claimed just now: a slab whose needed
  // rows are all cached or on their way had its other rows read around with
  // them (or they were loaded by a miss, and each is claimed when it is
  // needed itself), and looking them up again in every round cost the leader
  // 16 lookups per sample in epochs that were all hits. On a node agent
  // (remote_) contiguous rows are read exactly: a slab's other rows may be
  // other nodes' to read from storage.
  const bool chunked = dataset.chunk_rows() > 0;
  if (!claimed.empty() && (chunked || remote_ == nullptr) &&
      dataset.ReadAroundPays(cache_.Stats(), true)) {
    std::sort(claimed.begin(), claimed.end());
    std::vector<io::RowNeed> fresh;
    fresh.reserve(claimed.size());
    for (std::uint64_t row : claimed) fresh.push_back({.row = row});
    std::vector<io::RowNeed> mates;
    for (const io::RowNeed& mate : WithSlabMates(fresh, dataset.slab_rows(), dataset.num_rows())) {
      const auto it = std::lower_bound(
          work.needs.begin(), work.needs.end(), mate.row,
          [](const io::RowNeed& need, std::uint64_t row) { return need.row < row; });
      if (it == work.needs.end() || it->row != mate.row) mates.push_back(mate);
    }
    const std::vector<std::uint64_t> more = Claim(dataset, mates);
    claimed.insert(claimed.end(), more.begin(), more.end());
    // The mates stay in the needs (not needed themselves): the deadline
    // slices give them their slab's step.
    work.needs.insert(work.needs.end(), mates.begin(), mates.end());
    io::NormalizeNeeds(work.needs);
  }
  if (claimed.empty()) return;
  std::sort(claimed.begin(), claimed.end());  // the planner wants them ascending
  work.claimed = std::move(claimed);
  if (remote_ != nullptr) work.remote = remote_->Start(dataset, work.claimed);
}

std::vector<std::uint64_t> PrefetchRound::Claim(const CachedDataset& dataset,
                                                std::span<const io::RowNeed> needs) {
  // Claimed in order of need, each keyed by its next use: the step that needs
  // it, or for the rest of a chunk what the oracle says. The cache admits a
  // row only if it is needed before the row it would displace, and reserves
  // its space now, so a row in flight is never evicted or turned away.
  // Contiguous rows no loader of the node will read are not read around:
  // they would cost bytes from storage for nothing (a chunk's are decoded
  // anyway).
  const bool chunked = dataset.chunk_rows() > 0;
  std::vector<cache::RowWithKey> rows;
  rows.reserve(needs.size());
  const std::uint64_t now = cache_.NodeStep();
  for (const io::RowNeed& need : needs) {
    const std::uint64_t next_use =
        need.step != io::RowNeed::kNotNeeded
            ? (key_of_ ? key_of_(dataset, need.row, need.step) : need.step)
            : (oracle_ != nullptr ? oracle_->NextUse(dataset.slot(), need.row, now)
                                  : cache::NextUseOracle::kNever);
    if (need.step == io::RowNeed::kNotNeeded && !chunked &&
        next_use == cache::NextUseOracle::kNever)
      continue;
    rows.push_back({.row = need.row, .next_use = next_use});
  }
  if (rows.empty()) return {};
  std::stable_sort(rows.begin(), rows.end(),
                   [](const cache::RowWithKey& a, const cache::RowWithKey& b) {
                     return a.next_use < b.next_use;
                   });
  cache::Result<std::vector<std::uint64_t>> claimed = cache_.ClaimForPrefetch(dataset.slot(), rows);
  if (!claimed.ok()) return {};
  return std::move(claimed.value());
}

void PrefetchRound::SetLoaderFront(std::uint64_t front, std::uint64_t slice_steps) {
  front_ = front;
  slice_steps_ = slice_steps;
}

void PrefetchRound::PlanClaimed(DatasetWork& work, std::vector<Pending>& pending) {
  if (work.claimed.empty()) return;
  const CachedDataset& dataset = *work.dataset;
  // Chunked data is planned whole: a chunk split across slices would be read
  // and decoded twice.
  const auto* contiguous = std::get_if<io::ContiguousLayout>(dataset.raw_layout().get());
  io::Result<io::ReadPlan> plan =
      slice_steps_ > 0 && contiguous != nullptr
          ? io::PlanContiguousSlices(
                *contiguous,
                io::SplitByDeadline(work.claimed, SlabDeadlines(work.needs, dataset.slab_rows()),
                                    front_, slice_steps_),
                dataset.coalescing())
          : io::PlanReads(*dataset.raw_layout(), work.claimed, dataset.coalescing());
  if (!plan.ok()) {
    for (std::uint64_t row : work.claimed) (void)cache_.Abandon(dataset.slot(), row);
    work.claimed.clear();
    work.plan = {};
    return;
  }
  work.plan = std::move(plan.value());
  for (const io::ReadTask& task : work.plan.tasks)
    pending.push_back({&work, &task, FirstNeed(task, work.needs)});
}

void PrefetchRound::RunSmallDataset(DatasetWork& work, RoundTally& tally) {
  // Cached several rows to an entry: load the few entries on this thread.
  const CachedDataset& dataset = *work.dataset;
  std::vector<cache::RowWithKey> entries;
  entries.reserve(work.needs.size());
  for (const io::RowNeed& need : work.needs)
    entries.push_back({.row = need.row / dataset.rows_per_entry(), .next_use = need.step});
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.row != b.row ? a.row < b.row : a.next_use < b.next_use;
  });
  entries.erase(std::unique(entries.begin(), entries.end(),
                            [](const auto& a, const auto& b) { return a.row == b.row; }),
                entries.end());
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.next_use < b.next_use; });
  cache::Result<std::vector<std::uint64_t>> claimed =
      cache_.ClaimForPrefetch(dataset.slot(), entries);
  if (!claimed.ok() || claimed.value().empty()) return;
  std::sort(claimed.value().begin(), claimed.value().end());
  if (!cache_.IsLeader()) {
    tally.rows_given_up += GiveUp(dataset, claimed.value(), dataset.rows_per_entry());
    return;
  }
  const std::uint64_t entry_bytes = dataset.entry_bytes();
  std::vector<std::byte> staging(claimed.value().size() * entry_bytes);
  std::vector<std::byte*> dest;
  for (std::size_t i = 0; i < claimed.value().size(); ++i)
    dest.push_back(staging.data() + i * entry_bytes);
  LoadCounters load;
  const cache::Status status = dataset.LoadEntries(nullptr, claimed.value(), dest, &load);
  std::uint64_t stored = 0;
  for (std::size_t i = 0; i < claimed.value().size(); ++i) {
    if (!status.ok()) {
      (void)cache_.Abandon(dataset.slot(), claimed.value()[i]);
      continue;
    }
    auto outcome = cache_.Publish(dataset.slot(), claimed.value()[i], dest[i], oracle_);
    if (outcome.ok() && outcome.value() == cache::PublishOutcome::kStored) ++stored;
  }
  if (!status.ok()) {
    ++tally.failed_tasks;
    return;
  }
  tally.storage_reads += load.reads;
  tally.storage_bytes += load.bytes;
  tally.rows_prefetched += stored * dataset.rows_per_entry();
  if (const auto field = field_of_(dataset)) {
    Runtime::Get().stats().AddField(*field, FieldCounter::kRowsPrefetched,
                                    stored * dataset.rows_per_entry());
  }
}

std::uint64_t PrefetchRound::GiveUp(const CachedDataset& dataset,
                                    std::span<const std::uint64_t> claimed,
                                    std::uint64_t rows_per_claim) {
  for (std::uint64_t claim : claimed) (void)cache_.Abandon(dataset.slot(), claim);
  return claimed.size() * rows_per_claim;
}

void PrefetchRound::DropResident(DatasetWork& work) {
  std::vector<std::uint64_t> rows;
  rows.reserve(work.needs.size());
  for (const io::RowNeed& need : work.needs) rows.push_back(need.row);
  std::vector<std::uint8_t> resident(rows.size());
  if (cache_.Resident(work.dataset->slot(), rows, resident) == 0) return;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < work.needs.size(); ++i) {
    if (resident[i] == 0) work.needs[kept++] = work.needs[i];
  }
  work.needs.resize(kept);
}

RoundTally PrefetchRound::Run(std::vector<WantedRow> wanted) {
  RoundTally tally;
  // The wanted rows of each dataset, in the order given; the map is asked
  // only where the dataset differs from the row before's (a sample's fields
  // alternate).
  std::vector<DatasetWork> works;
  std::unordered_map<const CachedDataset*, std::size_t> work_of;
  const CachedDataset* current = nullptr;
  std::size_t current_work = 0;
  for (const WantedRow& w : wanted) {
    if (w.dataset != current) {
      if (w.dataset == nullptr || !w.dataset->raw_layout() || !w.dataset->registered()) continue;
      const auto [it, fresh] = work_of.try_emplace(w.dataset, works.size());
      if (fresh) {
        works.emplace_back();
        works.back().dataset = w.dataset;
      }
      current = w.dataset;
      current_work = it->second;
    }
    works[current_work].needs.push_back({.row = w.row, .step = w.step});
  }

  // Every dataset's tasks, most urgent first across datasets; the replies
  // of other nodes are taken in while they run.
  std::vector<Pending> pending;
  for (DatasetWork& work : works) {
    if (work.dataset->grouped()) {
      RunSmallDataset(work, tally);
      continue;
    }
    DropResident(work);
    if (work.needs.empty()) continue;
    PlanDataset(work);
    PlanClaimed(work, pending);
  }
  std::vector<DatasetWork*> undelivered;
  RunTasks(pending, tally, [&] {
    for (DatasetWork& work : works) {
      if (!work.remote) continue;
      work.claimed = work.remote->Finish();
      if (!work.claimed.empty()) undelivered.push_back(&work);
    }
  });
  // Rows other nodes did not deliver: from storage after all.
  if (!undelivered.empty()) {
    pending.clear();
    for (DatasetWork* work : undelivered) PlanClaimed(*work, pending);
    RunTasks(pending, tally, {});
  }
  return tally;
}

void PrefetchRound::RunTasks(std::vector<Pending>& pending, RoundTally& tally,
                             const std::function<void()>& meanwhile) {
  std::stable_sort(pending.begin(), pending.end(),
                   [](const Pending& a, const Pending& b) { return a.first_need < b.first_need; });
  cache::Mutex tally_mutex;
  TaskGroup group(executor_);
  for (const Pending& p : pending) {
    group.Run([&, p] {
      const CachedDataset& dataset = *p.work->dataset;
      const io::ReadTask& task = *p.task;
      if (!cache_.IsLeader()) {  // demoted since the round began
        const std::uint64_t given_up = GiveUp(dataset, task.rows, 1);
        cache::MutexLock lock(&tally_mutex);
        tally.rows_given_up += given_up;
        return;
      }
      const std::uint64_t row_bytes = dataset.row_bytes();
      std::vector<std::byte> staging(task.rows.size() * row_bytes);
      auto target = [&](std::uint64_t row) -> std::byte* {
        const auto it = std::lower_bound(task.rows.begin(), task.rows.end(), row);
        return staging.data() + static_cast<std::size_t>(it - task.rows.begin()) * row_bytes;
      };
      const io::Status status =
          io::LoadTask(*dataset.raw_layout(), *dataset.source(), task, target);
      std::uint64_t stored = 0;
      for (std::size_t i = 0; i < task.rows.size(); ++i) {
        if (!status.ok()) {
          (void)cache_.Abandon(dataset.slot(), task.rows[i]);
          continue;
        }
        cache::Result<cache::PublishOutcome> outcome =
            cache_.Publish(dataset.slot(), task.rows[i], staging.data() + i * row_bytes, oracle_);
        if (outcome.ok() && outcome.value() == cache::PublishOutcome::kStored) ++stored;
      }
      std::uint64_t bytes = 0;
      for (const io::FileRead& read : task.reads) bytes += read.length;
      cache::MutexLock lock(&tally_mutex);
      if (!status.ok()) {
        ++tally.failed_tasks;
        return;
      }
      tally.storage_reads += task.reads.size();
      tally.storage_bytes += bytes;
      tally.rows_prefetched += stored;
      if (const auto field = field_of_(dataset)) {
        Runtime::Get().stats().AddField(*field, FieldCounter::kRowsPrefetched, stored);
      }
    });
  }
  if (meanwhile) meanwhile();
  group.Wait();
  if (group.failures() > 0) {
    // A task that threw left its rows claimed: release them (rows it did
    // publish are no longer ours, and Abandon leaves them alone).
    for (const Pending& p : pending) {
      for (std::uint64_t row : p.task->rows) (void)cache_.Abandon(p.work->dataset->slot(), row);
    }
    tally.failed_tasks += group.failures();
  }
}

}  // namespace prescient::vol
