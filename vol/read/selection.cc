#include "vol/read/selection.h"

#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>

namespace prescient::vol {
namespace {

std::uint64_t Product(const DimValues& dims, std::size_t from) {
  std::uint64_t p = 1;
  for (std::size_t d = from; d < dims.size(); ++d) p *= dims[d];
  return p;
}

// Along dimension d, does the regular pattern select every index?
bool CoversDimension(const SelectionInput& in, std::size_t d) {
  const std::uint64_t extent = in.dims[d];
  if (in.start[d] != 0 || in.count[d] == 0 || in.block[d] == 0) return extent == 0;
  if (in.count[d] == 1) return in.block[d] >= extent;
  // Blocks tile [0, extent) without gaps when stride <= block.
  return in.stride[d] <= in.block[d] && in.stride[d] * (in.count[d] - 1) + in.block[d] >= extent;
}

// Indices [lo, hi) along one dimension.
struct Span {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
};

// Appends the runs of one box of a row: along each of dimensions 1..rank-1
// (`row_dims`), the ascending, disjoint `spans` it selects. Runs come out
// ascending; false when they would pass `cap`.
bool AppendBoxRuns(std::span<const std::uint64_t> row_dims,
                   const std::vector<std::vector<Span>>& spans, std::vector<ElementRun>& runs,
                   std::size_t cap) {
  const std::size_t k = row_dims.size();
  // The dimensions after `last` are selected whole: a run spans them.
  std::size_t last = k;
  for (std::size_t d = k; d-- > 0;) {
    if (spans[d].size() != 1 || spans[d][0].lo != 0 || spans[d][0].hi != row_dims[d]) {
      last = d;
      break;
    }
  }
  if (last == k) {  // the whole row
    if (runs.size() >= cap) return false;
    std::uint64_t all = 1;
    for (std::uint64_t extent : row_dims) all *= extent;
    runs.push_back(ElementRun{0, all});
    return true;
  }
  std::vector<std::uint64_t> pitch(k, 1);  // elements per index step of each dimension
  for (std::size_t d = k - 1; d-- > 0;) pitch[d] = pitch[d + 1] * row_dims[d + 1];
  // Every index of dimensions before `last`, times every span of `last`.
  std::uint64_t combos = spans[last].size();
  std::vector<std::vector<std::uint64_t>> indices(last);
  for (std::size_t d = 0; d < last; ++d) {
    std::uint64_t n = 0;
    for (const Span& s : spans[d]) n += s.hi - s.lo;
    if (n == 0 || combos > (cap - runs.size()) / n) return n == 0;
    combos *= n;
    for (const Span& s : spans[d])
      for (std::uint64_t i = s.lo; i < s.hi; ++i) indices[d].push_back(i);
  }
  if (combos > cap - runs.size()) return false;
  std::vector<std::size_t> at(last, 0);  // an odometer over `indices`
  while (true) {
    std::uint64_t base = 0;
    for (std::size_t d = 0; d < last; ++d) base += indices[d][at[d]] * pitch[d];
    for (const Span& s : spans[last]) {
      const ElementRun run{base + s.lo * pitch[last], (s.hi - s.lo) * pitch[last]};
      if (run.count == 0) continue;
      if (!runs.empty() && runs.back().offset + runs.back().count == run.offset) {
        runs.back().count += run.count;
      } else {
        runs.push_back(run);
      }
    }
    std::size_t d = last;
    while (d > 0 && ++at[d - 1] == indices[d - 1].size()) at[--d] = 0;
    if (d == 0) return true;
  }
}

// The spans of a regular pattern along one dimension (nullopt past `cap`).
std::optional<std::vector<Span>> PatternSpans(std::uint64_t start, std::uint64_t stride,
                                              std::uint64_t count, std::uint64_t block,
                                              std::size_t cap) {
  std::vector<Span> out;
  if (count == 0 || block == 0) return out;
  if (count > 1 && stride <= block) {  // blocks that touch or overlap are one span
    return std::vector<Span>{{start, start + stride * (count - 1) + block}};
  }
  if (count > cap) return std::nullopt;
  for (std::uint64_t c = 0; c < count; ++c)
    out.push_back({start + c * stride, start + c * stride + block});
  return out;
}

void RequireSize(const DimValues& v, std::size_t n, const char* what) {
  if (v.size() != n) throw std::invalid_argument(std::string("selection: bad size of ") + what);
}

DecodedSelection DecodeRegular(const SelectionInput& in) {
  const std::size_t rank = in.dims.size();
  for (const auto* v : {&in.start, &in.stride, &in.count, &in.block})
    RequireSize(*v, rank, "regular");
  DecodedSelection out;
  out.kind = SelectionKind::kRegular;
  // Normalise dimension 0: count=N/block=1 (slices) and count=1/block=N
  // (merged fancy lists) describe the same rows; overlapping blocks
  // (stride < block) merge into one run.
  std::uint64_t stride = std::max<std::uint64_t>(in.stride[0], 1);
  std::uint64_t block = in.block[0];
  std::uint64_t count = in.count[0];
  if (count > 1 && stride <= block) {
    block = stride * (count - 1) + block;
    count = 1;
    stride = block;
  }
  if (count == 1) stride = block;
  out.rows = RowSelection::Pattern(in.start[0], stride, count, block);
  out.whole_rows = true;
  std::uint64_t elements_per_row = 1;
  for (std::size_t d = 1; d < rank; ++d) {
    if (!CoversDimension(in, d)) out.whole_rows = false;
    elements_per_row *= in.count[d] * in.block[d];
  }
  out.row_elements = Product(in.dims, 1);
  out.elements = out.rows.rows() * elements_per_row;
  if (out.whole_rows) {
    out.elements = out.rows.rows() * out.row_elements;
    return out;
  }
  std::vector<std::vector<Span>> spans;
  for (std::size_t d = 1; d < rank; ++d) {
    std::optional<std::vector<Span>> dim_spans =
        PatternSpans(in.start[d], std::max<std::uint64_t>(in.stride[d], 1), in.count[d],
                     in.block[d], kMaxRowPartRuns);
    if (!dim_spans) return out;
    spans.push_back(std::move(*dim_spans));
  }
  const std::span<const std::uint64_t> row_dims(in.dims.data() + 1, rank - 1);
  if (!AppendBoxRuns(row_dims, spans, out.row_part, kMaxRowPartRuns)) out.row_part.clear();
  return out;
}

// The part of a row an irregular selection takes, when it is the same for
// every row range: blocks are grouped by their range of dimension 0, and each
// group must hold the same boxes of dimensions 1..rank-1.
std::vector<ElementRun> IrregularRowPart(const SelectionInput& in) {
  const std::size_t rank = in.dims.size();
  const std::size_t nblocks = in.blocks.size() / (2 * rank);
  using Box = std::vector<std::uint64_t>;  // lo then hi of dimensions 1..rank-1
  std::vector<std::pair<RowRun, Box>> keyed;
  keyed.reserve(nblocks);
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::uint64_t* lo = &in.blocks[b * 2 * rank];
    const std::uint64_t* hi = lo + rank;
    Box box(lo + 1, lo + rank);
    box.insert(box.end(), hi + 1, hi + rank);
    keyed.push_back({RowRun{lo[0], hi[0] - lo[0] + 1}, std::move(box)});
  }
  auto by_rows_then_box = [](const auto& a, const auto& b) {
    if (a.first.first != b.first.first) return a.first.first < b.first.first;
    if (a.first.count != b.first.count) return a.first.count < b.first.count;
    return a.second < b.second;
  };
  std::sort(keyed.begin(), keyed.end(), by_rows_then_box);
  // The boxes of the first row range, then a check that every range has them.
  std::size_t per_range = 0;
  while (per_range < keyed.size() && keyed[per_range].first == keyed[0].first) ++per_range;
  if (per_range == 0 || keyed.size() % per_range != 0) return {};
  for (std::size_t i = per_range; i < keyed.size(); ++i) {
    if (keyed[i].second != keyed[i % per_range].second) return {};
    const bool same_range = keyed[i].first == keyed[i - 1].first;
    if (same_range != (i % per_range != 0)) return {};  // every range has exactly the boxes
  }
  for (std::size_t i = per_range; i < keyed.size(); i += per_range) {
    const RowRun& before = keyed[i - per_range].first;
    if (keyed[i].first.first < before.first + before.count) return {};  // overlapping ranges
  }
  const std::span<const std::uint64_t> row_dims(in.dims.data() + 1, rank - 1);
  std::vector<ElementRun> runs;
  for (std::size_t i = 0; i < per_range; ++i) {
    const Box& box = keyed[i].second;
    std::vector<std::vector<Span>> spans;
    for (std::size_t d = 0; d + 1 < rank; ++d)
      spans.push_back({Span{box[d], box[rank - 1 + d] + 1}});
    if (!AppendBoxRuns(row_dims, spans, runs, kMaxRowPartRuns)) return {};
  }
  // Boxes arrive in any order: sort their runs, refuse overlaps, join neighbours.
  std::sort(runs.begin(), runs.end(),
            [](const ElementRun& a, const ElementRun& b) { return a.offset < b.offset; });
  std::vector<ElementRun> joined;
  for (const ElementRun& run : runs) {
    if (!joined.empty() && run.offset < joined.back().offset + joined.back().count) return {};
    if (!joined.empty() && joined.back().offset + joined.back().count == run.offset) {
      joined.back().count += run.count;
    } else {
      joined.push_back(run);
    }
  }
  return joined;
}

DecodedSelection DecodeIrregular(const SelectionInput& in) {
  const std::size_t rank = in.dims.size();
  if (rank == 0 || in.blocks.size() % (2 * rank) != 0) {
    throw std::invalid_argument("selection: bad irregular block list");
  }
  DecodedSelection out;
  out.kind = SelectionKind::kIrregular;
  out.whole_rows = true;
  std::vector<RowRun> runs;
  const std::size_t nblocks = in.blocks.size() / (2 * rank);
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::uint64_t* lo = &in.blocks[b * 2 * rank];
    const std::uint64_t* hi = lo + rank;
    std::uint64_t block_elements = 1;
    for (std::size_t d = 0; d < rank; ++d) {
      if (hi[d] < lo[d]) throw std::invalid_argument("selection: inverted block");
      block_elements *= hi[d] - lo[d] + 1;
      if (d > 0 && (lo[d] != 0 || hi[d] + 1 != in.dims[d])) out.whole_rows = false;
    }
    out.elements += block_elements;
    // Blocks of one row range split along inner dimensions arrive one after
    // another; they touch the same rows, so they are one run.
    RowRun run{lo[0], hi[0] - lo[0] + 1};
    if (!runs.empty() && runs.back() == run) continue;
    if (!runs.empty() && runs.back().first + runs.back().count == run.first) {
      runs.back().count += run.count;
    } else {
      runs.push_back(run);
    }
  }
  out.rows = RowSelection::Runs(std::move(runs));
  out.row_elements = Product(in.dims, 1);
  if (!out.whole_rows) out.row_part = IrregularRowPart(in);
  return out;
}

