// NextUseIndex::Save / Load: the index as a file built once per node and read
// by every process of the node. Load reads it into memory the process owns
// (pread, never a mapping): an index file truncated or rewritten in place
// while the job runs must not fault (SIGBUS) in the middle of an eviction.
//
// Layout (little-endian): an 80-byte header, then the tables back to back,
// 64-bit ones first so every table is naturally aligned:
//   0  magic "\x89PNUI\r\n\x1a"     8  u32 version (1)     12 u32 node
//   16 u32 first_rank               20 u32 node_ranks      24 u64 num_samples
//   32 u64 epochs                   40 u64 total_uses      48 u64 total_reads
//   56 u32 flags (bit 0: read table) 60 u32 CRC-32 of everything after byte 80
//   64 u64 file size                72 u32 schedule checksum (ScheduleReader::checksum)
//   76 u32 CRC-32 of bytes 0..75
//   80 epoch_first_step[epochs + 1] u64, row_begin[num_samples + 1] u64,
//      read_begin[epochs * node_ranks + 1] u64 (read table only),
//      steps[total_uses] u32, read_next[total_reads] u32 (read table only)
#include <cstring>
#include <string>

#include "scheduler/core/atomic_file.h"
#include "scheduler/core/huge_array.h"
#include "scheduler/core/next_use_index.h"
#include "scheduler/core/read_only_file.h"
#include "scheduler/core/schedule_format.h"

