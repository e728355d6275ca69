#include "vol/serve/row_part_evidence.h"

namespace prescient::vol {

bool RowPartEvidence::NoteAndCheck(std::span<const std::uint64_t> rows, std::uint64_t part_bytes) {
  if (num_rows_ == 0 || num_rows_ > kMaxRows || row_bytes_ == 0) return false;
  if (seen_.empty()) seen_.assign((num_rows_ + 63) / 64, 0);
  for (const std::uint64_t row : rows) {
    if (row >= num_rows_) continue;
    std::uint64_t& word = seen_[row / 64];
    const std::uint64_t bit = std::uint64_t{1} << (row % 64);
    if ((word & bit) == 0) {
      word |= bit;
      ++distinct_rows_;
    }
    bytes_asked_ += part_bytes;
  }
  return distinct_rows_ > 0 && bytes_asked_ >= distinct_rows_ * row_bytes_;
}

}  // namespace prescient::vol