DecodedSelection DecodePoints(const SelectionInput& in) {
  const std::size_t rank = in.dims.size();
  if (rank == 0 || in.points.size() % rank != 0) {
    throw std::invalid_argument("selection: bad point list");
  }
  DecodedSelection out;
  out.kind = SelectionKind::kPoints;
  const std::size_t npoints = in.points.size() / rank;
  out.elements = npoints;
  // A point covers a whole row only when a row is a single element.
  out.row_elements = Product(in.dims, 1);
  out.whole_rows = out.row_elements == 1;
  std::vector<RowRun> runs;
  for (std::size_t p = 0; p < npoints; ++p) {
    const std::uint64_t row = in.points[p * rank];
    if (!runs.empty() && runs.back().first + runs.back().count == row) {
      ++runs.back().count;
    } else {
      runs.push_back(RowRun{row, 1});
    }
  }
  out.rows = RowSelection::Runs(std::move(runs));
  return out;
}

}  // namespace

std::string_view SelectionKindName(SelectionKind kind) {
  switch (kind) {
    case SelectionKind::kNone:
      return "none";
    case SelectionKind::kAll:
      return "all";
    case SelectionKind::kRegular:
      return "regular";
    case SelectionKind::kIrregular:
      return "irregular";
    case SelectionKind::kPoints:
      return "points";
  }
  return "unknown";
}

