#include "vol/read/read_hook.h"

#include <atomic>
#include <exception>
#include <string>

#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/read/selection_hdf5.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

std::optional<ReadRequest> Inspect(const VolObject& dataset, hid_t mem_type, hid_t mem_space,
                                   hid_t file_space, TransferVerdict transfer) {
  const DatasetState* state = dataset.dataset.get();
  static const std::vector<hsize_t> kNoDims;
  std::optional<SelectionInput> input =
      DescribeFileSelection(file_space, state ? state->dims() : kNoDims);
  if (!input || (file_space == H5S_ALL && state == nullptr)) return std::nullopt;

  ReadRequest request;
  request.selection = DecodeSelection(*input);
  const size_t mem_type_size = H5Tget_size(mem_type);
  request.bytes = request.selection.elements * mem_type_size;

  request.transfer = transfer;
  request.simple =
      transfer == TransferVerdict::kServable && state != nullptr && state->fixed_size() &&
      !state->changed() && dataset.file != nullptr && !dataset.file->writable &&
      dataset.file->identity.valid && request.selection.whole_rows && !request.selection.scalar &&
      request.selection.kind != SelectionKind::kNone &&
      // Point selections (boolean masks) keep their own order and
      // repeats; rare in loaders, they are always forwarded.
      request.selection.kind != SelectionKind::kPoints && state->IsStoredType(mem_type) &&
      MemoryIsContiguous(mem_space, file_space, request.selection.elements);
  return request;
}

// Says once per process, at info level, why reads of a kind are forwarded.
void NoteTransferForwarded(TransferVerdict verdict) {
  static std::atomic<std::uint32_t> noted{0};
  const std::uint32_t bit = 1u << static_cast<unsigned>(verdict);
  if ((noted.fetch_or(bit) & bit) != 0) return;
  Runtime::Get().Log(LogLevel::kInfo, std::string("reads with ") +
                                          std::string(TransferVerdictName(verdict)) +
                                          " are forwarded to HDF5, never served from the cache");
}

}  // namespace

std::optional<ReadRequest> InspectRead(const VolObject& dataset, hid_t mem_type, hid_t mem_space,
                                       hid_t file_space, hid_t dxpl) noexcept {
  Stats& stats = Runtime::Get().stats();
  try {
    const TransferVerdict transfer = CheckTransfer(dxpl, file_space);
    if (transfer != TransferVerdict::kServable) {
      stats.Add(Counter::kReadsTransferForwarded);
      NoteTransferForwarded(transfer);
    }
    std::optional<ReadRequest> request =
        Inspect(dataset, mem_type, mem_space, file_space, transfer);
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
