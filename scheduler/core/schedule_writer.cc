// Writing schedule files: lay out every part, checksum it, then stream the
// bytes to a temporary file that is renamed over the destination.
#include <stdexcept>
#include <string>
#include <vector>

#include "scheduler/core/atomic_file.h"
#include "scheduler/core/loader_spec.h"
#include "scheduler/core/schedule_file.h"
#include "scheduler/core/schedule_format.h"

namespace prescient::scheduler {
namespace {

using format::IndexEntry;

std::uint64_t AlignUp(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

std::span<const std::byte> AsBytes(const auto& vec) {
  return std::as_bytes(std::span(vec.data(), vec.size()));
}

void CheckSchedule(const ScheduleHeader& h, const AccessSchedule& s) {
  const WorldLayout& a = h.layout;
  const WorldLayout& b = s.layout();
  if (a.ranks != b.ranks || a.ranks_per_node != b.ranks_per_node || a.workers != b.workers ||
      a.batch_size != b.batch_size) {
    throw std::invalid_argument("WriteScheduleFile: header layout differs from the schedule's");
  }
  if (h.epochs != s.epochs() || h.num_samples != s.num_samples()) {
    throw std::invalid_argument(
        "WriteScheduleFile: header epochs/num_samples differ from the "
        "schedule's");
  }
  if (a.ranks == 0 || a.ranks_per_node == 0) {
    throw std::invalid_argument("WriteScheduleFile: ranks and ranks_per_node must be >= 1");
  }
  for (std::uint32_t e = 0; e < s.epochs(); ++e) {
    const std::size_t steps = s.Part(0, e).steps();
    for (std::uint32_t r = 0; r < a.ranks; ++r) {
      const RankEpoch& part = s.Part(r, e);
      if (part.steps() != steps) {
        throw std::invalid_argument("WriteScheduleFile: epoch " + std::to_string(e) +
                                    ": ranks have different step counts");
      }
      if (part.step_begin.empty() || part.step_begin.front() != 0 ||
          part.step_begin.back() != part.samples.size()) {
        throw std::invalid_argument("WriteScheduleFile: bad step boundaries at rank " +
                                    std::to_string(r) + " epoch " + std::to_string(e));
      }
      for (std::size_t i = 1; i < part.step_begin.size(); ++i) {
        if (part.step_begin[i] < part.step_begin[i - 1]) {
          throw std::invalid_argument("WriteScheduleFile: decreasing step boundaries");
        }
      }
      for (SampleId id : part.samples) {
        if (id >= s.num_samples()) {
          throw std::invalid_argument("WriteScheduleFile: sample id " + std::to_string(id) +
                                      " >= num_samples");
        }
      }
    }
  }
}

void WriteFile(const std::string& path, ScheduleHeader header, ScheduleStorage storage,
               const AccessSchedule* schedule) {
  header.storage = storage;
  if (header.map.has_files() && header.map.num_samples() != header.num_samples) {
    throw std::invalid_argument("schedule file: the sample map holds " +
                                std::to_string(header.map.num_samples()) +
                                " samples, the schedule " + std::to_string(header.num_samples));
  }
  const std::vector<std::byte> header_bytes = format::EncodeHeader(header);

  format::Preamble pre;
  pre.version = format::HeaderVersion(header);
  pre.storage = static_cast<std::uint32_t>(storage);
  pre.header_offset = format::kPreambleSize;
  pre.header_size = header_bytes.size();
  pre.index_offset = AlignUp(pre.header_offset + pre.header_size, 8);

  std::vector<IndexEntry> entries;
  if (schedule != nullptr) {
    const std::uint32_t ranks = header.layout.ranks;
    entries.resize(static_cast<std::size_t>(header.epochs) * ranks);
    pre.index_size = entries.size() * format::kIndexEntrySize;
    std::uint64_t cursor = pre.index_offset + pre.index_size;
    pre.data_offset = cursor;
    for (std::uint32_t e = 0; e < header.epochs; ++e) {
      for (std::uint32_t r = 0; r < ranks; ++r) {
        const RankEpoch& part = schedule->Part(r, e);
        IndexEntry& entry = entries[static_cast<std::size_t>(e) * ranks + r];
        entry.samples_offset = cursor;
        entry.sample_count = part.samples.size();
        cursor = AlignUp(cursor + entry.sample_count * sizeof(SampleId), 8);
        entry.step_begin_offset = cursor;
        entry.steps = part.steps();
        cursor += part.step_begin.size() * sizeof(std::uint64_t);
        entry.crc = format::Crc32(AsBytes(part.step_begin), format::Crc32(AsBytes(part.samples)));
      }
    }
    pre.file_size = cursor;
  } else {
    pre.data_offset = pre.index_offset;
    pre.file_size = pre.index_offset;
  }

  format::Encoder index;
  for (const IndexEntry& entry : entries) format::EncodeIndexEntry(entry, &index);
  pre.header_crc = format::Crc32(header_bytes);
  pre.index_crc = format::Crc32(index.bytes());

  AtomicFile out(path, "schedule file");
  out.Write(format::EncodePreamble(pre));
  out.Write(header_bytes);
  out.Pad(pre.index_offset - (pre.header_offset + pre.header_size));
  out.Write(index.bytes());
  std::uint64_t written = pre.data_offset;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const RankEpoch& part = schedule->Part(static_cast<std::uint32_t>(i % header.layout.ranks),
                                           static_cast<std::uint32_t>(i / header.layout.ranks));
    out.Write(AsBytes(part.samples));
    written += part.samples.size() * sizeof(SampleId);
    out.Pad(entries[i].step_begin_offset - written);
    out.Write(AsBytes(part.step_begin));
    written = entries[i].step_begin_offset + part.step_begin.size() * sizeof(std::uint64_t);
  }
  out.Commit();
}

}  // namespace

void WriteScheduleFile(const std::string& path, const ScheduleHeader& header,
                       const AccessSchedule& schedule) {
  CheckSchedule(header, schedule);
  WriteFile(path, header, ScheduleStorage::kLists, &schedule);
}

void WriteRecipeFile(const std::string& path, const ScheduleHeader& header) {
  const LoaderSpec spec = ParseLoaderSpec(header.source, header.parameters);
  ValidateLoaderSpec(spec, header.num_samples, header.layout, header.epochs);
  if (header.epochs == 0) throw std::invalid_argument("WriteRecipeFile: no epochs");
  WriteFile(path, header, ScheduleStorage::kRecipe, nullptr);
}

}  // namespace prescient::scheduler
