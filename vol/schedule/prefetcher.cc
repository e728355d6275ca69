#include "vol/schedule/prefetcher.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <variant>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "cache/io/task_order.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/task_group.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;
using std::chrono::milliseconds;

}  // namespace

Prefetcher::Prefetcher(cache::NodeCache& cache, std::shared_ptr<const ScheduleBinding> binding,
                       std::shared_ptr<const CachedDataset> dataset,
                       std::shared_ptr<const cache::NextUseOracle> oracle, unsigned io_threads,
                       io::CoalescingOptions coalescing)
    : cache_(cache),
      binding_(std::move(binding)),
      dataset_(std::move(dataset)),
      oracle_(std::move(oracle)),
      io_threads_(std::max(1u, io_threads)),
      coalescing_(coalescing) {
  const scheduler::WorldLayout& layout = binding_->header().layout;
  const std::uint64_t rows_per_step =
      std::max<std::uint64_t>(1, std::uint64_t{layout.batch_size} * binding_->LocalRanks().size());
  const std::uint64_t cache_rows =
      cache_.Stats().capacity_bytes / std::max<std::uint64_t>(1, dataset_->row_bytes());
  lookahead_ = std::clamp<std::uint64_t>(cache_rows / (2 * rows_per_step), 2, 512);
}

Prefetcher::~Prefetcher() {
  if (running_pid_.load() == ::getpid()) {
    Stop();
  } else if (thread_) {
    (void)thread_.release();  // a thread of the parent process: it does not exist here
  }
}

void Prefetcher::EnsureRunning() {
  const long pid = ::getpid();
  if (running_pid_.load() == pid) return;
  if (thread_) (void)thread_.release();  // inherited across fork: not joinable here
  stop_ = false;
  running_pid_ = pid;
  thread_ = std::make_unique<std::thread>([this] { Run(); });
}

void Prefetcher::Stop() {
  if (running_pid_.load() != ::getpid()) return;
  stop_ = true;
  if (thread_ && thread_->joinable()) thread_->join();
  thread_.reset();
  running_pid_ = 0;
}

std::vector<io::RowNeed> Prefetcher::RowsOfSteps(std::uint64_t from, std::uint64_t to) const {
  std::vector<io::RowNeed> needs;
  for (std::uint64_t g = from; g < to; ++g) {
    const auto [epoch, step] = binding_->EpochAndStep(g);
    for (std::uint32_t rank : binding_->LocalRanks()) {
      const scheduler::RankEpochView part = binding_->Part(rank, epoch);
      if (step >= part.steps()) continue;
      for (scheduler::SampleId s : part.Step(step)) needs.push_back({.row = s, .step = g});
    }
  }
  // Whole slabs of chunked data: each chunk is read and decoded once; rows
  // the oracle would not admit are then left out by Claim.
  if (const auto* chunked = std::get_if<io::ChunkedLayout>(dataset_->raw_layout().get())) {
    const std::uint64_t per_slab = chunked->chunk_shape()[0];
    const std::size_t wanted = needs.size();
    for (std::size_t i = 0; i < wanted; ++i) {
      const std::uint64_t first = needs[i].row / per_slab * per_slab;
      for (std::uint64_t r = first; r < std::min(first + per_slab, dataset_->num_rows()); ++r)
        needs.push_back({.row = r});
    }
  }
  io::NormalizeNeeds(needs);
  return needs;
}

