// What the Python follower learns an index's rows from.
//
// Without a sample map, the follower (python/prescient) does not know which
// HDF5 rows a sample index stands for. While a DataLoader worker runs
// `dataset[index]`, it brackets the call with prescient_follow_begin() and
// prescient_follow_end() (the plugin's C entry points, follow_exports.cc), and
// every dataset read the thread makes in between is recorded here: the file,
// the dataset, its length and the rows read, in transfer order. The follower
// turns that into the index -> rows map it writes the schedule with.
//
// Recording is per thread, costs one thread-local load on every read when it
// is off, and is bounded (kMaxRows rows per bracket; beyond, the bracket is
// marked as overflowed and the follower learns nothing from it). HDF5-free.
#ifndef PRESCIENT_VOL_FOLLOW_READ_RECORDER_H_
#define PRESCIENT_VOL_FOLLOW_READ_RECORDER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "vol/read/selection.h"

namespace prescient::vol {

class ReadRecorder {
 public:
  static constexpr std::uint64_t kMaxRows = 1u << 16;

  // Starts recording on this thread (forgetting what the last bracket held).
  static void Begin() noexcept;
  // Stops recording and returns what was recorded: one line per read,
  //   <file>\t<dataset>\t<dataset rows>\t<first>+<count>[,<first>+<count>...]\n
  // and a line "overflow\n" when the bracket read more than kMaxRows rows.
  // The view stays valid until this thread's next Begin().
  static std::string_view End() noexcept;

  // A DataLoader worker whose first fetch imports h5py loads the connector in
  // that fetch, after the follower looked for it: the fetch cannot be
  // bracketed. The follower then names the worker in PRESCIENT_FOLLOW_RECORD
  // (Options::follow_record_pid) and this, called on every read with the pid
  // named (0: none), begins a bracket on the thread of the named process's
  // first read (the fetch's); the follower ends it after the fetch. Acts once
  // per process: one relaxed load on later reads.
  static void BeginAtFirstRead(long named_pid) noexcept;

  // True while this thread records (checked before any work on the read path).
  static bool Active() noexcept;
  // Records one read of `dataset` (opened by that path) in `file` whose
  // dimension 0 has `dataset_rows` rows.
  static void Note(std::string_view file, std::string_view dataset, std::uint64_t dataset_rows,
                   const RowSelection& rows) noexcept;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_FOLLOW_READ_RECORDER_H_
