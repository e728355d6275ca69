// libFuzzer target: ScheduleReader on arbitrary bytes (format versions 1 to
// 3) must either throw ScheduleFileError or give a schedule whose every
// lookup stays in bounds: parts, the sample map (Locate, FileIndex,
// FieldIndex, PlaceOf, Mismatch) and the node's next-use index with per-rank
// progress.
//
// Random bytes rarely get past the CRC-32s, so each input is tried twice: as
// is, and with every checksum recomputed (preamble, header, index, and each
// part whose index entry lies inside the input). The second pass lets the
// fuzzer reach the structural checks behind the checksums.
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "scheduler/core/next_use_index.h"
#include "scheduler/core/schedule_file.h"

namespace {

using prescient::scheduler::NextUseIndex;
using prescient::scheduler::RankEpochView;
using prescient::scheduler::ScheduleFileError;
using prescient::scheduler::ScheduleReader;
using prescient::scheduler::ScheduleStorage;

std::uint64_t Load64(const std::vector<std::uint8_t>& b, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

void Store32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) {
  std::memcpy(b.data() + at, &v, 4);
}

std::uint32_t Crc(const std::vector<std::uint8_t>& b, std::uint64_t at, std::uint64_t n,
                  std::uint32_t crc = 0) {
  return static_cast<std::uint32_t>(crc32(crc, b.data() + at, static_cast<uInt>(n)));
}

bool InBounds(std::uint64_t at, std::uint64_t n, std::size_t size) {
  return at <= size && n <= size - at;
}

// Recomputes the checksums the layout fields point at, where they fit.
void FixChecksums(std::vector<std::uint8_t>& b) {
  if (b.size() < 80) return;
  const std::uint64_t header_offset = Load64(b, 24), header_size = Load64(b, 32);
  const std::uint64_t index_offset = Load64(b, 40), index_size = Load64(b, 48);
  if (InBounds(index_offset, index_size, b.size()) && index_size % 40 == 0 &&
      index_size / 40 <= 4096) {
    for (std::uint64_t e = index_offset; e < index_offset + index_size; e += 40) {
      const std::uint64_t so = Load64(b, e), count = Load64(b, e + 8);
      const std::uint64_t bo = Load64(b, e + 16), steps = Load64(b, e + 24);
      if (count < (1u << 28) && steps < (1u << 28) && InBounds(so, count * 4, b.size()) &&
          InBounds(bo, (steps + 1) * 8, b.size())) {
        Store32(b, e + 32, Crc(b, bo, (steps + 1) * 8, Crc(b, so, count * 4)));
      }
    }
    Store32(b, 68, Crc(b, index_offset, index_size));
  }
  if (InBounds(header_offset, header_size, b.size())) {
    Store32(b, 64, Crc(b, header_offset, header_size));
  }
  Store32(b, 76, Crc(b, 0, 76));
}

void Exercise(const std::vector<std::uint8_t>& bytes) {
  try {
    const ScheduleReader reader = ScheduleReader::OpenBytes(
        std::as_bytes(std::span(bytes.data(), bytes.size())), "fuzz-input");
    const auto& h = reader.header();
    std::uint64_t sink = reader.checksum();
    // The sample map: its queries stay in bounds for every sample.
    const auto& map = h.map;
    if (map.has_files()) {
      const std::uint64_t step = std::max<std::uint64_t>(1, map.num_samples() / 64);
      for (std::uint64_t s = 0; s < map.num_samples(); s += step) {
        const auto at = map.Locate(static_cast<prescient::scheduler::SampleId>(s));
        if (at.file >= map.files().size() || at.row + at.rows > map.files()[at.file].rows) {
          std::abort();
        }
        if (map.SampleOf(at.file, at.row + at.rows - 1) != s) std::abort();
      }
      const auto& last = map.files().back();
      if (map.FileIndex(last.path, last.group) != map.files().size() - 1) std::abort();
      sink += map.Mismatch(0, 0, last.rows, 0, last.size, last.mtime_ns).size();
      if (!map.FieldIndex(map.fields().front().dataset)) std::abort();
      // Version 3: every field of the last file lives somewhere that leads
      // back to that file.
      const auto last_file = static_cast<std::uint32_t>(map.files().size() - 1);
      for (std::uint32_t field = 0; field < map.fields().size(); ++field) {
        const prescient::scheduler::FieldPlace place = map.PlaceOf(last_file, field);
        if (map.FileIndex(place.path, last.group) != last_file) std::abort();
        sink += map.Mismatch(last_file, field, last.rows, 0, place.size, place.mtime_ns).size();
      }
      sink += map.PathsOf(last_file).size();
    }
    sink += map.bytes_per_sample();
    // Recipes regenerate num_samples-sized orders: keep them small here.
    if (h.storage == ScheduleStorage::kRecipe && h.num_samples > 4096) return;
    const std::uint64_t parts = static_cast<std::uint64_t>(h.epochs) * h.layout.ranks;
    if (parts > 64) return;
    for (std::uint32_t e = 0; e < h.epochs; ++e) {
      sink += reader.StepsInEpoch(e) + reader.EpochFirstStep(e);
      for (std::uint32_t r = 0; r < h.layout.ranks; ++r) {
        const RankEpochView view = reader.Part(r, e);
        for (std::size_t s = 0; s < view.steps(); ++s) {
          for (auto id : view.Step(s)) sink += id;
        }
        if (view.size() > 0) sink += view.At(view.size() - 1);
      }
    }
    // Build's documented limits (std::length_error) are not findings.
    const std::uint32_t node0_ranks = std::min(h.layout.ranks, h.layout.ranks_per_node);
    if (h.num_samples <= 4096 && h.layout.nodes() > 0 && node0_ranks <= 65536) {
      const NextUseIndex index = NextUseIndex::Build(reader, 0);
      sink += index.NextUseAfter(0, 0);
      std::vector<std::uint64_t> progress(index.node_ranks());
      for (std::size_t k = 0; k < progress.size(); ++k) progress[k] = k % 3;
      sink += index.NextUse(0, progress).step + index.NextUseAfterRead(0, 0, 1, progress).step;
    }
    if (sink == 0xdeadbeef) std::abort();  // keeps the reads
  } catch (const ScheduleFileError&) {
    // The expected way to reject a bad file.
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> bytes(data, data + size);
  Exercise(bytes);
  FixChecksums(bytes);
  Exercise(bytes);
  return 0;
}