void Prefetcher::PrefetchSteps(std::uint64_t from, std::uint64_t to, io::Executor& executor) {
  const std::vector<io::RowNeed> needs = RowsOfSteps(from, to);
  if (needs.empty()) return;
  std::vector<std::uint64_t> rows(needs.size());
  std::transform(needs.begin(), needs.end(), rows.begin(),
                 [](const io::RowNeed& n) { return n.row; });
  if (dataset_->grouped()) {
    PrefetchEntries(rows);
    return;
  }
  cache::Result<std::vector<std::uint64_t>> claimed =
      cache_.Claim(dataset_->slot(), rows, oracle_.get());
  if (!claimed.ok() || claimed.value().empty()) return;
  io::Result<io::ReadPlan> plan =
      io::PlanReads(*dataset_->raw_layout(), claimed.value(), coalescing_);
  if (!plan.ok()) {
    for (std::uint64_t row : claimed.value()) cache_.Abandon(dataset_->slot(), row);
    return;
  }
  // The round spans hundreds of steps; the loaders' next batch goes first.
  io::OrderTasksByFirstNeed(plan.value(), needs);
  Stats& stats = Runtime::Get().stats();
  const std::uint32_t epoch = binding_->EpochAndStep(from).first;
  TaskGroup group(executor);
  for (const io::ReadTask& task : plan.value().tasks) {
    group.Run([&, task_ptr = &task] {
      const io::ReadTask& t = *task_ptr;
      const std::uint64_t row_bytes = dataset_->row_bytes();
      std::vector<std::byte> staging(t.rows.size() * row_bytes);
      auto target = [&](std::uint64_t row) -> std::byte* {
        const auto it = std::lower_bound(t.rows.begin(), t.rows.end(), row);
        return staging.data() + static_cast<std::size_t>(it - t.rows.begin()) * row_bytes;
      };
      const io::Status status =
          io::LoadTask(*dataset_->raw_layout(), *dataset_->source(), t, target);
      std::uint64_t published = 0;
      for (std::size_t i = 0; i < t.rows.size(); ++i) {
        if (!status.ok()) {
          cache_.Abandon(dataset_->slot(), t.rows[i]);
          continue;
        }
        cache::Result<cache::PublishOutcome> outcome = cache_.Publish(
            dataset_->slot(), t.rows[i], staging.data() + i * row_bytes, oracle_.get());
        if (outcome.ok() && outcome.value() == cache::PublishOutcome::kStored) ++published;
      }
      if (status.ok()) {
        std::uint64_t bytes = 0;
        for (const io::FileRead& read : t.reads) bytes += read.length;
        stats.AddInEpoch(epoch, Counter::kStorageReads, t.reads.size());
        stats.AddInEpoch(epoch, Counter::kStorageBytes, bytes);
        stats.AddInEpoch(epoch, Counter::kRowsPrefetched, published);
      } else {
        Runtime::Get().Fallback(Counter::kFallbackPrefetchFailed,
                                "a prefetch read failed (" + status.ToString() +
                                    "); its rows are loaded when they are read");
      }
    });
  }
  group.Wait();
  if (group.failures() > 0) {
    // A task that threw left its rows claimed: release them (rows it did
    // publish are no longer ours, and Abandon leaves them alone).
    for (const io::ReadTask& task : plan.value().tasks) {
      for (std::uint64_t row : task.rows) (void)cache_.Abandon(dataset_->slot(), row);
    }
    Runtime::Get().Fallback(Counter::kFallbackPrefetchFailed,
                            "a prefetch task failed; its rows are loaded when they are read",
                            group.failures());
  }
}

void Prefetcher::PrefetchEntries(std::span<const std::uint64_t> rows) {
  // A small dataset cached several rows to an entry: load the entries of
  // `rows` on this thread (there are few of them).
  std::vector<std::uint64_t> entries;
  entries.reserve(rows.size());
  for (std::uint64_t row : rows) entries.push_back(row / dataset_->rows_per_entry());
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  cache::Result<std::vector<std::uint64_t>> claimed =
      cache_.Claim(dataset_->slot(), entries, oracle_.get());
  if (!claimed.ok() || claimed.value().empty()) return;
  const std::uint64_t entry_bytes = dataset_->entry_bytes();
  std::vector<std::byte> staging(claimed.value().size() * entry_bytes);
  std::vector<std::byte*> dest;
  for (std::size_t i = 0; i < claimed.value().size(); ++i)
    dest.push_back(staging.data() + i * entry_bytes);
  LoadCounters load;
  const cache::Status status = dataset_->LoadEntries(nullptr, claimed.value(), dest, &load);
  std::uint64_t published = 0;
  for (std::size_t i = 0; i < claimed.value().size(); ++i) {
    if (!status.ok()) {
      cache_.Abandon(dataset_->slot(), claimed.value()[i]);
      continue;
    }
    auto outcome = cache_.Publish(dataset_->slot(), claimed.value()[i], dest[i], oracle_.get());
    if (outcome.ok() && outcome.value() == cache::PublishOutcome::kStored) ++published;
  }
  Stats& stats = Runtime::Get().stats();
  if (status.ok()) {
    stats.Add(Counter::kStorageReads, load.reads);
    stats.Add(Counter::kStorageBytes, load.bytes);
    stats.Add(Counter::kRowsPrefetched, published * dataset_->rows_per_entry());
  } else {
    Runtime::Get().Fallback(Counter::kFallbackPrefetchFailed,
                            "a prefetch read failed (" + status.message() +
                                "); its rows are loaded when they are read");
  }
}

void Prefetcher::Run() noexcept {
  try {
    io::ThreadPool pool(io::ThreadPoolOptions{io_threads_});
    std::uint64_t done_until = 0;
    while (!stop_.load()) {
      if (!cache_.IsLeader() && !cache_.TryBecomeLeader()) {
        for (int i = 0; i < 25 && !stop_.load(); ++i) std::this_thread::sleep_for(milliseconds(10));
        continue;
      }
      const std::uint64_t now = cache_.NodeStep();
      const std::uint64_t to = std::min(binding_->total_steps(), now + lookahead_);
      const std::uint64_t from = std::max(done_until, now);
      if (from >= to) {
        std::this_thread::sleep_for(milliseconds(1));
        continue;
      }
      // Half the look-ahead per round: large enough for misses to coalesce
      // into long reads, small enough to follow the loaders closely.
      const std::uint64_t chunk_end =
          std::min(to, from + std::max<std::uint64_t>(2, lookahead_ / 2));
      PrefetchSteps(from, chunk_end, pool);
      done_until = chunk_end;
    }
    cache_.ResignLeader();
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kWarn, std::string("prefetching stopped: ") + e.what());
  } catch (...) {
    Runtime::Get().Log(LogLevel::kWarn, "prefetching stopped: unknown exception");
  }
}

}  // namespace prescient::vol
