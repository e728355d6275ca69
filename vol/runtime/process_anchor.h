// The process the connector was initialised in, and where its helper programs are.
//
// HDF5 initialises the connector once per process that loads it (a training
// script importing h5py with HDF5_VOL_CONNECTOR set); processes forked from it
// (DataLoader workers) inherit the record and so know whom they work for. The
// node cache keeps its segment alive for that anchor between worker
// generations (cache/core/segment_keeper.h).
#ifndef PRESCIENT_VOL_RUNTIME_PROCESS_ANCHOR_H_
#define PRESCIENT_VOL_RUNTIME_PROCESS_ANCHOR_H_

#include <string>

#include "cache/core/process_identity.h"

namespace prescient::vol {

// Records the calling process as the anchor, once (later calls, and calls in
// forked children, keep the first record).
void RecordProcessAnchor() noexcept;

// The recorded anchor; the calling process when none was recorded.
cache::ProcessIdentity ProcessAnchor() noexcept;

// The segment keeper executable installed beside this plugin (in its
// directory or the one above, for the wheel plugin's unbound/ library), or
// empty when there is none.
std::string KeeperExecutable();

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_PROCESS_ANCHOR_H_
