#include "vol/runtime/stats.h"

#include <cstdio>
#include <iterator>
#include <sstream>

#include "cache/base/mutex.h"

namespace prescient::vol {
namespace {

constexpr const char* kTopLevelNames[] = {
    "files_opened",
    "datasets_opened",
    "datasets_too_small",
    "virtual_datasets_raw",
    "virtual_datasets_through_hdf5",
    "datasets_through_hdf5",
    "reads",
    "reads_simple",
    "reads_whole_rows",
    "reads_row_parts",
    "reads_row_parts_narrow",
    "reads_row_parts_narrow_served",
    "reads_row_parts_narrow_split",
    "rows_narrow_through_hdf5",
    "reads_compound_fields",
    "reads_scalar",
    "reads_undecoded",
    "reads_forwarded",
    "reads_forwarded_transfer",
    "rows",
    "bytes",
    "reads_served",
    "rows_hit",
    "rows_loaded",
    "rows_waited",
    "rows_not_awaited",
    "rows_prefetched",
    "rows_read_around",
    "rows_admitted_behind",
    "rows_admitted_behind_declined",
    "rows_admitted_read_again",
    "reads_admit_no_spare_cpu",
    "reads_admit_small",
    "rows_not_admitted",
    "rows_not_kept_busy",
    "admit_ns",
    "files_warmed",
    "datasets_resolved",
    "datasets_from_memo",
    "rows_not_prefetched_parts",
    "rows_not_prefetched_large",
    "rows_prefetch_given_up",
    "raw_file_opens",
    "rows_remote",
    "rows_served",
    "storage_reads",
    "storage_bytes",
    "stall_ns",
    "stall_storage_ns",
    "stall_wait_ns",
    "schedule_matches",
    "schedule_mismatches",
    "fallback_serve_failed",
    "fallback_file_changed",
    "fallback_prefetch_failed",
    "fallback_oracle_failed",
    "fallback_index_rebuilt",
    "fallback_written",
    "fallback_peer_failed",
};
constexpr std::size_t kTopLevel = sizeof(kTopLevelNames) / sizeof(kTopLevelNames[0]);
constexpr const char* kFieldNames[] = {"rows_hit",        "rows_loaded",      "rows_waited",
                                       "rows_prefetched", "rows_read_around", "rows_remote",
                                       "rows_served"};
static_assert(std::size(kFieldNames) == static_cast<std::size_t>(FieldCounter::kCount));
constexpr const char* kNodeNames[] = {"hits",
                                      "misses",
                                      "waits",
                                      "evictions",
                                      "rejections",
                                      "prefetch_declined",
                                      "recoveries",
                                      "takeovers",
                                      "stall_takeovers",
                                      "leader_takeovers",
                                      "claims_released_late",
                                      "corruptions",
                                      "backing_failures",
                                      "dropped_rows",
                                      "rows_resident",
                                      "bytes_resident",
                                      "backed_bytes",
                                      "capacity_bytes"};
static_assert(std::size(kNodeNames) == static_cast<std::size_t>(NodeCounter::kCount));

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}
static_assert(kTopLevel == static_cast<std::size_t>(Counter::kSelectionNone));
constexpr std::size_t kSelectionKinds =
    static_cast<std::size_t>(Counter::kForwardedFirst) - kTopLevel;
static_assert(kSelectionKinds == static_cast<std::size_t>(SelectionKind::kPoints) + 1);

}  // namespace

void Stats::AddLocked(std::optional<std::uint32_t> epoch, Counter counter, std::uint64_t delta) {
  const auto index = static_cast<std::size_t>(counter);
  values_[index] += delta;
  file_.Add(index, delta);
  const std::uint32_t e = epoch.value_or(current_epoch_);
  if (e < epochs_.size()) {
    epochs_[e][index] += delta;
    file_.Add(values_.size() * (1 + e) + index, delta);
  }
}

void Stats::Add(Counter counter, std::uint64_t delta) {
  cache::MutexLock lock(&mutex_);
  AddLocked(std::nullopt, counter, delta);
}

