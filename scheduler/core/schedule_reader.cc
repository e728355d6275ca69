// Reading schedule files: validate the fixed parts at open, read each part's
// lists on first use (pread into memory the reader owns, CRC-checked), and
// regenerate recipe parts on demand. Nothing is mapped: a file truncated or
// rewritten in place under an open reader gives an error, never a SIGBUS.
#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "scheduler/core/loader_orders.h"
#include "scheduler/core/loader_spec.h"
#include "scheduler/core/read_only_file.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/core/schedule_format.h"

namespace prescient::scheduler {

using Code = ScheduleFileErrorCode;

namespace {

// One (rank, epoch) of a lists file, read and verified.
struct PartData {
  std::vector<SampleId> samples;
  std::vector<std::uint64_t> step_begin;
  std::uint64_t bytes() const { return samples.size() * 4 + step_begin.size() * 8; }
};

// Parts read recently stay in memory up to this many bytes (oldest dropped
// first), so a caller that asks for the same part again and again (without
// holding its view) does not read and checksum it every time. Parts whose
// views are still held elsewhere are shared whatever their age.
constexpr std::uint64_t kRecentPartBytes = 64ull << 20;

}  // namespace

struct ScheduleReader::Impl {
  [[noreturn]] void Fail(Code code, const std::string& what) const {
    throw ScheduleFileError(code, "schedule file '" + name + "': " + what);
  }

  // Up to out.size() bytes at `offset` of the file (or of the bytes given to
  // OpenBytes); fewer only past the end.
  std::size_t ReadAt(std::uint64_t offset, std::span<std::byte> out) const {
    if (file) return file->ReadAt(offset, out);
    if (out.empty() || offset >= memory.size()) return 0;
    const std::size_t n = std::min<std::uint64_t>(out.size(), memory.size() - offset);
    std::memcpy(out.data(), memory.data() + offset, n);
    return n;
  }
  // Exactly out.size() bytes, else kTruncated: the file shrank after Open.
  void ReadExactly(std::uint64_t offset, std::span<std::byte> out, const std::string& what) const {
    if (ReadAt(offset, out) != out.size()) {
      Fail(Code::kTruncated, what +
                                 ": the file is shorter than when it was opened (truncated or "
                                 "rewritten in place since)");
    }
  }

  void Parse();
  void ParseIndex(const format::Preamble& pre, std::span<const std::byte> index);
  void SetUpRecipe();
  std::shared_ptr<const PartData> LoadPart(std::uint32_t rank, std::uint32_t epoch) const;
  RankEpochView RecipePart(std::uint32_t rank, std::uint32_t epoch) const;

  std::string name;
  std::optional<ReadOnlyFile> file;   // Open
  std::span<const std::byte> memory;  // OpenBytes
  std::uint64_t size = 0;             // of the file at Open, or of `memory`
  std::uint32_t preamble_crc = 0;
  ScheduleHeader header;
  std::vector<format::IndexEntry> entries;
  std::vector<std::uint64_t> epoch_first_step;  // lists: epochs + 1 entries
  std::uint64_t recipe_steps = 0;               // recipe: steps in every epoch

  // Lists: parts already read (see kRecentPartBytes).
  mutable std::mutex parts_mutex;
  mutable std::unordered_map<std::size_t, std::weak_ptr<const PartData>> live_parts;
  mutable std::deque<std::shared_ptr<const PartData>> recent_parts;
  mutable std::uint64_t recent_bytes = 0;

