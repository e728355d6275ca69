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

std::vector<WantedRow> Prefetcher::RowsOfSteps(std::uint64_t from, std::uint64_t to) const {
  std::vector<WantedRow> wanted;
  for (std::uint64_t g = from; g < to; ++g) {
    const auto [epoch, step] = binding_->EpochAndStep(g);
    for (std::uint32_t rank : binding_->LocalRanks()) {
      const scheduler::RankEpochView part = binding_->Part(rank, epoch);
      if (step >= part.steps()) continue;
      for (scheduler::SampleId s : part.Step(step))
        wanted.push_back({.dataset = dataset_.get(), .row = s, .step = g});
    }
  }
  return wanted;
}

void Prefetcher::PrefetchSteps(std::uint64_t from, std::uint64_t to, io::Executor& executor) {
  std::vector<WantedRow> wanted = RowsOfSteps(from, to);
  if (wanted.empty()) return;
  PrefetchRound round(cache_, oracle_.get(), executor,
                      [](const CachedDataset&) { return std::optional<std::uint32_t>(); });
  const RoundTally tally = round.Run(std::move(wanted));
  Stats& stats = Runtime::Get().stats();
  const std::uint32_t epoch = binding_->EpochAndStep(from).first;
  stats.AddInEpoch(epoch, Counter::kStorageReads, tally.storage_reads);
  stats.AddInEpoch(epoch, Counter::kStorageBytes, tally.storage_bytes);
  stats.AddInEpoch(epoch, Counter::kRowsPrefetched, tally.rows_prefetched);
  if (tally.failed_tasks > 0) {
    Runtime::Get().Fallback(Counter::kFallbackPrefetchFailed,
                            "a prefetch read failed; its rows are loaded when they are read",
                            tally.failed_tasks);
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
