#include "vol/read/selection_hdf5.h"

namespace prescient::vol {

static_assert(DimValues::kMaxRank == H5S_MAX_RANK);

std::optional<SelectionInput> DescribeFileSelection(hid_t file_space,
                                                    const std::vector<hsize_t>& dataset_dims) {
  SelectionInput in;
  if (file_space == H5S_ALL) {
    if (dataset_dims.size() > DimValues::kMaxRank) return std::nullopt;
    in.kind = SelectionKind::kAll;
    in.dims = DimValues::Of(dataset_dims.data(), dataset_dims.size());
    return in;
  }
  if (file_space == H5S_BLOCK || file_space == H5S_PLIST) return std::nullopt;

  // One call for rank and extent (a dataspace has at most H5S_MAX_RANK dimensions).
  hsize_t extent[H5S_MAX_RANK];
  const int rank = H5Sget_simple_extent_dims(file_space, extent, nullptr);
  if (rank < 0 || rank > H5S_MAX_RANK) return std::nullopt;
  const auto ndims = static_cast<std::size_t>(rank);
  in.dims = DimValues::Of(extent, ndims);

  switch (H5Sget_select_type(file_space)) {
    case H5S_SEL_NONE:
      in.kind = SelectionKind::kNone;
      return in;
    case H5S_SEL_ALL:
      in.kind = SelectionKind::kAll;
      return in;
    case H5S_SEL_POINTS: {
      in.kind = SelectionKind::kPoints;
      const hssize_t n = H5Sget_select_elem_npoints(file_space);
      if (n < 0) return std::nullopt;
      std::vector<hsize_t> points(static_cast<std::size_t>(n) * ndims);
      if (n > 0 &&
          H5Sget_select_elem_pointlist(file_space, 0, static_cast<hsize_t>(n), points.data()) < 0) {
        return std::nullopt;
      }
      in.points.assign(points.begin(), points.end());
      return in;
    }
    case H5S_SEL_HYPERSLABS: {
      const htri_t regular = H5Sis_regular_hyperslab(file_space);
      if (regular < 0) return std::nullopt;
      if (regular > 0) {
        // Never walk the block list of a regular selection: x[5] on a
        // (N, 3, 32, 32) dataset reports 3072 blocks.
        in.kind = SelectionKind::kRegular;
        hsize_t start[H5S_MAX_RANK], stride[H5S_MAX_RANK], count[H5S_MAX_RANK], block[H5S_MAX_RANK];
        if (H5Sget_regular_hyperslab(file_space, start, stride, count, block) < 0) {
          return std::nullopt;
        }
        in.start = DimValues::Of(start, ndims);
        in.stride = DimValues::Of(stride, ndims);
        in.count = DimValues::Of(count, ndims);
        in.block = DimValues::Of(block, ndims);
        return in;
      }
      in.kind = SelectionKind::kIrregular;
      const hssize_t n = H5Sget_select_hyper_nblocks(file_space);
      if (n < 0) return std::nullopt;
      std::vector<hsize_t> blocks(static_cast<std::size_t>(n) * 2 * ndims);
      if (n > 0 && H5Sget_select_hyper_blocklist(file_space, 0, static_cast<hsize_t>(n),
                                                 blocks.data()) < 0) {
        return std::nullopt;
      }
      in.blocks.assign(blocks.begin(), blocks.end());
      return in;
    }
    default:
      return std::nullopt;
  }
}

bool MemoryIsContiguous(hid_t mem_space, hid_t file_space, std::uint64_t elements) {
  if (mem_space == H5S_BLOCK) return true;
  if (mem_space == H5S_PLIST) return false;
  if (mem_space == H5S_ALL) {
    return file_space == H5S_ALL || H5Sget_select_type(file_space) == H5S_SEL_ALL;
  }
  if (H5Sget_select_type(mem_space) != H5S_SEL_ALL) return false;
  const hssize_t n = H5Sget_select_npoints(mem_space);
  return n >= 0 && static_cast<std::uint64_t>(n) == elements;
}

}  // namespace prescient::vol
