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

// Elements of the part of every row a read takes (`d[i, channels]`, a 3-D
// patch `d[z:z+k, y:y+k, x:x+k]`), or 0 when it reads whole rows or no such
// part.
std::uint64_t RowPartElements(const DecodedSelection& s) {
  if (s.whole_rows || s.row_part.empty() || s.rows.rows() == 0) return 0;
  std::uint64_t part = 0;
  for (const ElementRun& run : s.row_part) part += run.count;
  return part * s.rows.rows() == s.elements ? part : 0;
}

std::optional<ReadRequest> Inspect(const VolObject& dataset, hid_t mem_type, hid_t mem_space,
                                   hid_t file_space, TransferVerdict transfer) {
  const DatasetState* state = dataset.dataset.get();
  static const std::vector<hsize_t> kNoDims;
  std::optional<SelectionInput> input =
      DescribeFileSelection(file_space, state ? state->dims() : kNoDims);
  if (!input || (file_space == H5S_ALL && state == nullptr)) return std::nullopt;

  ReadRequest request;
  request.selection = DecodeSelection(*input);
  request.transfer = transfer;
  const std::uint64_t row_part = RowPartElements(request.selection);
  // A row part of at least half a row is served from whole cached rows: a
  // miss then reads the whole row, at most twice the bytes a native read of
  // the part takes. A narrower one (a few channels of many, a 3-D patch) is
  // served only where whole rows pay (CacheClient::TryServe,
  // row_part_evidence.h), else forwarded: a miss would read more than twice
  // what it asks for.
  request.narrow_row_part = row_part != 0 && 2 * row_part < request.selection.row_elements;
  const bool cacheable_dataset = state != nullptr && state->fixed_size() &&
                                 dataset.file != nullptr && !dataset.file->writable &&
                                 dataset.file->identity.valid;
  const bool rows_selected = (request.selection.whole_rows || row_part != 0) &&
                             !request.selection.scalar &&
                             request.selection.kind != SelectionKind::kNone &&
                             // Point selections (boolean masks) keep their own order and
                             // repeats; rare in loaders, they are always forwarded.
                             request.selection.kind != SelectionKind::kPoints;
  const bool servable_shape =
      transfer == TransferVerdict::kServable && cacheable_dataset && rows_selected;
  // When the memory type is the stored type, its size is known: h5py's reads
  // then ask the library one question about the type (dataset_state.h).
  const bool stored_type = servable_shape && state->IsStoredType(mem_type);
  // Some members of a stored compound (`d["x"]`, `read_direct` into fewer
  // fields): gathered from stored elements where HDF5's conversion is a copy.
  if (servable_shape && !stored_type) request.fields = state->FieldsOf(mem_type);
  const size_t mem_type_size = stored_type      ? state->type_size()
                               : request.fields ? request.fields->memory_size()
                                                : H5Tget_size(mem_type);
  request.bytes = request.selection.elements * mem_type_size;
  request.file_space = file_space;
  const bool contiguous_memory =
      (stored_type || request.fields != nullptr) &&
      MemoryIsContiguous(mem_space, file_space, request.selection.elements);
  request.simple = contiguous_memory && !state->changed();
  request.written = contiguous_memory && state->changed();
  request.not_simple = transfer != TransferVerdict::kServable ? ForwardReason::kTransfer
                       : !cacheable_dataset                   ? ForwardReason::kDataset
                       : !rows_selected                       ? ForwardReason::kSelection
                       : !stored_type && !request.fields      ? ForwardReason::kType
                       : !contiguous_memory                   ? ForwardReason::kMemory
                       : request.written                      ? ForwardReason::kWritten
                                                              : ForwardReason::kNone;
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

// Says once per process, at info level, how reads of narrow row parts are
// treated: otherwise a loader of few channels sees nothing served and no
// reason.
void NoteNarrowRowPart() {
  static std::atomic<bool> noted{false};
  if (noted.exchange(true)) return;
  Runtime::Get().Log(LogLevel::kInfo,
                     "reads of less than half of every row they touch (a few channels, a 3-D "
                     "patch) load whole rows only where the reads of their dataset have asked for "
                     "as many bytes as the rows they touch hold (overlapping patches) and the "
                     "cache keeps whole rows; otherwise they are served from the rows the cache "
                     "holds (at least half of theirs, the rest read through HDF5) or forwarded "
                     "to HDF5 (statistics: reads_row_parts_narrow, reads_row_parts_narrow_served, "
                     "reads_row_parts_narrow_split)");
}

// What NoteForwarded says of a reason; null where another message says it.
const char* ForwardedExplanation(ForwardReason reason) {
  switch (reason) {
    case ForwardReason::kTooSmall:
      return "reads of contiguous datasets smaller than PRESCIENT_MIN_DATASET_BYTES are forwarded "
             "to HDF5 unlooked-at: HDF5 reads so few bytes as fast as a cache serves them";
    case ForwardReason::kUndecoded:
      return "reads whose file selection could not be interpreted are forwarded to HDF5";
    case ForwardReason::kDataset:
      return "reads of datasets that cannot be cached (variable-length data, a virtual dataset "
             "or external storage, a file opened for writing or not a regular file, no node "
             "cache) are forwarded to HDF5";
    case ForwardReason::kSelection:
      return "reads of neither whole rows nor the same part of each row (boolean masks, point "
             "lists, scalars, empty selections) are forwarded to HDF5";
    case ForwardReason::kType:
      return "reads into a memory type other than the stored one (astype, big-endian data read "
             "in native order, fields of a compound read as another type or into a structured "
             "array with padding or fields the file lacks) are forwarded to HDF5, which converts "
             "them";
    case ForwardReason::kMemory:
      return "reads into a memory selection that is not one run in selection order (read_direct "
             "into part of an array) are forwarded to HDF5";
    case ForwardReason::kLarge:
      return "reads of more rows than a quarter of the node cache holds are forwarded to HDF5: "
             "keeping them would push out rows read again";
    case ForwardReason::kSmallRowPart:
      return "reads of a part of rows small enough to share a cache entry are forwarded to HDF5";
    case ForwardReason::kAsync:
      return "asynchronous reads (H5Dread_async) are forwarded to HDF5";
    default:
      return nullptr;
  }
}

}  // namespace

