#include "vol/read/read_hook.h"

#include <exception>

#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/read/selection_hdf5.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

std::optional<ReadRequest> Inspect(const VolObject& dataset, hid_t mem_type, hid_t mem_space,
                                   hid_t file_space) {
  const DatasetState* state = dataset.dataset.get();
  static const std::vector<hsize_t> kNoDims;
  std::optional<SelectionInput> input =
      DescribeFileSelection(file_space, state ? state->dims() : kNoDims);
  if (!input || (file_space == H5S_ALL && state == nullptr)) return std::nullopt;

  ReadRequest request;
  request.selection = DecodeSelection(*input);
  const size_t mem_type_size = H5Tget_size(mem_type);
  request.bytes = request.selection.elements * mem_type_size;

  request.simple =
      state != nullptr && state->fixed_size() && !state->changed() && dataset.file != nullptr &&
      !dataset.file->writable && dataset.file->identity.valid && request.selection.whole_rows &&
      !request.selection.scalar && request.selection.kind != SelectionKind::kNone &&
      // Point selections (boolean masks) keep their own order and
      // repeats; rare in loaders, they are always forwarded.
      request.selection.kind != SelectionKind::kPoints && state->IsStoredType(mem_type) &&
      MemoryIsContiguous(mem_space, file_space, request.selection.elements);
  return request;
}

}  // namespace

std::optional<ReadRequest> InspectRead(const VolObject& dataset, hid_t mem_type, hid_t mem_space,
                                       hid_t file_space) noexcept {
  Stats& stats = Runtime::Get().stats();
  try {
    std::optional<ReadRequest> request = Inspect(dataset, mem_type, mem_space, file_space);
    if (request) {
      stats.CountRead(request->selection, request->simple, request->bytes);
    } else {
      stats.Add(Counter::kReadsUndecoded);
    }
    return request;
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("read not decoded: ") + e.what());
  } catch (...) {
  }
  stats.Add(Counter::kReadsUndecoded);
  return std::nullopt;
}

}  // namespace prescient::vol
