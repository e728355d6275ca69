#include "vol/schedule/schedule_binding.h"

#include <sys/stat.h>

#include <algorithm>
#include <exception>

namespace prescient::vol {

std::shared_ptr<ScheduleBinding> ScheduleBinding::Open(
    const std::string& path, std::uint32_t rank,
    const std::function<void(const std::string&)>& warn) {
  try {
    scheduler::ScheduleReader reader = scheduler::ScheduleReader::Open(path);
    const scheduler::WorldLayout& layout = reader.header().layout;
    if (rank >= layout.ranks) {
      warn("PRESCIENT_SCHEDULE: " + path + " is for " + std::to_string(layout.ranks) +
           " ranks but this is rank " + std::to_string(rank) +
           " (PRESCIENT_RANK or the launcher's RANK); running without a schedule");
      return nullptr;
    }
    return std::shared_ptr<ScheduleBinding>(new ScheduleBinding(std::move(reader), rank, path));
  } catch (const std::exception& e) {
    warn(std::string("PRESCIENT_SCHEDULE: ") + e.what() +
         "; running without a schedule (LRU, no prefetch)");
  }
  return nullptr;
}

ScheduleBinding::ScheduleBinding(scheduler::ScheduleReader reader, std::uint32_t rank,
                                 const std::string& path)
    : reader_(std::move(reader)), rank_(rank), node_(reader_.header().layout.NodeOf(rank)) {
  index_loaded_ = TryLoadIndex(path);
  if (!index_loaded_) index_ = scheduler::NextUseIndex::Build(reader_, node_);
}

std::string ScheduleBinding::IndexPath(const std::string& schedule_path, std::uint32_t node) {
  return schedule_path + ".node" + std::to_string(node) + ".index";
}

bool ScheduleBinding::TryLoadIndex(const std::string& schedule_path) {
  const std::string index_path = IndexPath(schedule_path, node_);
  struct stat index_stat{}, schedule_stat{};
  if (::stat(index_path.c_str(), &index_stat) != 0 ||
      ::stat(schedule_path.c_str(), &schedule_stat) != 0 ||
      index_stat.st_mtim.tv_sec < schedule_stat.st_mtim.tv_sec) {
    return false;  // none, or older than the schedule it would describe
  }
  try {
    scheduler::NextUseIndex loaded = scheduler::NextUseIndex::Load(index_path, reader_);
    const std::uint64_t last_epoch = header().epochs - 1;
    if (loaded.node() != node_ || loaded.num_samples() != header().num_samples ||
        loaded.total_steps() != reader_.EpochFirstStep(static_cast<std::uint32_t>(last_epoch)) +
                                    reader_.StepsInEpoch(static_cast<std::uint32_t>(last_epoch))) {
      return false;
    }
    index_ = std::move(loaded);
    return true;
  } catch (const std::exception&) {
    return false;  // unreadable or corrupt: build instead
  }
}

std::vector<std::uint32_t> ScheduleBinding::LocalRanks() const {
  const scheduler::WorldLayout& layout = header().layout;
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t r = node_ * layout.ranks_per_node;
       r < std::min(layout.ranks, (node_ + 1) * layout.ranks_per_node); ++r) {
    ranks.push_back(r);
  }
  return ranks;
}

std::string ScheduleBinding::Mismatch(std::uint64_t rows, std::uint64_t row_bytes,
                                      std::uint64_t file_size, std::int64_t mtime_ns) const {
  const scheduler::DatasetFingerprint& want = header().dataset;
  if (want.rows != rows)
    return "it has " + std::to_string(rows) + " rows, the schedule " + std::to_string(want.rows);
  if (want.row_bytes != 0 && want.row_bytes != row_bytes) {  // 0: the tool was not told
    return "its rows are " + std::to_string(row_bytes) + " bytes, the schedule's " +
           std::to_string(want.row_bytes);
  }
  if (want.file_size != file_size || want.mtime_ns != mtime_ns) {
    return "the file changed since the schedule was made (size or modification time differ)";
  }
  return {};
}

std::uint64_t ScheduleBinding::NextUse(std::uint64_t sample, std::uint64_t now) const {
  if (sample >= index_.num_samples()) return scheduler::NextUseIndex::kNever;
  return index_.NextUseAfter(static_cast<scheduler::SampleId>(sample), now);
}

std::pair<std::uint32_t, std::uint64_t> ScheduleBinding::EpochAndStep(
    std::uint64_t global_step) const {
  // Epochs are few; a linear scan from the end is cheaper than it looks.
  for (std::uint32_t e = epochs(); e-- > 0;) {
    const std::uint64_t first = index_.EpochFirstStep(e);
    if (global_step >= first) return {e, global_step - first};
  }
  return {0, 0};
}

scheduler::RankEpochView ScheduleBinding::Part(std::uint32_t rank, std::uint32_t epoch) const {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(rank, epoch);
  auto it = parts_.find(key);
  if (it != parts_.end()) return it->second;
  scheduler::RankEpochView view = reader_.Part(rank, epoch);
  // Keep the two most recent epochs of each rank.
  for (auto old = parts_.begin(); old != parts_.end();) {
    old = (old->first.first == rank && old->first.second + 1 < epoch) ? parts_.erase(old)
                                                                      : std::next(old);
  }
  parts_.emplace(key, view);
  return view;
}

std::shared_ptr<const std::vector<std::uint32_t>> ScheduleBinding::PositionsOf(
    std::uint32_t epoch) const {
  {
    std::lock_guard lock(mutex_);
    auto it = positions_.find(epoch);
    if (it != positions_.end()) return it->second;
  }
  const scheduler::RankEpochView part = Part(rank_, epoch);
  auto positions = std::make_shared<std::vector<std::uint32_t>>(header().num_samples, kAbsent);
  for (std::size_t p = 0; p < part.size(); ++p) {
    std::uint32_t& slot = (*positions)[part.sample(p)];
    if (slot == kAbsent) slot = static_cast<std::uint32_t>(p);  // padding repeats: first position
  }
  std::lock_guard lock(mutex_);
  for (auto old = positions_.begin(); old != positions_.end();) {
    old = old->first + 1 < epoch ? positions_.erase(old) : std::next(old);
  }
  positions_.emplace(epoch, positions);
  return positions;
}

std::uint64_t ScheduleOracle::NextUse(cache::DatasetSlot ds, std::uint64_t row,
                                      std::uint64_t now) const noexcept {
  if (ds != slot_) return kNever;
  if (rows_per_entry_ > 1) return now + 1;
  try {
    const std::uint64_t next = binding_->NextUse(row, now);
    return next == scheduler::NextUseIndex::kNever ? kNever : next;
  } catch (...) {
    return kNever;
  }
}

std::uint64_t ReadOracle::NextUse(cache::DatasetSlot ds, std::uint64_t row,
                                  std::uint64_t now) const noexcept {
  if (ds != slot_) return kNever;
  if (rows_per_entry_ > 1) return std::max(now, read_step_) + 1;
  try {
    const std::uint64_t next = binding_.NextUse(row, std::max(now, read_step_));
    return next == scheduler::NextUseIndex::kNever ? kNever : next;
  } catch (...) {
    return kNever;
  }
}

}  // namespace prescient::vol
