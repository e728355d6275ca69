// Whether caching whole rows pays for reads that each take a narrow part of
// the rows they touch, judged from the reads themselves.
//
// A read of under half of every row it touches (read_hook.cc) is forwarded by
// default: a miss would load whole rows, more than twice the bytes the read
// asks for. That is right for a few channels of many (`d[i, channels]`, the
// same part every time) and for one random crop per sample per epoch, where
// the rest of a row is never read while it is cached. It is wrong for 3-D
// patches of a volume (`d[z:z+k, y:y+k, x:x+k]`, pytorch-3dunet's lazy
// loader): overlapping patches read every part of every z-plane many times an
// epoch, and whole planes read once serve them all.
//
// The measure is the bytes the narrow reads of a dataset asked for against
// the bytes of the distinct rows they touched: once they asked for at least
// as much as those rows hold, whole rows would have read no more than the
// reads did. It says nothing of how long rows stay cached; the caller adds
// that (CachedDataset::NarrowPartsPay).
//
// A value type; its owner locks it.
#ifndef PRESCIENT_VOL_SERVE_ROW_PART_EVIDENCE_H_
#define PRESCIENT_VOL_SERVE_ROW_PART_EVIDENCE_H_

#include <cstdint>
#include <span>
#include <vector>

namespace prescient::vol {

class RowPartEvidence {
 public:
  // Datasets of more rows are not tracked (a bit per row): their narrow
  // reads are never judged to pay.
  static constexpr std::uint64_t kMaxRows = std::uint64_t{1} << 24;

  RowPartEvidence(std::uint64_t num_rows, std::uint64_t row_bytes)
      : num_rows_(num_rows), row_bytes_(row_bytes) {}

  // Notes a read of `part_bytes` of each of `rows` (rows past the dataset's
  // end are ignored) and says whether, with it, the narrow reads so far asked
  // for at least the bytes of the distinct rows they touched.
  bool NoteAndCheck(std::span<const std::uint64_t> rows, std::uint64_t part_bytes);

  std::uint64_t distinct_rows() const { return distinct_rows_; }
  std::uint64_t bytes_asked() const { return bytes_asked_; }

 private:
  std::uint64_t num_rows_;
  std::uint64_t row_bytes_;
  std::vector<std::uint64_t> seen_;  // a bit per row, allocated at the first read
  std::uint64_t distinct_rows_ = 0;
  std::uint64_t bytes_asked_ = 0;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_ROW_PART_EVIDENCE_H_