void Stats::AddInEpoch(std::uint32_t epoch, Counter counter, std::uint64_t delta) {
  cache::MutexLock lock(&mutex_);
  AddLocked(epoch, counter, delta);
}

void Stats::Commit(const ReadRecord& read) {
  cache::MutexLock lock(&mutex_);
  // (A lambda would hide the lock from clang's thread-safety analysis.)
  const auto add = [this](Counter counter, std::uint64_t delta) REQUIRES(mutex_) {
    if (delta != 0) AddLocked(std::nullopt, counter, delta);
  };
  // Set here, under the lock the read's counts take anyway: a read pays one
  // lock for its statistics.
  if (read.epoch) current_epoch_ = *read.epoch;
  add(Counter::kReads, 1);
  if (!read.served) {
    // Every forwarded read has its reason; one without (never expected) is
    // counted as a failed serve rather than left out of the sum.
    const ForwardReason reason =
        read.forward_reason == ForwardReason::kNone ? ForwardReason::kFailed : read.forward_reason;
    add(ForwardedCounter(reason), 1);
  }
  if (!read.inspected) {
    add(Counter::kReadsForwarded, 1);
    return;
  }
  add(Counter::kReadsTransferForwarded, read.transfer_forwarded ? 1 : 0);
  if (!read.decoded) {
    add(Counter::kReadsUndecoded, 1);
  } else {
    add(Counter::kReadsSimple, read.simple ? 1 : 0);
    add(Counter::kReadsWholeRows, read.selection.whole_rows ? 1 : 0);
    add(Counter::kReadsRowParts, read.selection.row_part.empty() ? 0 : 1);
    add(Counter::kReadsRowPartsNarrow, read.narrow_row_part ? 1 : 0);
    add(Counter::kReadsRowPartsNarrowServed, read.narrow_row_part && read.served ? 1 : 0);
    add(Counter::kReadsRowPartsNarrowSplit, read.narrow_in_part ? 1 : 0);
    add(Counter::kRowsNarrowThroughHdf5, read.rows_narrow_through_hdf5);
    add(Counter::kReadsCompoundFields, read.fields_gathered ? 1 : 0);
    add(Counter::kReadsScalar, read.selection.scalar ? 1 : 0);
    add(Counter::kRows, read.selection.rows.rows());
    add(Counter::kBytes, read.bytes);
    add(static_cast<Counter>(static_cast<std::size_t>(Counter::kSelectionNone) +
                             static_cast<std::size_t>(read.selection.kind)),
        1);
  }
  add(read.served ? Counter::kReadsServed : Counter::kReadsForwarded, 1);
  add(Counter::kRowsHit, read.rows_hit);
  add(Counter::kRowsLoaded, read.rows_loaded);
  add(Counter::kRowsWaited, read.rows_waited);
  add(Counter::kRowsNotAwaited, read.rows_not_awaited);
  add(Counter::kRowsReadAround, read.rows_read_around);
  add(Counter::kRowsAdmittedBehind, read.rows_admitted_behind);
  add(Counter::kRowsAdmittedReadAgain, read.rows_admitted_read_again);
  add(Counter::kRowsNotAdmitted, read.rows_not_admitted);
  add(Counter::kRowsNotKeptBusy, read.rows_not_kept_busy);
  add(Counter::kAdmitNs, read.admit_ns);
  add(Counter::kStorageReads, read.storage_reads);
  add(Counter::kStorageBytes, read.storage_bytes);
  add(Counter::kStallNs, read.stall_storage_ns + read.stall_wait_ns);
  add(Counter::kStallStorageNs, read.stall_storage_ns);
  add(Counter::kStallWaitNs, read.stall_wait_ns);
  add(Counter::kScheduleMatches, read.schedule_matches);
  add(Counter::kScheduleMismatches, read.schedule_mismatches);
  if (read.field && *read.field < fields_.size()) {
    AddFieldLocked(*read.field, FieldCounter::kRowsHit, read.rows_hit);
    AddFieldLocked(*read.field, FieldCounter::kRowsLoaded, read.rows_loaded);
    AddFieldLocked(*read.field, FieldCounter::kRowsWaited, read.rows_waited);
    AddFieldLocked(*read.field, FieldCounter::kRowsReadAround, read.rows_read_around);
  }
}

