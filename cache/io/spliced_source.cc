#include "cache/io/spliced_source.h"

#include <algorithm>

namespace prescient::cache::io {

Result<std::unique_ptr<SplicedSource>> SplicedSource::Make(std::vector<Run> runs,
                                                           std::string name) {
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.begin < b.begin; });
  std::uint64_t end = 0;
  for (const Run& run : runs) {
    if (run.file == nullptr || run.bytes == 0) {
      return Status::InvalidArgument(name + ": an empty run of bytes or one without a file");
    }
    if (run.begin != end) {
      return Status::InvalidArgument(name + ": its runs of bytes " +
                                     (run.begin < end ? "overlap" : "leave a gap") + " at " +
                                     std::to_string(std::min(run.begin, end)));
    }
    if (run.bytes > UINT64_MAX - end) return Status::InvalidArgument(name + ": runs too long");
    end += run.bytes;
  }
  return std::unique_ptr<SplicedSource>(new SplicedSource(std::move(runs), std::move(name), end));
}

const SplicedSource::Run& SplicedSource::RunAt(std::uint64_t offset) const {
  const auto after =
      std::upper_bound(runs_.begin(), runs_.end(), offset,
                       [](std::uint64_t at, const Run& run) { return at < run.begin; });
  return *(after - 1);  // runs_[0].begin == 0 <= offset
}

Status SplicedSource::OutOfRange(std::uint64_t offset, std::uint64_t bytes) const {
  return Status::IoError("'" + name_ + "': " + std::to_string(bytes) + " bytes at offset " +
                         std::to_string(offset) + " reach past its end at " + std::to_string(end_));
}

Status SplicedSource::ReadExact(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > end_ || out.size() > end_ - offset) return OutOfRange(offset, out.size());
  while (!out.empty()) {
    const Run& run = RunAt(offset);
    const std::uint64_t into = offset - run.begin;
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), run.bytes - into));
    PRESCIENT_RETURN_IF_ERROR(run.file->ReadExact(run.file_offset + into, out.first(n)));
    out = out.subspan(n);
    offset += n;
  }
  return Status();
}

Status SplicedSource::ReadScattered(std::uint64_t offset,
                                    std::span<const ScatterPiece> pieces) const {
  std::uint64_t total = 0;
  for (const ScatterPiece& piece : pieces) total += piece.size;
  if (offset > end_ || total > end_ - offset) return OutOfRange(offset, total);
  // The pieces of one run, a piece that straddles a seam cut in two.
  std::vector<ScatterPiece> part;
  std::size_t next = 0;         // the first piece not yet (wholly) handed on
  std::uint64_t next_done = 0;  // bytes of pieces[next] already handed on
  for (;;) {
    while (next < pieces.size() && pieces[next].size == 0) ++next;  // (next_done is 0 here)
    if (next == pieces.size()) break;
    const Run& run = RunAt(offset);
    const std::uint64_t into = offset - run.begin;
    std::uint64_t room = run.bytes - into;
    const std::uint64_t part_offset = offset;
    part.clear();
    while (next < pieces.size() && room > 0) {
      const ScatterPiece& piece = pieces[next];
      const std::uint64_t n = std::min<std::uint64_t>(piece.size - next_done, room);
      part.push_back(
          {piece.data == nullptr ? nullptr : piece.data + next_done, static_cast<std::size_t>(n)});
      room -= n;
      offset += n;
      next_done += n;
      if (next_done == piece.size) {
        ++next;
        next_done = 0;
      }
    }
    PRESCIENT_RETURN_IF_ERROR(
        run.file->ReadScattered(run.file_offset + (part_offset - run.begin), part));
  }
  return Status();
}

}  // namespace prescient::cache::io