void NoteForwarded(ForwardReason reason) noexcept {
  static_assert(static_cast<unsigned>(ForwardReason::kCount) <= 32, "one bit per reason");
  static std::atomic<std::uint32_t> noted{0};
  const std::uint32_t bit = 1u << static_cast<unsigned>(reason);
  if ((noted.load(std::memory_order_relaxed) & bit) != 0) return;
  if ((noted.fetch_or(bit) & bit) != 0) return;
  const char* explanation = ForwardedExplanation(reason);
  if (explanation == nullptr) return;
  try {
    Runtime::Get().Log(LogLevel::kInfo, std::string(explanation) + " (statistics: forwarded." +
                                            ForwardReasonName(reason) + ")");
  } catch (...) {
  }
}

ReadRequest InspectRead(const VolObject& dataset, hid_t mem_type, hid_t mem_space, hid_t file_space,
                        hid_t dxpl) noexcept {
  ReadRequest request;
  try {
    request.transfer = CheckTransfer(dxpl, file_space);
    if (request.transfer != TransferVerdict::kServable) NoteTransferForwarded(request.transfer);
    std::optional<ReadRequest> decoded =
        Inspect(dataset, mem_type, mem_space, file_space, request.transfer);
    if (decoded) {
      request = std::move(*decoded);
      request.decoded = true;
      if (request.narrow_row_part) NoteNarrowRowPart();
    } else if (request.transfer != TransferVerdict::kServable) {
      request.not_simple = ForwardReason::kTransfer;  // an H5S_PLIST selection is not decoded
    }
  } catch (const std::exception& e) {
    Runtime::Get().Log(LogLevel::kDebug, std::string("read not decoded: ") + e.what());
  } catch (...) {
  }
  return request;
}

}  // namespace prescient::vol
