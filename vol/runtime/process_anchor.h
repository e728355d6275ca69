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
#include <string_view>

#include "cache/core/process_identity.h"

namespace prescient::vol {

// Records the calling process as the anchor, once (later calls, and calls in
// forked children, keep the first record).
void RecordProcessAnchor() noexcept;

// The recorded anchor; the calling process when none was recorded.
cache::ProcessIdentity ProcessAnchor() noexcept;

// The process the node's segment is kept for between DataLoader worker
// generations (cache/core/segment_keeper.h): the recorded anchor, or, when
// that process was started by Python's multiprocessing (a worker started by
// spawn or by a forkserver, Python 3.14's default, or the forkserver itself),
// its nearest ancestor that multiprocessing did not start. Such workers load
// the connector themselves and inherit no record; without this, a loader that
// opens its files only in the workers, with new workers every epoch, would
// lose the node's cache at every epoch's end. Reads /proc (a few files).
cache::ProcessIdentity SegmentAnchor() noexcept;

// Whether a command line (/proc/<pid>/cmdline: arguments separated by NULs)
// is that of a process Python's multiprocessing started: a spawned child
// (`-c "from multiprocessing.spawn import spawn_main ..." --multiprocessing-fork`,
// or a frozen executable's `--multiprocessing-fork`) or a forkserver and the
// children it forks (`-c "... from multiprocessing.forkserver import main ..."`).
bool StartedByMultiprocessing(std::string_view cmdline) noexcept;

// The segment keeper executable installed beside this plugin (in its
// directory or the one above, for the wheel plugin's unbound/ library), or
// empty when there is none.
std::string KeeperExecutable();

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_RUNTIME_PROCESS_ANCHOR_H_
