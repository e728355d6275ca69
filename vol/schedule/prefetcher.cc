#include "vol/schedule/prefetcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <exception>
#include <map>
#include <utility>

#include "cache/io/task_order.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/schedule/schedule_follower.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;
using std::chrono::milliseconds;

constexpr std::uint64_t kMinWindowSteps = 2;  // double buffering at least
constexpr std::uint64_t kMaxWindowSteps = 4096;
constexpr std::chrono::milliseconds kIdlePollMin{1};
constexpr std::chrono::milliseconds kIdlePollMax{16};
// How long the resolver's files stay open after the last dataset resolved.
constexpr std::chrono::seconds kKeepFiles{2};
// A file of at most this many samples and bytes is warmed, not prepared
// (see the header). Its size is the map's (0 when the map does not say).
constexpr std::uint64_t kWarmOnlyMaxRows = 16;
constexpr std::uint64_t kWarmOnlyMaxBytes = 8u << 20;

bool WarmOnly(std::uint64_t rows, const scheduler::FieldPlace& place) {
  return rows <= kWarmOnlyMaxRows && place.size <= kWarmOnlyMaxBytes;
}

// Asks the kernel to read `path` into the page cache (asynchronously).
bool WarmFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::posix_fadvise(fd, 0, kWarmOnlyMaxBytes, POSIX_FADV_WILLNEED) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Prefetcher::Prefetcher(cache::NodeCache& cache, ScheduleFollower& follower,
                       const RankProgress& progress, unsigned io_threads)
    : cache_(cache),
      follower_(follower),
      progress_(progress),
      io_threads_(std::max(1u, io_threads)),
      done_until_(progress.local_ranks(), 0),
      last_front_(progress.local_ranks(), kNoFront) {}

void Prefetcher::SizeWindowFromCapacity() {
  if (capacity_sized_) return;
  const std::uint64_t sample_bytes = follower_.BytesPerSample();
  if (sample_bytes == 0) return;  // kMinWindowSteps meanwhile
  const std::uint64_t rows_per_step = std::max<std::uint64_t>(
      1, std::uint64_t{follower_.binding().header().layout.batch_size} * progress_.local_ranks());
  const std::uint64_t all_samples = cache_.Stats().capacity_bytes / sample_bytes;
  const std::uint64_t cache_samples = all_samples - std::min(held_samples_, all_samples);
  capacity_steps_ = std::clamp<std::uint64_t>(
      cache_samples * window_quarters_ / (4 * rows_per_step), kMinWindowSteps, kMaxWindowSteps);
  capacity_sized_ = true;
}

Prefetcher::~Prefetcher() {
  if (running_pid_.load() == cache::CurrentPid()) {
    Stop();
  } else if (thread_) {
    (void)thread_.release();  // a thread of the parent process: it does not exist here
  }
}

void Prefetcher::EnsureRunning() {
  const long pid = cache::CurrentPid();
  if (running_pid_.load() == pid) return;
  if (thread_) (void)thread_.release();  // inherited across fork: not joinable here
  stop_ = false;
  finished_ = false;
  running_pid_ = pid;
  std::fill(done_until_.begin(), done_until_.end(), 0);
  std::fill(last_front_.begin(), last_front_.end(), kNoFront);
  thread_ = std::make_unique<std::thread>([this] { Run(); });
}

bool Prefetcher::Stop(StopCaller caller) {
  if (running_pid_.load() != cache::CurrentPid()) return true;
  stop_ = true;
  if (caller == StopCaller::kHoldingHdf5Lock && resolving_.load()) {
    abandoned_ = true;
    if (thread_) thread_->detach();
    thread_.reset();
    return false;
  }
  if (thread_ && thread_->joinable()) thread_->join();
  thread_.reset();
  running_pid_ = 0;
  return true;
}

std::uint64_t Prefetcher::WindowSteps(std::span<const std::uint64_t> progress) {
  // The slowest rank's pace, measured over a few seconds at a time.
  const std::uint64_t slowest =
      progress.empty() ? 0 : *std::min_element(progress.begin(), progress.end());
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - rate_since_).count();
  if (rate_since_.time_since_epoch().count() == 0 || slowest < rate_from_step_) {
    rate_since_ = now;
    rate_from_step_ = slowest;
  } else if (elapsed >= 2.0) {
    const double rate = static_cast<double>(slowest - rate_from_step_) / elapsed;
    steps_per_second_ = steps_per_second_ == 0 ? rate : 0.5 * steps_per_second_ + 0.5 * rate;
    rate_since_ = now;
    rate_from_step_ = slowest;
  }
  if (steps_per_second_ <= 0) return capacity_steps_;
  const auto by_rate = static_cast<std::uint64_t>(steps_per_second_ * kWindowSeconds);
  return std::clamp<std::uint64_t>(by_rate, kMinWindowSteps, capacity_steps_);
}

