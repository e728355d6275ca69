#include "vol/schedule/schedule_binding.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <exception>

#include "cache/base/mutex.h"

namespace prescient::vol {
namespace {

// An absolute path with links resolved, or the path made absolute when it
// does not exist (any more).
std::string Canonical(const std::string& path) {
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) != nullptr) return resolved;
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) != nullptr ? std::string(cwd) + "/" + path : path;
}

// Whether `path` is the file with this device and inode.
bool SameFile(const std::string& path, std::uint64_t device, std::uint64_t inode) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == device &&
         static_cast<std::uint64_t>(st.st_ino) == inode;
}

}  // namespace

std::shared_ptr<ScheduleBinding> ScheduleBinding::Open(
    const std::string& path, std::uint32_t rank,
    const std::function<void(const std::string&)>& warn,
    const std::function<void(const std::string&)>& on_rebuild) {
  try {
    scheduler::ScheduleReader reader = scheduler::ScheduleReader::Open(path);
    const scheduler::WorldLayout& layout = reader.header().layout;
    if (rank >= layout.ranks) {
      warn("PRESCIENT_SCHEDULE: " + path + " is for " + std::to_string(layout.ranks) +
           " ranks but this is rank " + std::to_string(rank) +
           " (PRESCIENT_RANK or the launcher's RANK); running without a schedule");
      return nullptr;
    }
    return std::shared_ptr<ScheduleBinding>(
        new ScheduleBinding(std::move(reader), rank, path, on_rebuild));
  } catch (const std::exception& e) {
    warn(std::string("PRESCIENT_SCHEDULE: ") + e.what() +
         "; running without a schedule (LRU, no prefetch)");
  }
  return nullptr;
}

ScheduleBinding::ScheduleBinding(scheduler::ScheduleReader reader, std::uint32_t rank,
                                 const std::string& path,
                                 const std::function<void(const std::string&)>& on_rebuild)
    : reader_(std::move(reader)),
      map_(reader_.header().map),
      rank_(rank),
      node_(reader_.header().layout.NodeOf(rank)),
      first_local_rank_(node_ * reader_.header().layout.ranks_per_node) {
  const std::optional<std::string> why_not = TryLoadIndex(path);
  index_loaded_ = !why_not;
  if (!index_loaded_) {
    if (!why_not->empty() && on_rebuild) on_rebuild(*why_not);
    index_ = scheduler::NextUseIndex::Build(reader_, node_);
  }
}

std::string ScheduleBinding::IndexPath(const std::string& schedule_path, std::uint32_t node) {
  return schedule_path + ".node" + std::to_string(node) + ".index";
}

