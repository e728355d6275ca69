// Internal: the byte layout of schedule files, shared by the writer and the
// reader. The user-facing specification is scheduler/README.md; keep the two
// in step and bump kFormatVersion on any change.
#ifndef PRESCIENT_SCHEDULER_CORE_SCHEDULE_FORMAT_H_
#define PRESCIENT_SCHEDULER_CORE_SCHEDULE_FORMAT_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "scheduler/core/schedule_file.h"

namespace prescient::scheduler::format {

static_assert(std::endian::native == std::endian::little,
              "schedule files are little-endian and read in place");

// PNG-style: a non-ASCII first byte and CR LF / ^Z catch text-mode mangling.
inline constexpr unsigned char kMagic[8] = {0x89, 'P', 'S', 'C', 'H', '\r', '\n', 0x1a};
// 2: the header carries a sample map (files and fields) instead of version 1's
// one-dataset fingerprint. 3: a file of the map may keep fields in files of
// their own (MapFile::field_files). 4: a file of the map may be a group
// (MapFile::group). 5: a sample of a file may be a block of its rows
// (MapFile::rows_per_sample). Readers read all five; writers write the oldest
// version that holds the header (2 unless a field has a file of its own, a
// file is a group or a sample more than a row), so a schedule stays readable
// by builds that predate what it does not use.
inline constexpr std::uint32_t kFormatVersion = 5;
inline constexpr std::uint32_t kOldestFormatVersion = 1;

// Fixed-size preamble at offset 0 (all fields little-endian).
inline constexpr std::size_t kPreambleSize = 80;
struct Preamble {
  std::uint32_t version = kFormatVersion;
  std::uint32_t storage = 0;  // ScheduleStorage
  std::uint64_t file_size = 0;
  std::uint64_t header_offset = 0;
  std::uint64_t header_size = 0;
  std::uint64_t index_offset = 0;
  std::uint64_t index_size = 0;  // bytes; kIndexEntrySize * epochs * ranks for lists
  std::uint64_t data_offset = 0;
  std::uint32_t header_crc = 0;
  std::uint32_t index_crc = 0;
  // bytes 72..75 reserved (zero); 76..79 CRC-32 of bytes 0..75.
};

// One per (epoch, rank), epoch-major: entry e * ranks + r.
inline constexpr std::size_t kIndexEntrySize = 40;
struct IndexEntry {
  std::uint64_t samples_offset = 0;  // uint32 sample ids, 4-byte aligned
  std::uint64_t sample_count = 0;
  std::uint64_t step_begin_offset = 0;  // uint64 boundaries, 8-byte aligned
  std::uint64_t steps = 0;              // boundaries stored: steps + 1
  std::uint32_t crc = 0;                // CRC-32 of the samples then the boundaries
  // 4 reserved bytes (zero)
};

// Header strings are capped so a corrupt length cannot ask for gigabytes.
inline constexpr std::uint32_t kMaxStringBytes = 1 << 20;

std::uint32_t Crc32(std::span<const std::byte> bytes, std::uint32_t crc = 0);

// Appends little-endian values to a byte buffer.
class Encoder {
 public:
  void U32(std::uint32_t v) { Raw(&v, sizeof v); }
  void U64(std::uint64_t v) { Raw(&v, sizeof v); }
  void I64(std::int64_t v) { Raw(&v, sizeof v); }
  void Str(const std::string& s) {
    U32(static_cast<std::uint32_t>(s.size()));
    Raw(s.data(), s.size());
  }
  void Zeros(std::size_t n) { bytes_.resize(bytes_.size() + n, std::byte{0}); }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  void Raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<std::byte> bytes_;
};

// Reads little-endian values from a byte span; every read is bounds-checked
// and a failed read leaves ok() false (callers check once at the end).
class Decoder {
 public:
  explicit Decoder(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::uint32_t U32() { return Fixed<std::uint32_t>(); }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  std::uint64_t U64() { return Fixed<std::uint64_t>(); }
  std::int64_t I64() { return Fixed<std::int64_t>(); }
  std::string Str() {
    const std::uint32_t n = U32();
    if (!ok_ || n > kMaxStringBytes || n > bytes_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  void Skip(std::size_t n) {
    if (n > bytes_.size() - pos_) {
      ok_ = false;
    } else {
      pos_ += n;
    }
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == bytes_.size(); }

 private:
  template <typename T>
  T Fixed() {
    T v{};
    if (!ok_ || sizeof(T) > bytes_.size() - pos_) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

std::vector<std::byte> EncodePreamble(const Preamble& preamble);
// Magic, version and CRC are checked by the caller; this only decodes.
Preamble DecodePreamble(std::span<const std::byte, kPreambleSize> bytes);

// The version EncodeHeader writes `header` in (2 to 5, see kFormatVersion).
std::uint32_t HeaderVersion(const ScheduleHeader& header);
// In version HeaderVersion(header).
std::vector<std::byte> EncodeHeader(const ScheduleHeader& header);
// False when the bytes do not hold exactly one well-formed header of
// `version`; *why says what is wrong.
bool DecodeHeader(std::span<const std::byte> bytes, std::uint32_t version, ScheduleHeader* header,
                  std::string* why);
// Version 1's one-dataset fingerprint as a one-file, one-field map.
SampleMap MapOfFingerprint(const DatasetFingerprint& dataset);

void EncodeIndexEntry(const IndexEntry& entry, Encoder* out);
IndexEntry DecodeIndexEntry(std::span<const std::byte> bytes);  // kIndexEntrySize bytes

}  // namespace prescient::scheduler::format

#endif  // PRESCIENT_SCHEDULER_CORE_SCHEDULE_FORMAT_H_