template <typename Work>
void Prefetcher::WhileResolving(Work&& work) {
  resolving_ = true;
  if (!stop_.load()) work();
  resolving_ = false;
}

bool Prefetcher::Round(io::Executor& executor) {
  SizeWindowFromCapacity();
  const ScheduleBinding& binding = follower_.binding();
  const std::vector<std::uint32_t> ranks = binding.LocalRanks();
  std::array<std::uint64_t, RankProgress::kMaxLocalRanks> progress{};
  const std::size_t n = progress_.Snapshot(progress);
  const std::uint64_t window = WindowSteps(std::span(progress.data(), n));
  const std::uint64_t total = binding.total_steps();
  const std::size_t fields = binding.map().fields().size();

  std::vector<WantedRow> wanted;
  // The round's datasets, alive while it runs (and looked up once each), and
  // whether their rows are left to the readers (WholeRowsPayAhead).
  struct RoundDataset {
    std::shared_ptr<CachedDataset> dataset;
    bool left_to_readers = false;
    // Small rows grouped in entries, too many to stay resident: an entry
    // holds rows of many samples, needed at many steps, and the schedule
    // does not key it (CachedDataset::unkeyed_by_schedule). Claimed a
    // round ahead, a window of such entries evicted the entries read before
    // (a time series four times the cache, followed: 0.69-0.77x native), so
    // they are left to the readers' misses.
    bool too_large_to_keep = false;
    // The entry last wanted of a dataset of rows cached several to an entry,
    // and its step: a window of 64 time steps is 64 samples of one row each,
    // which a round claims as one entry (RunSmallDataset keeps an entry's
    // earliest step), so the same entry at a step no earlier is not wanted
    // again. Wanted row by row, sorting and merging them took 2.7% of the
    // CPU of a followed loop over a series of 400,000 steps (perf).
    std::uint64_t last_entry = UINT64_MAX;
    std::uint64_t last_step = 0;
  };
  std::map<std::pair<std::uint32_t, std::uint32_t>, RoundDataset> datasets;
  std::set<std::string> warmed;  // paths
  std::uint64_t left_to_readers = 0;
  std::uint64_t left_too_large = 0;  // rows of fields too_large_to_keep
  std::uint32_t first_epoch = UINT32_MAX;
  std::uint64_t loaders_front = UINT64_MAX;  // the least advanced rank's next step
  std::uint64_t round_steps = 0;             // from the front to the round's end
  // A step's samples are mostly of one file: each field's dataset is looked
  // up in the map where the file differs from the sample before's.
  std::vector<std::pair<std::uint32_t, RoundDataset*>> last_of_field(fields, {0, nullptr});
  auto round_dataset_of = [&](std::uint32_t file, std::uint32_t f) -> RoundDataset& {
    auto& [last_file, last] = last_of_field[f];
    if (last != nullptr && last_file == file) return *last;
    auto [it, fresh] = datasets.try_emplace({file, f});
    RoundDataset& round_dataset = it->second;
    if (fresh) {
      round_dataset.dataset = DatasetToPrefetch({file, f}, warmed);
      round_dataset.left_to_readers =
          round_dataset.dataset && !WholeRowsPayAhead(*round_dataset.dataset);
      round_dataset.too_large_to_keep =
          round_dataset.dataset && round_dataset.dataset->unkeyed_by_schedule();
    }
    last_file = file;
    last = &round_dataset;
    return round_dataset;
  };
  for (std::size_t k = 0; k < n && k < ranks.size(); ++k) {
    // Ahead of the rank's front (its readers have begun everything before it;
    // a step they began without the prefetcher is read on demand).
    const std::optional<std::uint64_t> front = progress_.Front(ranks[k]);
    const std::uint64_t next = front ? *front + 1 : 0;
    loaders_front = std::min(loaders_front, next);
    if (front && *front < last_front_[k]) done_until_[k] = next;  // first seen, or restarted
    last_front_[k] = front.value_or(kNoFront);
    const std::uint64_t from = std::max(done_until_[k], next);
    const std::uint64_t to = std::min(total, next + window);
    if (from >= to) continue;
    // Half the window per round: large enough for misses to coalesce into
    // long reads, small enough to follow the loaders closely.
    const std::uint64_t end = std::min(to, from + std::max(kMinWindowSteps, window / 2));
    round_steps = std::max(round_steps, end - next);
    for (std::uint64_t g = from; g < end; ++g) {
      const auto [epoch, step] = binding.EpochAndStep(g);
      first_epoch = std::min(first_epoch, epoch);
      const scheduler::RankEpochView part = binding.Part(ranks[k], epoch);
      if (step >= part.steps()) continue;
      const std::span<const scheduler::SampleId> samples = part.Step(step);
      for (std::size_t i = 0; i < samples.size();) {
        // A run of consecutive samples of one file (a window of 64 time
        // steps is 64 samples of a row each) is a run of its rows, taken at
        // once: rows of a file's samples follow each other.
        const scheduler::SampleLocation at = binding.map().Locate(samples[i]);
        const std::uint64_t file_end = binding.map().FirstSample(at.file + 1);
        std::size_t j = i + 1;
        while (j < samples.size() && samples[j] == samples[j - 1] + 1 && samples[j] < file_end) ++j;
        const std::uint64_t run_rows = (j - i) * at.rows;
        for (std::uint32_t f = 0; f < fields; ++f) {
          RoundDataset& round_dataset = round_dataset_of(at.file, f);
          if (!round_dataset.dataset) continue;
          if (round_dataset.too_large_to_keep) {
            left_too_large += run_rows;
          } else if (round_dataset.left_to_readers) {
            left_to_readers += j - i;
          } else {
            // A sample of a group read whole is every row of the group. Rows
            // cached several to an entry are wanted once per entry (a round
            // claims entries: PrefetchRound::RunSmallDataset), not 256 times
            // for a group of 256 small rows.
            const CachedDataset* dataset = round_dataset.dataset.get();
            const std::uint64_t stride = dataset->grouped() ? dataset->rows_per_entry() : 1;
            for (std::uint64_t row = at.row; row < at.row + run_rows;
                 row = (row / stride + 1) * stride) {
              if (stride > 1) {
                if (row / stride == round_dataset.last_entry && g >= round_dataset.last_step)
                  continue;
                round_dataset.last_entry = row / stride;
                round_dataset.last_step = g;
              }
              wanted.push_back({.dataset = dataset, .row = row, .step = g});
            }
          }
        }
        i = j;
      }
    }
    done_until_[k] = end;
  }
  // The resolver's files stay open while rounds resolve datasets of them (a
  // group per sample resolves some in most rounds of an epoch, and their
  // metadata stays cached), and are closed once none has for kKeepFiles.
  const auto round_end = std::chrono::steady_clock::now();
  if (std::exchange(resolved_in_round_, false)) {
    follower_.FlushResolutions();  // for the next leader (a new worker every epoch)
    last_resolved_ = round_end;
  } else if (round_end - last_resolved_ > kKeepFiles) {
    WhileResolving([] { DatasetResolver::ReleaseFiles(); });
  }
  if (stop_.load()) return false;  // a resolution may have been abandoned
  if (!warmed.empty())
    Runtime::Get().stats().AddInEpoch(first_epoch, Counter::kFilesWarmed, warmed.size());
  if (left_to_readers > 0) {
    Runtime::Get().stats().AddInEpoch(first_epoch, Counter::kRowsNotPrefetchedParts,
                                      left_to_readers);
  }
  if (left_too_large > 0) {
    Runtime::Get().stats().AddInEpoch(first_epoch, Counter::kRowsNotPrefetchedLarge,
                                      left_too_large);
  }
  if (wanted.empty()) return !warmed.empty();
  PrefetchRound round(
      cache_, follower_.oracle(), executor,
      [this](const CachedDataset& d) { return follower_.FieldOf(d); },
      [this](const CachedDataset& d, std::uint64_t row, std::uint64_t step) {
        return follower_.KeyOf(d, row, step);
      },
      remote_);
  // Not on the node agent yet: its rounds also place rows with peers, and
  // slices were measured only for a node's own prefetching (one run of the
  // agents' batch-read test read 1.48 times one read per sample with them).
  if (loaders_front != UINT64_MAX && remote_ == nullptr) {
    // Before the pace is known (the first seconds of a job), the slices are
    // sized to cover the round, the last one about half of it.
    const auto slice = steps_per_second_ > 0
                           ? static_cast<std::uint64_t>(steps_per_second_ * kSliceSeconds)
                           : round_steps >> (cache::io::kMaxDeadlineSlices - 1);
    round.SetLoaderFront(loaders_front, std::max<std::uint64_t>(1, slice));
  }
  const RoundTally tally = round.Run(std::move(wanted));
  Stats& stats = Runtime::Get().stats();
  stats.AddInEpoch(first_epoch, Counter::kStorageReads, tally.storage_reads);
  stats.AddInEpoch(first_epoch, Counter::kStorageBytes, tally.storage_bytes);
  stats.AddInEpoch(first_epoch, Counter::kRowsPrefetched, tally.rows_prefetched);
  stats.AddInEpoch(first_epoch, Counter::kRowsPrefetchGivenUp, tally.rows_given_up);
  if (tally.failed_tasks > 0) {
    Runtime::Get().Fallback(Counter::kFallbackPrefetchFailed,
                            "a prefetch read failed; its rows are loaded when they are read",
                            tally.failed_tasks);
  }
  return true;
}