  // Recipe state: the stream sits after `cached_epoch`, whose order is kept.
  std::optional<LoaderSpec> spec;
  mutable std::mutex recipe_mutex;
  mutable std::unique_ptr<EpochOrderStream> stream;
  mutable std::shared_ptr<const std::vector<SampleId>> cached_order;
  mutable std::uint32_t cached_epoch = 0;
};

namespace {

bool RangeOk(std::uint64_t offset, std::uint64_t count, std::uint64_t unit, std::uint64_t limit) {
  if (offset > limit || count > (limit - offset) / unit) return false;
  return true;
}

}  // namespace

void ScheduleReader::Impl::Parse() {
  std::byte preamble[format::kPreambleSize] = {};
  const std::size_t got =
      ReadAt(0, std::span(preamble, std::min<std::uint64_t>(size, format::kPreambleSize)));
  if (got >= sizeof format::kMagic &&
      std::memcmp(preamble, format::kMagic, sizeof format::kMagic) != 0) {
    Fail(Code::kBadMagic, "not a Prescient schedule file (bad magic)");
  }
  if (got < format::kPreambleSize) {
    Fail(Code::kTruncated,
         "truncated: " + std::to_string(got) + " bytes, shorter than the preamble");
  }
  const std::span<const std::byte, format::kPreambleSize> preamble_bytes(preamble);
  const format::Preamble pre = format::DecodePreamble(preamble_bytes);
  if (pre.version < format::kOldestFormatVersion || pre.version > format::kFormatVersion) {
    Fail(Code::kBadVersion, "format version " + std::to_string(pre.version) +
                                "; this build reads versions " +
                                std::to_string(format::kOldestFormatVersion) + " to " +
                                std::to_string(format::kFormatVersion));
  }
  std::uint32_t stored_crc;
  std::memcpy(&stored_crc, preamble + format::kPreambleSize - 4, 4);
  if (format::Crc32(preamble_bytes.first(format::kPreambleSize - 4)) != stored_crc) {
    Fail(Code::kBadChecksum, "preamble checksum mismatch");
  }
  preamble_crc = stored_crc;
  if (pre.file_size > size) {
    Fail(Code::kTruncated,
         "truncated: " + std::to_string(size) + " of " + std::to_string(pre.file_size) + " bytes");
  }
  if (pre.file_size < size) {
    Fail(Code::kCorrupt,
         std::to_string(size - pre.file_size) + " unexpected bytes after the end of the schedule");
  }
  if (pre.header_offset != format::kPreambleSize ||
      !RangeOk(pre.header_offset, pre.header_size, 1, pre.file_size) ||
      pre.index_offset < pre.header_offset + pre.header_size || pre.index_offset % 8 != 0 ||
      !RangeOk(pre.index_offset, pre.index_size, 1, pre.file_size) ||
      pre.data_offset != pre.index_offset + pre.index_size) {
    Fail(Code::kCorrupt, "inconsistent section offsets in the preamble");
  }
  std::vector<std::byte> header_bytes(pre.header_size);
  ReadExactly(pre.header_offset, header_bytes, "header");
  if (format::Crc32(header_bytes) != pre.header_crc)
    Fail(Code::kBadChecksum, "header checksum mismatch");
  std::string why;
  if (!format::DecodeHeader(header_bytes, pre.version, &header, &why)) {
    Fail(Code::kCorrupt, why.empty() ? "malformed header" : "malformed header: " + why);
  }
  if (static_cast<std::uint32_t>(header.storage) != pre.storage) {
    Fail(Code::kCorrupt, "preamble and header disagree on the storage kind");
  }
  const WorldLayout& l = header.layout;
  if (l.ranks == 0 || l.ranks_per_node == 0 || l.batch_size == 0 || header.epochs == 0 ||
      header.num_samples == 0 || header.num_samples > 0xffffffffULL) {
    Fail(Code::kCorrupt, "header has an empty or impossible shape (ranks, epochs, samples)");
  }
  if (header.map.has_files() && header.map.num_samples() != header.num_samples) {
    Fail(Code::kCorrupt, "the sample map holds " + std::to_string(header.map.num_samples()) +
                             " samples but the schedule " + std::to_string(header.num_samples));
  }
  std::vector<std::byte> index_bytes(pre.index_size);
  ReadExactly(pre.index_offset, index_bytes, "index");
  if (format::Crc32(index_bytes) != pre.index_crc) {
    Fail(Code::kBadChecksum, "index checksum mismatch");
  }
  if (header.storage == ScheduleStorage::kLists) {
    ParseIndex(pre, index_bytes);
  } else {
    if (pre.index_size != 0 || pre.file_size != pre.data_offset) {
      Fail(Code::kCorrupt, "recipe file carries sample lists");
    }
    SetUpRecipe();
  }
}

void ScheduleReader::Impl::ParseIndex(const format::Preamble& pre,
                                      std::span<const std::byte> index) {
  const std::uint64_t ranks = header.layout.ranks;
  const std::uint64_t parts = ranks * header.epochs;
  if (pre.index_size != parts * format::kIndexEntrySize) {
    Fail(Code::kCorrupt, "index size does not match ranks x epochs");
  }
  entries.resize(parts);
  epoch_first_step.assign(header.epochs + 1, 0);
  for (std::uint64_t i = 0; i < parts; ++i) {
    const format::IndexEntry e = format::DecodeIndexEntry(
        index.subspan(i * format::kIndexEntrySize, format::kIndexEntrySize));
    const std::string where =
        "rank " + std::to_string(i % ranks) + " epoch " + std::to_string(i / ranks);
    if (e.samples_offset < pre.data_offset || e.samples_offset % sizeof(SampleId) != 0 ||
        !RangeOk(e.samples_offset, e.sample_count, sizeof(SampleId), pre.file_size) ||
        e.step_begin_offset < pre.data_offset || e.step_begin_offset % 8 != 0 ||
        e.steps >= pre.file_size / 8 ||
        !RangeOk(e.step_begin_offset, e.steps + 1, sizeof(std::uint64_t), pre.file_size)) {
      Fail(Code::kCorrupt, where + ": lists lie outside the file");
    }
    const std::uint64_t epoch = i / ranks;
    if (i % ranks == 0) {
      epoch_first_step[epoch + 1] = epoch_first_step[epoch] + e.steps;
    } else if (e.steps != entries[i - 1].steps) {
      Fail(Code::kCorrupt, where + ": ranks of one epoch have different step counts");
    }
    entries[i] = e;
  }
}

void ScheduleReader::Impl::SetUpRecipe() {
  try {
    spec = ParseLoaderSpec(header.source, header.parameters);
  } catch (const std::invalid_argument& e) {
    if (!ParseLoaderSource(header.source)) {
      Fail(Code::kUnsupported,
           "recipe of source '" + header.source + "', which this build cannot regenerate");
    }
    Fail(Code::kCorrupt, std::string("bad recipe parameters: ") + e.what());
  }
  try {
    ValidateLoaderSpec(*spec, header.num_samples, header.layout, header.epochs);
  } catch (const std::invalid_argument& e) {
    Fail(Code::kCorrupt, std::string("impossible recipe: ") + e.what());
  }
  // Loader orders have the same step count in every epoch (no table: a
  // corrupt recipe must not make Open allocate per epoch).
  recipe_steps = StepsPerEpoch(*spec, header.num_samples, header.layout);
}

std::shared_ptr<const PartData> ScheduleReader::Impl::LoadPart(std::uint32_t rank,
                                                               std::uint32_t epoch) const {
  const std::size_t i = static_cast<std::size_t>(epoch) * header.layout.ranks + rank;
  {
    const std::lock_guard lock(parts_mutex);
    auto it = live_parts.find(i);
    if (it != live_parts.end()) {
      if (std::shared_ptr<const PartData> part = it->second.lock()) return part;
    }
  }
  // Read and verify outside the lock: other parts stay available meanwhile.
  const format::IndexEntry& e = entries[i];
  const std::string where = "rank " + std::to_string(rank) + " epoch " + std::to_string(epoch);
  auto part = std::make_shared<PartData>();
  part->samples.resize(e.sample_count);
  part->step_begin.resize(e.steps + 1);
  ReadExactly(e.samples_offset, std::as_writable_bytes(std::span(part->samples)), where);
  ReadExactly(e.step_begin_offset, std::as_writable_bytes(std::span(part->step_begin)), where);
  const std::span<const std::uint64_t> bound_span(part->step_begin);
  const std::uint32_t crc = format::Crc32(std::as_bytes(bound_span),
                                          format::Crc32(std::as_bytes(std::span(part->samples))));
  if (crc != e.crc) Fail(Code::kBadChecksum, where + ": sample list checksum mismatch");
  if (bound_span.front() != 0 || bound_span.back() != e.sample_count) {
    Fail(Code::kCorrupt, where + ": step boundaries do not cover the sample list");
  }
  for (std::size_t s = 1; s < bound_span.size(); ++s) {
    if (bound_span[s] < bound_span[s - 1]) Fail(Code::kCorrupt, where + ": decreasing steps");
  }
  for (SampleId id : part->samples) {
    if (id >= header.num_samples) {
      Fail(Code::kCorrupt, where + ": sample id " + std::to_string(id) + " out of range");
    }
  }
  std::shared_ptr<const PartData> shared = std::move(part);
  const std::lock_guard lock(parts_mutex);
  live_parts[i] = shared;
  recent_parts.push_back(shared);
  recent_bytes += shared->bytes();
  while (recent_bytes > kRecentPartBytes && recent_parts.size() > 1) {
    recent_bytes -= recent_parts.front()->bytes();
    recent_parts.pop_front();
  }
  return shared;
}

RankEpochView ScheduleReader::Impl::RecipePart(std::uint32_t rank, std::uint32_t epoch) const {
  std::shared_ptr<const std::vector<SampleId>> order;
  {
    std::lock_guard<std::mutex> lock(recipe_mutex);
    if (!cached_order || cached_epoch != epoch) {
      if (!stream || stream->next_epoch() > epoch) {
        stream = std::make_unique<EpochOrderStream>(*spec, header.num_samples);
      }
      while (stream->next_epoch() < epoch) stream->Skip();
      auto fresh = std::make_shared<std::vector<SampleId>>(header.num_samples);
      stream->Next(*fresh);
      cached_order = std::move(fresh);
      cached_epoch = epoch;
    }
    order = cached_order;
  }
  auto part = std::make_shared<const RankEpoch>(SplitForRank(*spec, header.layout, *order, rank));
  return RankEpochView(part->samples, part->step_begin, part);
}

ScheduleReader::ScheduleReader(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScheduleReader::ScheduleReader(ScheduleReader&&) noexcept = default;
ScheduleReader& ScheduleReader::operator=(ScheduleReader&&) noexcept = default;
ScheduleReader::~ScheduleReader() = default;

ScheduleReader ScheduleReader::Open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->name = path;
  impl->file.emplace(ReadOnlyFile::Open(path, "schedule file"));
  impl->size = impl->file->size();
  impl->Parse();
  return ScheduleReader(std::move(impl));
}

ScheduleReader ScheduleReader::OpenBytes(std::span<const std::byte> bytes,
                                         const std::string& name) {
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  impl->memory = bytes;
  impl->size = bytes.size();
  impl->Parse();
  return ScheduleReader(std::move(impl));
}

const ScheduleHeader& ScheduleReader::header() const { return impl_->header; }
const std::string& ScheduleReader::path() const { return impl_->name; }
std::uint32_t ScheduleReader::checksum() const { return impl_->preamble_crc; }

void ScheduleReader::CheckDataset(const DatasetFingerprint& actual,
                                  const FingerprintCheck& check) const {
  const SampleMap& map = impl_->header.map;
  auto mismatch = [&](const std::string& what) {
    impl_->Fail(Code::kFingerprintMismatch, "made for another dataset: " + what);
  };
  if (!map.has_files()) {
    mismatch("the schedule names no dataset (it was made without --dataset)");
  }
  std::uint32_t file = 0;
  std::uint32_t field = 0;
  if (map.has_groups()) {
    // A file of the map is a group: the path and the dataset's name say which.
    const std::optional<MapSlot> slot = map.Find(actual.file_path, actual.dataset_name);
    if (!slot) {
      mismatch("dataset '" + actual.dataset_name + "' of '" + actual.file_path +
               "' is no field of a group of the schedule's files");
    }
    file = slot->file;
    field = slot->field;
  } else if (check.path || map.files().size() > 1) {
    const std::optional<std::uint32_t> found = map.FileIndex(actual.file_path);
    if (!found) {
      mismatch("file path is '" + actual.file_path + "' but the schedule's files are '" +
               map.files().front().path + "'" +
               (map.files().size() > 1 ? " ... '" + map.files().back().path + "' (" +
                                             std::to_string(map.files().size()) + " files)"
                                       : std::string()));
    }
    file = *found;
  }
  if (!map.has_groups() && (check.dataset_name || map.fields().size() > 1)) {
    const std::optional<std::uint32_t> found = map.FieldIndex(actual.dataset_name);
    if (!found) {
      std::string names;
      for (const MapField& f : map.fields())
        names += (names.empty() ? "'" : ", '") + f.dataset + "'";
      mismatch("dataset name is '" + actual.dataset_name + "' but the schedule was made for " +
               names);
    }
    field = *found;
  }
  const MapFile& f = map.files()[file];
  const MapField& d = map.fields()[field];
  const FieldPlace place = map.PlaceOf(file, field);
  if (check.path && place.path != actual.file_path) {
    mismatch("dataset '" + map.DatasetOf(file, field) + "' of '" + f.path + "' is in '" +
             std::string(place.path) + "', not in '" + actual.file_path + "'");
  }
  auto differs = [&](const std::string& what, const std::string& stored, const std::string& found) {
    mismatch(what + " is " + found + " but the schedule was made for " + stored);
  };
  if (check.shape && f.rows != actual.rows) {
    differs("row count", std::to_string(f.rows), std::to_string(actual.rows));
  }
  if (check.shape && d.row_bytes != 0 && d.row_bytes != actual.row_bytes) {
    differs("row size", std::to_string(d.row_bytes), std::to_string(actual.row_bytes));
  }
  if (check.file_stat && place.size != actual.file_size) {
    differs("file size", std::to_string(place.size), std::to_string(actual.file_size));
  }
  if (check.file_stat && place.mtime_ns != actual.mtime_ns) {
    differs("modification time (ns)", std::to_string(place.mtime_ns),
            std::to_string(actual.mtime_ns));
  }
}

std::uint64_t ScheduleReader::StepsInEpoch(std::uint32_t epoch) const {
  if (epoch >= impl_->header.epochs) impl_->Fail(Code::kOutOfRange, "epoch out of range");
  if (impl_->header.storage == ScheduleStorage::kRecipe) return impl_->recipe_steps;
  return impl_->epoch_first_step[epoch + 1] - impl_->epoch_first_step[epoch];
}

std::uint64_t ScheduleReader::EpochFirstStep(std::uint32_t epoch) const {
  if (epoch > impl_->header.epochs) impl_->Fail(Code::kOutOfRange, "epoch out of range");
  if (impl_->header.storage == ScheduleStorage::kRecipe) return epoch * impl_->recipe_steps;
  return impl_->epoch_first_step[epoch];
}

RankEpochView ScheduleReader::Part(std::uint32_t rank, std::uint32_t epoch) const {
  if (rank >= impl_->header.layout.ranks || epoch >= impl_->header.epochs) {
    impl_->Fail(Code::kOutOfRange, "rank " + std::to_string(rank) + " epoch " +
                                       std::to_string(epoch) + " is outside the schedule (" +
                                       std::to_string(impl_->header.layout.ranks) + " ranks, " +
                                       std::to_string(impl_->header.epochs) + " epochs)");
  }
  if (impl_->header.storage == ScheduleStorage::kRecipe) return impl_->RecipePart(rank, epoch);
  std::shared_ptr<const PartData> part = impl_->LoadPart(rank, epoch);
  return RankEpochView(part->samples, part->step_begin, part);
}

void ScheduleReader::VerifyAll() const {
  if (impl_->header.storage != ScheduleStorage::kLists) return;
  for (std::uint32_t e = 0; e < impl_->header.epochs; ++e) {
    for (std::uint32_t r = 0; r < impl_->header.layout.ranks; ++r) impl_->LoadPart(r, e);
  }
}

AccessSchedule ScheduleReader::Materialize() const {
  const ScheduleHeader& h = impl_->header;
  AccessSchedule schedule(h.num_samples, h.layout, h.epochs);
  for (std::uint32_t e = 0; e < h.epochs; ++e) {
    for (std::uint32_t r = 0; r < h.layout.ranks; ++r)
      schedule.Part(r, e) = Part(r, e).ToRankEpoch();
  }
  return schedule;
}

}  // namespace prescient::scheduler