// nullopt: loaded. "": there is none (build quietly). Else why it was not used.
std::optional<std::string> ScheduleBinding::TryLoadIndex(const std::string& schedule_path) {
  const std::string index_path = IndexPath(schedule_path, node_);
  struct stat index_stat{};
  if (::stat(index_path.c_str(), &index_stat) != 0) return std::string();
  try {
    scheduler::NextUseIndex loaded = scheduler::NextUseIndex::Load(index_path, reader_);
    const std::uint64_t last_epoch = header().epochs - 1;
    if (loaded.node() != node_ || loaded.num_samples() != header().num_samples ||
        loaded.total_steps() != reader_.EpochFirstStep(static_cast<std::uint32_t>(last_epoch)) +
                                    reader_.StepsInEpoch(static_cast<std::uint32_t>(last_epoch))) {
      return index_path + " describes another node or shape";
    }
    index_ = std::move(loaded);
    return std::nullopt;
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::vector<std::uint32_t> ScheduleBinding::LocalRanks() const {
  const scheduler::WorldLayout& layout = header().layout;
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t r = first_local_rank_;
       r < std::min(layout.ranks, first_local_rank_ + layout.ranks_per_node); ++r) {
    ranks.push_back(r);
  }
  return ranks;
}

std::optional<std::uint32_t> ScheduleBinding::LocalIndex(std::uint32_t rank) const {
  const scheduler::WorldLayout& layout = header().layout;
  if (rank < first_local_rank_ || rank >= first_local_rank_ + layout.ranks_per_node ||
      rank >= layout.ranks) {
    return std::nullopt;
  }
  return rank - first_local_rank_;
}

std::string ScheduleBinding::DescribeMap() const {
  if (!map_.has_files()) return "no dataset (made without --dataset)";
  const auto& files = map_.files();
  std::string text = std::to_string(files.size()) + (files.size() == 1 ? " file (" : " files (");
  text += files.front().path;
  if (files.size() > 1) text += " ... " + files.back().path;
  if (map_.has_field_files()) text += ", some fields in files of their own";
  if (map_.has_groups()) text += ", each a group of a file";
  text += "), field";
  text += map_.fields().size() == 1 ? " " : "s ";
  for (std::size_t f = 0; f < map_.fields().size(); ++f)
    text += (f ? ", " : "") + map_.fields()[f].dataset;
  return text;
}

std::optional<std::string_view> ScheduleBinding::PathByIdentity(std::uint64_t device,
                                                                std::uint64_t inode) const {
  cache::MutexLock lock(&mutex_);
  if (!paths_by_identity_) {
    paths_by_identity_.emplace();
    for (std::uint32_t f = 0; f < map_.files().size(); ++f) {
      for (const std::string_view path : map_.PathsOf(f)) {
        struct stat st{};
        if (::stat(std::string(path).c_str(), &st) == 0) {
          paths_by_identity_->emplace(std::make_pair(static_cast<std::uint64_t>(st.st_dev),
                                                     static_cast<std::uint64_t>(st.st_ino)),
                                      path);
        }
      }
    }
  }
  auto it = paths_by_identity_->find({device, inode});
  if (it == paths_by_identity_->end()) return std::nullopt;
  return it->second;
}

std::variant<FieldRef, std::string> ScheduleBinding::BindField(const DatasetFacts& d) const {
  if (!map_.has_files()) return std::string("the schedule names no dataset");
  const std::string canonical = Canonical(d.path);
  std::optional<std::string_view> path;
  if (map_.HasPath(canonical)) path = canonical;
  const bool by_path = path.has_value();
  if (!path) path = PathByIdentity(d.device, d.inode);
  if (!path) return d.path + " is not one of the schedule's files";
  // A file of the map may be a group of the file: the dataset's name says which.
  const std::optional<scheduler::MapSlot> slot = map_.Find(*path, d.name);
  if (!slot) return "dataset " + d.name + " is not one of the schedule's fields";
  // A file of the map may keep fields in files of their own: the field must
  // be the one this very file holds (the labels in the labels' file).
  if (map_.has_field_files()) {
    const scheduler::FieldPlace place = map_.PlaceOf(slot->file, slot->field);
    const bool here =
        by_path ? place.path == canonical : SameFile(std::string(place.path), d.device, d.inode);
    if (!here) {
      return "dataset " + d.name + " of " + d.path + " is not where the schedule keeps it (" +
             std::string(place.path) + ")";
    }
  }
  std::string mismatch =
      map_.Mismatch(slot->file, slot->field, d.rows, d.row_bytes, d.size, d.mtime_ns);
  if (!mismatch.empty()) return mismatch;
  return FieldRef{slot->file, slot->field};
}

std::uint64_t ScheduleBinding::NextUse(std::uint64_t sample,
                                       std::span<const std::uint64_t> progress) const {
  if (sample >= index_.num_samples() || progress.size() != index_.node_ranks())
    return scheduler::NextUseIndex::kNever;
  return index_.NextUse(static_cast<scheduler::SampleId>(sample), progress).step;
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
  cache::MutexLock lock(&mutex_);
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

ScheduleBinding::EpochPositions::EpochPositions(std::uint64_t num_samples,
                                                const scheduler::RankEpochView& part)
    : first_(num_samples, kAbsent), next_(part.size(), kAbsent) {
  // Built from the back, so each sample's chain runs in ascending positions.
  for (std::size_t p = part.size(); p-- > 0;) {
    const std::uint64_t sample = part.sample(p);
    if (sample >= first_.size()) continue;  // checked when the schedule was bound
    next_[p] = first_[sample];
    first_[sample] = static_cast<std::uint32_t>(p);
  }
}

std::optional<std::uint64_t> ScheduleBinding::EpochPositions::Within(std::uint64_t sample,
                                                                     std::uint64_t from,
                                                                     std::uint64_t to) const {
  if (sample >= first_.size()) return std::nullopt;
  for (std::uint32_t p = first_[sample]; p != kAbsent && p < to; p = next_[p]) {
    if (p >= from) return p;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> ScheduleBinding::EpochPositions::RunWithin(
    std::span<const std::uint64_t> samples, const scheduler::RankEpochView& part,
    std::uint64_t from, std::uint64_t to, std::uint64_t near) const {
  if (samples.empty() || samples.front() >= first_.size()) return std::nullopt;
  const std::uint64_t n = samples.size();
  const std::uint64_t end = std::min<std::uint64_t>(to, part.size());
  const std::span<const scheduler::SampleId> listed = part.samples();
  std::optional<std::uint64_t> best;
  for (std::uint32_t p = first_[samples.front()]; p != kAbsent && p + n <= end; p = next_[p]) {
    if (p < from) continue;
    // Positions ascend: past `near`, a later run is farther than one found.
    if (best && p >= near) {
      if (p - near >= near - *best) break;
    }
    std::uint64_t i = 1;
    while (i < n && listed[p + i] == samples[i]) ++i;
    if (i < n) continue;
    best = p;
    if (p >= near) break;
  }
  return best;
}

std::shared_ptr<const ScheduleBinding::EpochPositions> ScheduleBinding::PositionsOf(
    std::uint32_t epoch) const {
  {
    cache::MutexLock lock(&mutex_);
    auto it = positions_.find(epoch);
    if (it != positions_.end()) return it->second;
  }
  auto positions = std::make_shared<const EpochPositions>(header().num_samples, Part(rank_, epoch));
  cache::MutexLock lock(&mutex_);
  for (auto old = positions_.begin(); old != positions_.end();) {
    old = old->first + 1 < epoch ? positions_.erase(old) : std::next(old);
  }
  positions_.emplace(epoch, positions);
  return positions;
}

}  // namespace prescient::vol
