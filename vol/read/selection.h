// Decoding a dataset read's file selection into whole rows along dimension 0.
//
// This is the pure, HDF5-free half of the read hook: the caller describes the
// selection it got from HDF5 (SelectionInput, filled by selection_hdf5.cc) and
// DecodeSelection says which rows it touches, in transfer order, and whether
// every touched row is selected whole, or else which part of each row. It runs on every read, so a
// regular hyperslab is kept as its (start, stride, count, block) pattern and never expanded;
// irregular block lists and point lists cost one step per block or point.
#ifndef PRESCIENT_VOL_READ_SELECTION_H_
#define PRESCIENT_VOL_READ_SELECTION_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string_view>
#include <vector>

namespace prescient::vol {

enum class SelectionKind { kNone, kAll, kRegular, kIrregular, kPoints };
std::string_view SelectionKindName(SelectionKind kind);

// One value per dimension of a dataspace, held inline: HDF5 allows at most
// kMaxRank dimensions (H5S_MAX_RANK), and every read is described anew, so
// describing one allocates nothing.
class DimValues {
 public:
  static constexpr std::size_t kMaxRank = 32;

  DimValues() = default;
  // Throws std::invalid_argument for more than kMaxRank values.
  DimValues(std::initializer_list<std::uint64_t> values) { Assign(values.begin(), values.size()); }
  // Implicit: extents kept as vectors elsewhere convert as they are.
  DimValues(const std::vector<std::uint64_t>& values) { Assign(values.data(), values.size()); }
  template <typename T>
  static DimValues Of(const T* values, std::size_t n) {
    DimValues out;
    out.Assign(values, n);
    return out;
  }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::uint64_t* data() const { return values_; }
  const std::uint64_t* begin() const { return values_; }
  const std::uint64_t* end() const { return values_ + size_; }
  std::uint64_t operator[](std::size_t d) const { return values_[d]; }
  friend bool operator==(const DimValues& a, const DimValues& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  template <typename T>
  void Assign(const T* values, std::size_t n) {
    if (n > kMaxRank) throw std::invalid_argument("selection: more dimensions than HDF5 allows");
    for (std::size_t d = 0; d < n; ++d) values_[d] = static_cast<std::uint64_t>(values[d]);
    size_ = n;
  }

  std::uint64_t values_[kMaxRank] = {};
  std::size_t size_ = 0;
};

// A selection as HDF5 reports it. Coordinates are element indices; `dims` is
// the dataset extent (empty for a scalar dataspace).
struct SelectionInput {
  SelectionKind kind = SelectionKind::kNone;
  DimValues dims;
  // kRegular: one entry per dimension (H5Sget_regular_hyperslab).
  DimValues start, stride, count, block;
  // kIrregular: per block, rank start coordinates then rank end coordinates
  // (inclusive), as H5Sget_select_hyper_blocklist lays them out.
  std::vector<std::uint64_t> blocks;
  // kPoints: per point, rank coordinates, in the order HDF5 transfers them.
  std::vector<std::uint64_t> points;
};

// Rows [first, first + count) along dimension 0.
struct RowRun {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
  friend bool operator==(const RowRun&, const RowRun&) = default;
};

// The rows a selection touches. Either a strided pattern, the union of
// [start + c*stride, start + c*stride + block) for c < count (regular
// hyperslabs and ALL; stride >= block after normalisation), or an explicit list
// of runs in transfer order (irregular hyperslabs, points).
class RowSelection {
 public:
  static RowSelection Pattern(std::uint64_t start, std::uint64_t stride, std::uint64_t count,
                              std::uint64_t block);
  static RowSelection Runs(std::vector<RowRun> runs);

  // Number of row visits (a row listed twice by a point selection counts twice).
  std::uint64_t rows() const { return rows_; }
  // Number of runs, without materialising them.
  std::uint64_t run_count() const;
  // True when runs come in strictly ascending, non-overlapping order.
  bool ascending() const { return ascending_; }

  // Calls fn(RowRun) for every run in transfer order. Adjacent runs of a
  // pattern whose stride equals its block come out as one run.
  template <typename Fn>
  void ForEachRun(Fn&& fn) const {
    if (!is_pattern_) {
      for (const RowRun& run : runs_) fn(run);
      return;
    }
    if (count_ == 0 || block_ == 0) return;
    if (stride_ == block_) {
      fn(RowRun{start_, count_ * block_});
      return;
    }
    for (std::uint64_t c = 0; c < count_; ++c) fn(RowRun{start_ + c * stride_, block_});
  }

  std::vector<RowRun> Materialize() const;

 private:
  bool is_pattern_ = false;
  bool ascending_ = true;
  std::uint64_t start_ = 0, stride_ = 1, count_ = 0, block_ = 0;
  std::vector<RowRun> runs_;
  std::uint64_t rows_ = 0;
};

// Elements [offset, offset + count) of one row, numbered in row-major order
// over dimensions 1..rank-1.
struct ElementRun {
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  friend bool operator==(const ElementRun&, const ElementRun&) = default;
};

// A row part is described only up to this many runs (a finer one, such as a
// strided crop of a large image, is left undescribed and its read forwarded).
inline constexpr std::size_t kMaxRowPartRuns = 4096;

struct DecodedSelection {
  SelectionKind kind = SelectionKind::kNone;
  RowSelection rows;
  // Every touched row is selected in all of dimensions 1..rank-1.
  bool whole_rows = false;
  // When not whole_rows: the part of a row the selection takes, if it takes
  // the same part of every touched row (the selection is those rows times one
  // selection of dimensions 1..rank-1, such as `d[i, channels]`), as ascending
  // runs, which is the order HDF5 transfers a hyperslab's elements in; empty
  // when the part differs between rows, the selection is points, or it needs
  // more than kMaxRowPartRuns runs.
  std::vector<ElementRun> row_part;
  // Elements of a whole row (the product of dimensions 1..rank-1).
  std::uint64_t row_elements = 0;
  // Elements selected (rows * row elements when whole_rows).
  std::uint64_t elements = 0;
  // Scalar dataspace: there is no dimension 0 and no row.
  bool scalar = false;
};

// REQUIRES: the vectors of `input` have the sizes its kind implies. Throws
// std::invalid_argument otherwise (the caller then counts the read as
// undecoded and forwards it).
DecodedSelection DecodeSelection(const SelectionInput& input);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_READ_SELECTION_H_