std::size_t Stats::FieldSlot(std::uint32_t field, FieldCounter counter) const {
  return values_.size() * (1 + epochs_.size()) + field * std::size(kFieldNames) +
         static_cast<std::size_t>(counter);
}

void Stats::AddFieldLocked(std::uint32_t field, FieldCounter counter, std::uint64_t delta) {
  if (delta == 0 || field >= fields_.size()) return;
  fields_[field][static_cast<std::size_t>(counter)] += delta;
  file_.Add(FieldSlot(field, counter), delta);
}

void Stats::AddField(std::uint32_t field, FieldCounter counter, std::uint64_t delta) {
  cache::MutexLock lock(&mutex_);
  AddFieldLocked(field, counter, delta);
}

std::uint64_t Stats::GetField(std::uint32_t field, FieldCounter counter) const {
  cache::MutexLock lock(&mutex_);
  return field < fields_.size() ? fields_[field][static_cast<std::size_t>(counter)] : 0;
}

void Stats::SetFields(const std::vector<std::string>& names) {
  cache::MutexLock lock(&mutex_);
  if (names == field_names_) return;
  field_names_ = names;
  fields_.assign(names.size(), FieldValues{});
  if (file_.is_open()) {
    file_.Abandon();
    OpenFileLocked();
  }
}

std::uint64_t Stats::Get(Counter counter) const {
  cache::MutexLock lock(&mutex_);
  return values_[static_cast<std::size_t>(counter)];
}

std::uint64_t Stats::GetInEpoch(std::uint32_t epoch, Counter counter) const {
  cache::MutexLock lock(&mutex_);
  return epoch < epochs_.size() ? epochs_[epoch][static_cast<std::size_t>(counter)] : 0;
}

std::size_t Stats::NodeSlot(NodeCounter counter) const {
  return values_.size() * (1 + epochs_.size()) + fields_.size() * std::size(kFieldNames) +
         static_cast<std::size_t>(counter);
}

void Stats::SetNode(const std::string& segment, const NodeValues& values) {
  cache::MutexLock lock(&mutex_);
  node_ = values;
  if (node_segment_ != segment) {
    node_segment_ = segment;
    if (file_.is_open()) {
      file_.Abandon();
      OpenFileLocked();  // same path, with the node block; seeded with node_
    }
    return;
  }
  if (!file_.is_open()) return;
  for (std::size_t i = 0; i < node_.size(); ++i) {
    file_.Set(NodeSlot(static_cast<NodeCounter>(i)), node_[i]);
  }
}

void Stats::SetEpochs(std::uint32_t epochs) {
  cache::MutexLock lock(&mutex_);
  if (epochs <= epochs_.size()) return;
  epochs_.resize(epochs, Values{});
  if (file_.is_open()) {
    file_.Abandon();
    OpenFileLocked();  // same path, larger layout; errors were reported at first open
  }
}