namespace prescient::scheduler {
namespace {

using Code = ScheduleFileErrorCode;

constexpr unsigned char kIndexMagic[8] = {0x89, 'P', 'N', 'U', 'I', '\r', '\n', 0x1a};
// 2: bytes 72..75 hold the schedule's checksum (reserved in version 1).
constexpr std::uint32_t kIndexVersion = 2;
constexpr std::size_t kIndexHeaderSize = 80;
constexpr std::uint32_t kNoStep = std::numeric_limits<std::uint32_t>::max();

template <typename T>
std::span<const std::byte> Bytes(std::span<const T> s) {
  return std::as_bytes(s);
}

}  // namespace

// Befriended by NextUseIndex: fills its spans from the file.
struct NextUseIndexFile {
  static NextUseIndex Load(const std::string& path, const ScheduleReader& schedule);
};

void NextUseIndex::Save(const std::string& path) const {
  const bool table = has_read_table();
  format::Encoder head;
  for (unsigned char c : kIndexMagic) head.bytes().push_back(static_cast<std::byte>(c));
  head.U32(kIndexVersion);
  head.U32(node_);
  head.U32(first_rank_);
  head.U32(node_ranks_);
  head.U64(num_samples_);
  head.U64(epoch_first_step_.empty() ? 0 : epoch_first_step_.size() - 1);
  head.U64(steps_.size());
  head.U64(read_next_.size());
  head.U32(table ? 1 : 0);
  std::uint32_t crc = format::Crc32(Bytes(epoch_first_step_));
  crc = format::Crc32(Bytes(row_begin_), crc);
  crc = format::Crc32(Bytes(read_begin_), crc);
  crc = format::Crc32(Bytes(steps_), crc);
  crc = format::Crc32(Bytes(read_next_), crc);
  head.U32(crc);
  head.U64(kIndexHeaderSize + epoch_first_step_.size_bytes() + row_begin_.size_bytes() +
           read_begin_.size_bytes() + steps_.size_bytes() + read_next_.size_bytes());
  head.U32(schedule_checksum_);
  head.U32(format::Crc32(head.bytes()));

  AtomicFile out(path, "next-use index");
  out.Write(head.bytes());
  out.Write(Bytes(epoch_first_step_));
  out.Write(Bytes(row_begin_));
  out.Write(Bytes(read_begin_));
  out.Write(Bytes(steps_));
  out.Write(Bytes(read_next_));
  out.Commit();
}

NextUseIndex NextUseIndex::Load(const std::string& path, const ScheduleReader& schedule) {
  return NextUseIndexFile::Load(path, schedule);
}

NextUseIndex NextUseIndexFile::Load(const std::string& path, const ScheduleReader& schedule) {
  auto fail = [&](Code code, const std::string& what) -> void {
    throw ScheduleFileError(code, "next-use index '" + path + "': " + what);
  };
  const ReadOnlyFile file = ReadOnlyFile::Open(path, "next-use index");
  std::byte head[kIndexHeaderSize] = {};
  const std::size_t head_size = file.ReadAt(0, head);
  if (head_size >= sizeof kIndexMagic && std::memcmp(head, kIndexMagic, sizeof kIndexMagic) != 0) {
    fail(Code::kBadMagic, "not a next-use index (bad magic)");
  }
  if (head_size < kIndexHeaderSize) fail(Code::kTruncated, "shorter than its header");
  const std::span<const std::byte> all(head, kIndexHeaderSize);
  format::Decoder in(all.subspan(8, kIndexHeaderSize - 8));
  const std::uint32_t version = in.U32();
  if (version != kIndexVersion) {
    fail(Code::kBadVersion, "format version " + std::to_string(version) +
                                "; this build reads version " + std::to_string(kIndexVersion));
  }
  std::uint32_t stored_head_crc;
  std::memcpy(&stored_head_crc, head + kIndexHeaderSize - 4, 4);
  if (format::Crc32(all.first(kIndexHeaderSize - 4)) != stored_head_crc) {
    fail(Code::kBadChecksum, "header checksum mismatch");
  }
  NextUseIndex index;
  index.node_ = in.U32();
  index.first_rank_ = in.U32();
  index.node_ranks_ = in.U32();
  index.num_samples_ = in.U64();
  const std::uint64_t epochs = in.U64();
  const std::uint64_t uses = in.U64();
  const std::uint64_t reads = in.U64();
  const bool table = (in.U32() & 1) != 0;
  const std::uint32_t data_crc = in.U32();
  const std::uint64_t file_size = in.U64();
  index.schedule_checksum_ = in.U32();
  // Made from this schedule? Checked before the tables are read.
  if (index.schedule_checksum_ != schedule.checksum()) {
    fail(Code::kFingerprintMismatch,
         "built from another schedule (schedule checksum " +
             std::to_string(index.schedule_checksum_) + ", but '" + schedule.path() + "' has " +
             std::to_string(schedule.checksum()) + "); rebuild it with prescient-schedule index");
  }
  if (index.node_ >= schedule.header().layout.nodes() ||
      index.num_samples_ != schedule.header().num_samples ||
      index.first_rank_ != index.node_ * schedule.header().layout.ranks_per_node) {
    fail(Code::kFingerprintMismatch, "its node, ranks or sample count differ from the schedule's");
  }
  if (file_size > file.size()) fail(Code::kTruncated, "truncated");
  if (file_size < file.size()) fail(Code::kCorrupt, "unexpected bytes after the end");
  // Every count is bounded by the file size before any multiplication.
  const std::uint64_t limit = file.size() / 4;
  if (epochs >= limit || index.num_samples_ >= limit || uses > limit || reads > limit ||
      index.node_ranks_ == 0 || (!table && reads != 0) || epochs >= limit / index.node_ranks_) {
    fail(Code::kCorrupt, "impossible table sizes");
  }
  const std::uint64_t read_begin_count = table ? epochs * index.node_ranks_ + 1 : 0;
  const std::uint64_t expected = kIndexHeaderSize +
                                 8 * (epochs + 1 + index.num_samples_ + 1 + read_begin_count) +
                                 4 * (uses + reads);
  if (expected != file_size) fail(Code::kCorrupt, "table sizes do not add up to the file size");
  // The tables, read into 8-byte aligned memory of our own.
  const std::uint64_t table_bytes = file_size - kIndexHeaderSize;
  auto tables = std::make_shared<HugeArray<std::uint64_t>>((table_bytes + 7) / 8);
  const std::span<std::byte> table_span(reinterpret_cast<std::byte*>(tables->data()), table_bytes);
  if (file.ReadAt(kIndexHeaderSize, table_span) != table_bytes) {
    fail(Code::kTruncated,
         "the file is shorter than when it was opened (truncated or rewritten "
         "in place since)");
  }
  if (format::Crc32(table_span) != data_crc) fail(Code::kBadChecksum, "table checksum mismatch");
  const std::byte* p = table_span.data();
  auto take64 = [&](std::uint64_t n) {
    std::span<const std::uint64_t> s(reinterpret_cast<const std::uint64_t*>(p), n);
    p += 8 * n;
    return s;
  };
  auto take32 = [&](std::uint64_t n) {
    std::span<const std::uint32_t> s(reinterpret_cast<const std::uint32_t*>(p), n);
    p += 4 * n;
    return s;
  };
  index.epoch_first_step_ = take64(epochs + 1);
  index.row_begin_ = take64(index.num_samples_ + 1);
  index.read_begin_ = take64(read_begin_count);
  index.steps_ = take32(uses);
  index.read_next_ = take32(reads);

  // Structure, so that no query can read out of bounds or give a wrong order.
  auto monotone = [](std::span<const std::uint64_t> s, std::uint64_t last) {
    if (s.empty() || s.front() != 0 || s.back() != last) return false;
    for (std::size_t i = 1; i < s.size(); ++i) {
      if (s[i] < s[i - 1]) return false;
    }
    return true;
  };
  const std::uint64_t total_steps = index.epoch_first_step_.back();
  if (!monotone(index.epoch_first_step_, total_steps) || total_steps >= kNoStep ||
      !monotone(index.row_begin_, uses) || (table && !monotone(index.read_begin_, reads))) {
    fail(Code::kCorrupt, "tables out of order");
  }
  for (std::uint64_t s = 0; s < index.num_samples_; ++s) {
    for (std::uint64_t i = index.row_begin_[s]; i < index.row_begin_[s + 1]; ++i) {
      if (index.steps_[i] >= total_steps ||
          (i > index.row_begin_[s] && index.steps_[i] <= index.steps_[i - 1])) {
        fail(Code::kCorrupt, "sample " + std::to_string(s) + ": uses out of order");
      }
    }
  }
  for (std::uint32_t next : index.read_next_) {
    if (next != kNoStep && next >= total_steps) fail(Code::kCorrupt, "read table out of range");
  }
  if (index.epoch_first_step_.size() != std::size_t{schedule.header().epochs} + 1 ||
      total_steps != schedule.EpochFirstStep(schedule.header().epochs)) {
    fail(Code::kFingerprintMismatch, "its epochs and steps differ from the schedule's");
  }
  index.storage_ = std::move(tables);
  return index;
}

}  // namespace prescient::scheduler
