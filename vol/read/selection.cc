#include "vol/read/selection.h"

#include <algorithm>
#include <stdexcept>

namespace prescient::vol {
namespace {

std::uint64_t Product(const std::vector<std::uint64_t>& dims, std::size_t from) {
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

void RequireSize(const std::vector<std::uint64_t>& v, std::size_t n, const char* what) {
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
  out.elements = out.rows.rows() * elements_per_row;
  if (out.whole_rows) out.elements = out.rows.rows() * Product(in.dims, 1);
  return out;
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
  out.whole_rows = Product(in.dims, 1) == 1;
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