std::string Stats::Render(const ProcessInfo& process, bool markers) const {
  auto block = [&](std::ostringstream& out, const Values& values, const char* indent) {
    auto field = [&](std::size_t i) {
      return markers ? LiveStatsFile::Marker() : std::to_string(values[i]);
    };
    for (std::size_t i = 0; i < kTopLevel; ++i) {
      out << indent << '"' << kTopLevelNames[i] << "\": " << field(i) << ",\n";
    }
    out << indent << "\"selections\": {";
    for (std::size_t k = 0; k < kSelectionKinds; ++k) {
      out << (k ? ", " : "") << '"' << SelectionKindName(static_cast<SelectionKind>(k))
          << "\": " << field(kTopLevel + k);
    }
    out << "},\n" << indent << "\"forwarded\": {";
    constexpr auto kFirst = static_cast<std::size_t>(Counter::kForwardedFirst);
    for (std::size_t k = kFirst; k < static_cast<std::size_t>(Counter::kCount); ++k) {
      out << (k > kFirst ? ", " : "") << '"'
          << ForwardReasonName(static_cast<ForwardReason>(k - kFirst + 1)) << "\": " << field(k);
    }
    out << "}";
  };
  std::ostringstream out;
  out << "{\n"
      << "  \"prescient_stats_version\": 1,\n"
      << "  \"pid\": " << process.pid << ",\n"
      << "  \"parent_pid\": " << process.parent_pid << ",\n"
      << "  \"forked_child\": " << (process.forked_child ? "true" : "false") << ",\n"
      << "  \"enabled\": " << (process.enabled ? "true" : "false") << ",\n";
  block(out, values_, "  ");
  out << ",\n  \"epochs\": [";
  for (std::size_t e = 0; e < epochs_.size(); ++e) {
    out << (e ? ",\n" : "\n") << "    {\"epoch\": " << e << ",\n";
    block(out, epochs_[e], "     ");
    out << "}";
  }
  out << (epochs_.empty() ? "]" : "\n  ]");
  out << ",\n  \"fields\": [";
  for (std::size_t f = 0; f < fields_.size(); ++f) {
    out << (f ? ",\n" : "\n") << "    {\"field\": " << JsonString(field_names_[f]);
    for (std::size_t c = 0; c < std::size(kFieldNames); ++c) {
      out << ", \"" << kFieldNames[c]
          << "\": " << (markers ? LiveStatsFile::Marker() : std::to_string(fields_[f][c]));
    }
    out << "}";
  }
  out << (fields_.empty() ? "]" : "\n  ]");
  if (!node_segment_.empty()) {
    out << ",\n  \"node\": {\"segment\": " << JsonString(node_segment_);
    for (std::size_t i = 0; i < node_.size(); ++i) {
      out << ", \"" << kNodeNames[i]
          << "\": " << (markers ? LiveStatsFile::Marker() : std::to_string(node_[i]));
    }
    out << "}";
  }
  out << "\n}\n";
  return out.str();
}

std::string Stats::OpenFileLocked() {
  std::string error = file_.Open(file_path_, Render(file_process_, /*markers=*/true));
  if (!error.empty()) return error;
  for (std::size_t i = 0; i < values_.size(); ++i) file_.Set(i, values_[i]);
  for (std::size_t e = 0; e < epochs_.size(); ++e) {
    for (std::size_t i = 0; i < values_.size(); ++i)
      file_.Set(values_.size() * (1 + e) + i, epochs_[e][i]);
  }
  for (std::uint32_t f = 0; f < fields_.size(); ++f) {
    for (std::size_t c = 0; c < std::size(kFieldNames); ++c)
      file_.Set(FieldSlot(f, static_cast<FieldCounter>(c)), fields_[f][c]);
  }
  if (!node_segment_.empty()) {
    for (std::size_t i = 0; i < node_.size(); ++i)
      file_.Set(NodeSlot(static_cast<NodeCounter>(i)), node_[i]);
  }
  return {};
}

std::string Stats::StartFile(const std::string& path, const ProcessInfo& process) {
  cache::MutexLock lock(&mutex_);
  if (file_.is_open()) return {};
  file_path_ = path;
  file_process_ = process;
  return OpenFileLocked();
}

bool Stats::has_file() const {
  cache::MutexLock lock(&mutex_);
  return file_.is_open();
}

void Stats::LockForFork() { mutex_.Lock(); }

void Stats::UnlockInParent() { mutex_.Unlock(); }

void Stats::ResetInChild() {
  values_.fill(0);
  for (Values& e : epochs_) e.fill(0);
  for (FieldValues& f : fields_) f.fill(0);
  file_.Abandon();
  mutex_.Unlock();
}

std::string Stats::ToJson(const ProcessInfo& process) const {
  cache::MutexLock lock(&mutex_);
  return Render(process, /*markers=*/false);
}

}  // namespace prescient::vol
