#include "vol/schedule/schedule_follower.h"

#include <unistd.h>

#include <exception>
#include <variant>

#include "cache/base/mutex.h"
#include "vol/runtime/runtime.h"
#include "vol/schedule/dataset_resolver.h"
#include "vol/schedule/prefetcher.h"
#include "vol/schedule/samples_of_rows.h"

namespace prescient::vol {
namespace {

// At most this many unbound datasets are remembered for the warning.
constexpr std::size_t kUnboundRemembered = 8;
// Served reads of unbound datasets, with none bound, before the warning that
// the schedule describes nothing this process reads (a job may read a few
// other datasets before the one the schedule describes).
constexpr std::uint64_t kUnboundReadsBeforeWarning = 256;

std::uint64_t FieldKey(FieldRef ref, std::size_t fields) {
  return std::uint64_t{ref.file} * fields + ref.field;
}

DatasetFacts FactsOf(const CachedDataset& dataset) {
  const FileIdentity& file = dataset.file_identity();
  return {.path = dataset.path(),
          .device = file.device,
          .inode = file.inode,
          .size = file.size,
          .mtime_ns = file.mtime_ns,
          .name = dataset.name(),
          .rows = dataset.num_rows(),
          .row_bytes = dataset.row_bytes()};
}

}  // namespace

std::shared_ptr<ScheduleBinding> ScheduleFollower::OpenBinding(const Options& options) {
  if (options.schedule_path.empty()) return nullptr;
  Runtime& runtime = Runtime::Get();
  return ScheduleBinding::Open(
      options.schedule_path, options.rank.value_or(0),
      [&](const std::string& m) { runtime.Log(LogLevel::kWarn, m); },
      [&](const std::string& why) {
        runtime.Fallback(Counter::kFallbackIndexRebuilt,
                         "PRESCIENT_SCHEDULE: the prebuilt next-use index was not used (" + why +
                             "); this process builds its own");
      });
}

std::unique_ptr<ScheduleFollower> ScheduleFollower::Create(std::shared_ptr<ScheduleBinding> binding,
                                                           const Options& options,
                                                           cache::NodeCache& cache, AdoptFn adopt,
                                                           ResolutionMemo* memo) {
  if (!binding) return nullptr;
  return std::unique_ptr<ScheduleFollower>(
      new ScheduleFollower(std::move(binding), cache, options, std::move(adopt), memo));
}

ScheduleFollower::ScheduleFollower(std::shared_ptr<ScheduleBinding> binding,
                                   cache::NodeCache& cache, const Options& options, AdoptFn adopt,
                                   ResolutionMemo* memo)
    : binding_(std::move(binding)),
      cache_(cache),
      adopt_(std::move(adopt)),
      progress_(cache, *binding_),
      ownership_(NodeOwnership::PathFor(cache.path()), binding_->node(),
                 binding_->header().num_samples),
      oracle_(*binding_, bound_, progress_, oracle_failures_, &ownership_),
      local_rank_(binding_->LocalIndex(binding_->rank()).value_or(0)),
      owner_pid_(Runtime::Get().rank_owner_pid()),
      tracker_(binding_),
      resolutions_(memo),
      prefetch_(options.prefetch),
      open_ended_(options.follow) {
  Runtime& runtime = Runtime::Get();
  runtime.stats().SetEpochs(binding_->epochs());
  std::vector<std::string> fields;
  for (const scheduler::MapField& field : binding_->map().fields()) fields.push_back(field.dataset);
  runtime.stats().SetFields(fields);
  runtime.Log(LogLevel::kInfo, "schedule " + options.schedule_path +
                                   " opened: " + binding_->DescribeMap() + " (rank " +
                                   std::to_string(binding_->rank()) + ", node " +
                                   std::to_string(binding_->node()) + ", next-use index " +
                                   (binding_->index_loaded() ? "loaded" : "built") + ")");
  // The prefetch thread starts with this process's first followed read, not
  // here: a DataLoader's main process opens the dataset only to ask its length
  // and then forks its workers, and a thread that is working (allocating,
  // holding locks) at that moment is what a fork must not find.
  if (prefetch_) {
    prefetcher_ = std::make_unique<Prefetcher>(cache_, *this, progress_, options.io_threads);
  }
}

ScheduleFollower::~ScheduleFollower() { Stop(); }

void ScheduleFollower::RunAsNodeAgent(RemoteRows* remote, std::uint64_t held_samples) {
  if (!prefetcher_) {
    prefetcher_ =
        std::make_unique<Prefetcher>(cache_, *this, progress_, Runtime::Get().options().io_threads);
  }
  prefetcher_->ServeAsNodeAgent(remote, held_samples);
  prefetcher_->EnsureRunning();
}

std::uint64_t ScheduleFollower::KeyOf(const CachedDataset& dataset, std::uint64_t row,
                                      std::uint64_t step) const {
  const std::optional<BoundFields::Entry> entry = bound_.Get(dataset.slot());
  if (!entry || entry->grouped) return step;
  const std::optional<bool> owned = ownership_.Owned(binding_->SampleOf(entry->field.file, row));
  return owned ? HeldKey(step, *owned) : step;
}

bool ScheduleFollower::Stop(StopCaller caller) { return !prefetcher_ || prefetcher_->Stop(caller); }

void ScheduleFollower::RequestStop() {
  if (prefetcher_) prefetcher_->RequestStop();
}

bool ScheduleFollower::Idle() const { return !prefetcher_ || prefetcher_->Idle(); }

void ScheduleFollower::OnRegistered(const std::shared_ptr<CachedDataset>& dataset) {
  const std::variant<FieldRef, std::string> bound = binding_->BindField(FactsOf(*dataset));
  if (const FieldRef* ref = std::get_if<FieldRef>(&bound)) {
    Bind(dataset, *ref);
    return;
  }
  const std::string& why = std::get<std::string>(bound);
  cache::MutexLock lock(&mutex_);
  // A file of the map that changed since the schedule was made is named at
  // once (and that is the one warning about unbound reads).
  if (why.find("changed") != std::string::npos) {
    Runtime::Get().Log(LogLevel::kWarn, "PRESCIENT_SCHEDULE: " + why + "; " +
                                            dataset->description() +
                                            " is cached without the schedule");
    unbound_warned_ = true;
  }
  if (unbound_.size() < kUnboundRemembered) {
    unbound_.emplace(dataset->slot(), dataset->description() + " (" + why + ")");
  }
}

void ScheduleFollower::Bind(const std::shared_ptr<CachedDataset>& dataset, FieldRef ref) {
  if (!bound_.Set(dataset->slot(), {.field = ref, .grouped = dataset->grouped()})) return;
  cache::MutexLock lock(&mutex_);
  datasets_[FieldKey(ref, binding_->map().fields().size())] = dataset;
  if (field_row_bytes_.size() < binding_->map().fields().size())
    field_row_bytes_.resize(binding_->map().fields().size(), 0);
  if (field_row_bytes_[ref.field] == 0) field_row_bytes_[ref.field] = dataset->row_bytes();
  Runtime::Get().Log(LogLevel::kInfo, "schedule bound to " + dataset->description() + " (file " +
                                          std::to_string(ref.file) + ", field " +
                                          binding_->map().DatasetOf(ref.file, ref.field) + ")");
}

std::uint64_t ScheduleFollower::BytesPerSample() const {
  if (const std::uint64_t mapped = binding_->map().bytes_per_sample(); mapped != 0) return mapped;
  cache::MutexLock lock(&mutex_);
  if (field_row_bytes_.size() < binding_->map().fields().size()) return 0;
  std::uint64_t bytes = 0;
  for (std::uint64_t b : field_row_bytes_) {
    if (b == 0) return 0;
    bytes += b;
  }
  return binding_->map().SampleBytes(bytes);
}

std::optional<std::uint32_t> ScheduleFollower::FieldOf(const CachedDataset& dataset) const {
  const std::optional<BoundFields::Entry> entry = bound_.Get(dataset.slot());
  if (!entry) return std::nullopt;
  return entry->field.field;
}

std::optional<FieldRef> ScheduleFollower::FieldRefOf(const CachedDataset& dataset) const {
  const std::optional<BoundFields::Entry> entry = bound_.Get(dataset.slot());
  if (!entry) return std::nullopt;
  return entry->field;
}

std::shared_ptr<CachedDataset> ScheduleFollower::DatasetFor(FieldRef ref, bool resolve) {
  const std::uint64_t key = FieldKey(ref, binding_->map().fields().size());
  {
    cache::MutexLock lock(&mutex_);
    if (auto it = datasets_.find(key); it != datasets_.end()) return it->second;
    if (!resolve || unresolvable_.count(key) > 0) return nullptr;
  }
  // Prepared here, on the prefetch thread, without any lock of ours held.
  const std::string path(binding_->map().PlaceOf(ref.file, ref.field).path);
  const std::string name = binding_->map().DatasetOf(ref.file, ref.field);
  const std::uint64_t remembered = resolutions_ ? resolutions_->tally().found : 0;
  cache::io::Result<std::shared_ptr<CachedDataset>> resolved =
      DatasetResolver::Resolve(path, name, /*only_hdf5_thread=*/false, resolutions_);
  std::shared_ptr<CachedDataset> dataset;
  std::string why;
  if (!resolved.ok()) {
    why = resolved.status().message();
  } else {
    // The memo counts what it gave: more than before is this dataset.
    const bool from_memo = resolutions_ && resolutions_->tally().found > remembered;
    Runtime::Get().stats().Add(from_memo ? Counter::kDatasetsFromMemo : Counter::kDatasetsResolved);
    if (!(dataset = adopt_(resolved.value()))) why = "could not be registered in the node cache";
  }
  if (dataset) {
    const std::variant<FieldRef, std::string> bound = binding_->BindField(FactsOf(*dataset));
    if (const FieldRef* got = std::get_if<FieldRef>(&bound); got != nullptr && *got == ref) {
      Bind(dataset, ref);
      return dataset;
    }
    why = std::holds_alternative<std::string>(bound) ? std::get<std::string>(bound)
                                                     : "the file is another of the map's";
  }
  // Once per dataset (it is not tried again): its rows are read on demand.
  Runtime::Get().Log(LogLevel::kInfo, "prefetch: " + path + ":" + name +
                                          " cannot be prepared ahead of the job (" + why +
                                          "); its rows are read when they are read");
  cache::MutexLock lock(&mutex_);
  unresolvable_.emplace(key, why);
  return nullptr;
}

void ScheduleFollower::FlushResolutions() {
  if (resolutions_) DatasetResolver::FlushMemo(*resolutions_);
}

void ScheduleFollower::NoteUnbound(const CachedDataset& dataset) {
  std::string list;
  {
    cache::MutexLock lock(&mutex_);
    if (unbound_warned_ || bound_.bound() > 0) return;
    if (++unbound_reads_ < kUnboundReadsBeforeWarning) return;
    unbound_warned_ = true;
    for (const auto& [slot, text] : unbound_) list += (list.empty() ? "" : "; ") + text;
  }
  if (list.empty()) list = dataset.description();
  // A schedule file that names other files than the job reads is a mistake
  // worth a warning. A followed schedule names what the followed loader read:
  // a process that reads only other datasets (the workers of a validation
  // loader, a statistics file) is doing nothing wrong.
  Runtime::Get().Log(open_ended_ ? LogLevel::kInfo : LogLevel::kWarn,
                     "PRESCIENT_SCHEDULE describes " + binding_->DescribeMap() +
                         ", but this process reads " + list +
                         ": its reads are cached without the schedule (LRU, no prefetch)");
}

void ScheduleFollower::OnRead(const CachedDataset& dataset, std::span<const std::uint64_t> rows,
                              ReadRecord* record, ReadKeys* keys) {
  const std::optional<BoundFields::Entry> entry = bound_.Get(dataset.slot());
  if (!entry) {
    NoteUnbound(dataset);
    return;
  }
  keys->field = entry->field.field;
  record->field = entry->field.field;
  if (tracker_.abandoned()) return;

  // The samples the read's rows belong to: a group read whole (a sample of
  // 256 rows) is one sample read, observed and counted once.
  thread_local std::vector<std::uint64_t> reused;  // no allocation per read
  std::vector<std::uint64_t>& samples = reused;    // the thread's vector, looked up once
  const std::uint32_t file = entry->field.file;
  SamplesOfRows(rows, [&](std::uint64_t row) { return binding_->SampleOf(file, row); }, samples);
  const PositionTracker::Observation o =
      tracker_.ObserveRead(samples, progress_.PlacementOf(binding_->rank()));
  record->schedule_matches += o.matched;
  record->schedule_mismatches += o.mismatched;
  Runtime& runtime = Runtime::Get();
  if (o.matched > 0) {
    progress_.Report(binding_->rank(), o.global_step, owner_pid_);
    // A followed schedule ends where the epochs known so far end, not where
    // the rank's reading ends.
    if (!open_ended_ && o.global_step + 1 >= binding_->total_steps()) {
      progress_.Finish(binding_->rank());
    }
    record->epoch = o.epoch;
    keys->oracle.emplace(*binding_, bound_, progress_, oracle_failures_, &ownership_, local_rank_,
                         o.global_step);
  }
  if (tracker_.abandoned() && !abandoned_warned_) {
    abandoned_warned_ = true;
    // Followed at run time, an epoch whose rows are still being learned is
    // expected to leave it: the next published schedule is followed afresh.
    runtime.Log(open_ended_ ? LogLevel::kInfo : LogLevel::kWarn,
                "reads keep leaving the order in PRESCIENT_SCHEDULE (" +
                    std::to_string(PositionTracker::kMaxMismatches) +
                    " in a row); this process stops following it. Reads stay "
                    "correct.");
    // Asked, not joined: this is a read callback, under HDF5's lock, and the
    // prefetch thread may be resolving a dataset, which waits for that lock.
    // It stops at its next look (joined at shutdown, or left: Stop).
    if (prefetcher_) prefetcher_->RequestStop();
  }
  if (prefetcher_ && !tracker_.abandoned()) prefetcher_->EnsureRunning();
  const std::uint64_t failures = oracle_failures_.load(std::memory_order_relaxed);
  if (failures > oracle_failures_reported_) {
    runtime.Fallback(Counter::kFallbackOracleFailed,
                     "a next-use query failed; the row was keyed as never used again",
                     failures - oracle_failures_reported_);
    oracle_failures_reported_ = failures;
  }
}

}  // namespace prescient::vol
