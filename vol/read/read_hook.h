// What a dataset read asks for, decoded on the caller's thread before the read
// is served or forwarded.
//
// Every read of a dataset Prescient identified goes through InspectRead: the
// file selection becomes whole rows along dimension 0 (selection.h), and the
// read is "simple" when it could be served row by row from a cache: the
// memory type equals the stored type, the memory side is one contiguous run in
// selection order (or a set of the stored compound's members the connector
// gathers itself: compound_fields.h), the selection covers whole rows or the same part of every
// row it touches (a narrow part is then served only where whole rows pay:
// CacheClient::TryServe), the dataset holds
// fixed-size data, was not changed through this process and sits in a file
// opened read-only, and the transfer property list asks for nothing but the
// stored bytes (transfer_properties.h). The caller counts the read once it is
// done (Stats::Commit).
#ifndef PRESCIENT_VOL_READ_READ_HOOK_H_
#define PRESCIENT_VOL_READ_READ_HOOK_H_

#include <memory>
#include <optional>

#include "vol/hdf5_compat.h"
#include "vol/objects/compound_fields.h"
#include "vol/objects/object.h"
#include "vol/read/forward_reason.h"
#include "vol/read/selection.h"
#include "vol/read/transfer_properties.h"

namespace prescient::vol {

struct ReadRequest {
  bool decoded = false;  // false: the file selection could not be interpreted
  DecodedSelection selection;
  bool simple = false;
  // Why the read is not simple (kNone when it is): the first of the
  // conditions above it fails, in the order they are listed.
  ForwardReason not_simple = ForwardReason::kUndecoded;
  // Would be simple, but the dataset was written or resized through this
  // process (a fallback the caller reports).
  bool written = false;
  // The same part of every row, under half a row: served only where whole
  // rows pay (read_hook.cc).
  bool narrow_row_part = false;
  TransferVerdict transfer = TransferVerdict::kServable;
  std::uint64_t bytes = 0;  // elements x memory type size
  // Set when the memory type is some members of the stored compound type:
  // the read is served as stored elements, then these members gathered.
  std::shared_ptr<const CompoundFields> fields;
  // The read's file dataspace, the caller's: valid during the read callback
  // only (a narrow read served in part reads its other rows' parts through
  // it, CacheClient::TryServe).
  hid_t file_space = H5I_INVALID_HID;
};

// Says once per process, at info level (PRESCIENT_LOG=info), why reads of a
// kind are forwarded, for the reasons no other message explains already (the
// fallbacks warn, the transfer list and narrow parts have notes of their own).
void NoteForwarded(ForwardReason reason) noexcept;

// Never throws; a read that could not be decoded is simply forwarded.
ReadRequest InspectRead(const VolObject& dataset, hid_t mem_type, hid_t mem_space, hid_t file_space,
                        hid_t dxpl) noexcept;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_READ_READ_HOOK_H_
