#include "vol/stats.h"

#include <sstream>

namespace prescient::vol {
namespace {

constexpr const char* kTopLevelNames[] = {
    "files_opened",
    "datasets_opened",
    "reads",
    "reads_simple",
    "reads_whole_rows",
    "reads_scalar",
    "reads_undecoded",
    "reads_forwarded",
    "rows",
    "bytes",
    "reads_served",
    "rows_hit",
    "rows_loaded",
    "rows_waited",
    "rows_prefetched",
    "storage_reads",
    "storage_bytes",
    "stall_ns",
    "schedule_matches",
    "schedule_mismatches",
};
constexpr std::size_t kTopLevel = sizeof(kTopLevelNames) / sizeof(kTopLevelNames[0]);
static_assert(kTopLevel == static_cast<std::size_t>(Counter::kSelectionNone));

}  // namespace

void Stats::AddLocked(Counter counter, std::uint64_t delta) {
  const auto index = static_cast<std::size_t>(counter);
  values_[index] += delta;
  file_.Add(index, delta);
}

void Stats::Add(Counter counter, std::uint64_t delta) {
  std::lock_guard lock(mutex_);
  AddLocked(counter, delta);
}

void Stats::CountRead(const DecodedSelection& selection, bool simple, std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  AddLocked(Counter::kReads, 1);
  if (simple) AddLocked(Counter::kReadsSimple, 1);
  if (selection.whole_rows) AddLocked(Counter::kReadsWholeRows, 1);
  if (selection.scalar) AddLocked(Counter::kReadsScalar, 1);
  AddLocked(Counter::kRows, selection.rows.rows());
  AddLocked(Counter::kBytes, bytes);
  AddLocked(static_cast<Counter>(static_cast<std::size_t>(Counter::kSelectionNone) +
                                 static_cast<std::size_t>(selection.kind)),
            1);
}

std::uint64_t Stats::Get(Counter counter) const {
  std::lock_guard lock(mutex_);
  return values_[static_cast<std::size_t>(counter)];
}

std::string Stats::Render(const ProcessInfo& process, const std::uint64_t* values) {
  // With values == nullptr, counter fields are LiveStatsFile markers.
  auto field = [&](std::size_t i) {
    return values ? std::to_string(values[i]) : LiveStatsFile::Marker();
  };
  std::ostringstream out;
  out << "{\n"
      << "  \"prescient_stats_version\": 1,\n"
      << "  \"pid\": " << process.pid << ",\n"
      << "  \"parent_pid\": " << process.parent_pid << ",\n"
      << "  \"forked_child\": " << (process.forked_child ? "true" : "false") << ",\n"
      << "  \"enabled\": " << (process.enabled ? "true" : "false") << ",\n";
  for (std::size_t i = 0; i < kTopLevel; ++i)
    out << "  \"" << kTopLevelNames[i] << "\": " << field(i) << ",\n";
  out << "  \"selections\": {";
  for (std::size_t k = 0; k + kTopLevel < static_cast<std::size_t>(Counter::kCount); ++k) {
    out << (k ? ", " : "") << '"' << SelectionKindName(static_cast<SelectionKind>(k))
        << "\": " << field(kTopLevel + k);
  }
  out << "}\n}\n";
  return out.str();
}

std::string Stats::StartFile(const std::string& path, const ProcessInfo& process) {
  std::lock_guard lock(mutex_);
  if (file_.is_open()) return {};
  std::string error = file_.Open(path, Render(process, nullptr));
  if (!error.empty()) return error;
  for (std::size_t i = 0; i < values_.size(); ++i) file_.Set(i, values_[i]);
  return {};
}

bool Stats::has_file() const {
  std::lock_guard lock(mutex_);
  return file_.is_open();
}

void Stats::ForkedChild() {
  // The child is single-threaded here; the mutex may have been held by another
  // thread of the parent at fork time, so it is re-created, not locked.
  new (&mutex_) std::mutex();
  values_.fill(0);
  file_.Abandon();
}

std::string Stats::ToJson(const ProcessInfo& process) const {
  std::lock_guard lock(mutex_);
  return Render(process, values_.data());
}

}  // namespace prescient::vol