bool Prefetcher::WholeRowsPayAhead(const CachedDataset& dataset) {
  return !cache_.HasDatasetHint(dataset.slot(), cache::DatasetHint::kReadInParts) ||
         dataset.RowsStayCached(cache_.Stats());
}

std::shared_ptr<CachedDataset> Prefetcher::DatasetToPrefetch(FieldRef ref,
                                                             std::set<std::string>& warmed) {
  if (std::shared_ptr<CachedDataset> known = follower_.DatasetFor(ref, /*resolve=*/false)) {
    return known;
  }
  const scheduler::SampleMap& map = follower_.binding().map();
  // The file this field lives in (a field may be kept in a file of its own).
  const scheduler::FieldPlace place = map.PlaceOf(ref.file, ref.field);
  if (!WarmOnly(map.files()[ref.file].rows, place)) {
    resolved_in_round_ = true;
    std::shared_ptr<CachedDataset> resolved;
    WhileResolving([&] { resolved = follower_.DatasetFor(ref, /*resolve=*/true); });
    return abandoned_.load() ? nullptr : resolved;
  }
  std::string path(place.path);
  if (!warmed.contains(path) && WarmFile(path)) warmed.insert(std::move(path));
  return nullptr;
}

void Prefetcher::Run() noexcept {
  try {
    io::ThreadPool pool(io::ThreadPoolOptions{io_threads_});
    milliseconds idle_poll = kIdlePollMin;
    while (!stop_.load()) {
      if (!cache_.IsLeader()) {
        if (!(take_leadership_ ? cache_.TakeLeadership() : cache_.TryBecomeLeader())) {
          for (int i = 0; i < 25 && !stop_.load(); ++i)
            std::this_thread::sleep_for(milliseconds(10));
          continue;
        }
        Runtime::Get().Log(LogLevel::kInfo, "this process leads the node's prefetching");
      }
      // Idle (caught up with every rank's window): poll again soon, backing off
      // to kIdlePollMax while nothing comes. A round allocates, and an idle
      // leader polling every millisecond made a thread that allocates almost
      // always running when the training process forks its workers (under
      // AddressSanitizer, whose allocator lock a fork does not release, the
      // worker then hung in its first malloc).
      if (Round(pool)) {
        idle_poll = kIdlePollMin;
      } else {
        std::this_thread::sleep_for(idle_poll);
        idle_poll = std::min(idle_poll * 2, kIdlePollMax);
      }
    }
    // The resolver's files stay open here: the thread is stopped from HDF5's
    // termination too, whose caller holds HDF5's lock and joins this thread,
    // so no HDF5 function may be called on the way out. The next round's
    // release or HDF5's termination closes them. An abandoned thread (Stop)
    // touches nothing: the cache may be gone.
    if (!abandoned_.load()) cache_.ResignLeader();
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kWarn, std::string("prefetching stopped: ") + e.what());
  } catch (...) {
    Runtime::Get().Log(LogLevel::kWarn, "prefetching stopped: unknown exception");
  }
  finished_ = true;
}

}  // namespace prescient::vol