RowSelection RowSelection::Pattern(std::uint64_t start, std::uint64_t stride, std::uint64_t count,
                                   std::uint64_t block) {
  RowSelection s;
  s.is_pattern_ = true;
  s.start_ = start;
  s.stride_ = stride;
  s.count_ = count;
  s.block_ = block;
  s.rows_ = count * block;
  s.ascending_ = count <= 1 || stride >= block;
  return s;
}

RowSelection RowSelection::Runs(std::vector<RowRun> runs) {
  RowSelection s;
  s.ascending_ = true;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    s.rows_ += runs[i].count;
    if (i > 0 && runs[i].first < runs[i - 1].first + runs[i - 1].count) s.ascending_ = false;
  }
  s.runs_ = std::move(runs);
  return s;
}

std::uint64_t RowSelection::run_count() const {
  if (!is_pattern_) return runs_.size();
  if (count_ == 0 || block_ == 0) return 0;
  return stride_ == block_ ? 1 : count_;
}

std::vector<RowRun> RowSelection::Materialize() const {
  std::vector<RowRun> out;
  ForEachRun([&](const RowRun& run) { out.push_back(run); });
  return out;
}

DecodedSelection DecodeSelection(const SelectionInput& input) {
  DecodedSelection out;
  switch (input.kind) {
    case SelectionKind::kNone:
      out.kind = SelectionKind::kNone;
      out.whole_rows = true;
      return out;
    case SelectionKind::kAll:
      out.kind = SelectionKind::kAll;
      out.whole_rows = true;
      if (input.dims.empty()) {
        out.scalar = true;
        out.elements = 1;
        return out;
      }
      out.rows = RowSelection::Pattern(0, input.dims[0], input.dims[0] > 0 ? 1 : 0, input.dims[0]);
      out.row_elements = Product(input.dims, 1);
      out.elements = Product(input.dims, 0);
      return out;
    case SelectionKind::kRegular:
      if (input.dims.empty()) throw std::invalid_argument("selection: hyperslab on a scalar");
      return DecodeRegular(input);
    case SelectionKind::kIrregular:
      return DecodeIrregular(input);
    case SelectionKind::kPoints:
      return DecodePoints(input);
  }
  throw std::invalid_argument("selection: unknown kind");
}

}  // namespace prescient::vol
