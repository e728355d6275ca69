// The sample-map flags shared by `generate` and `import`: which files and
// datasets the sample ids stand for.
//
//   --dataset FILE_OR_GLOB:NAME   a field (repeat for more fields, in order);
//                                 a field in files of its own names as many
//                                 files as the first, paired in sorted order
//   --rows N                      rows of the single file (default: --samples)
//   --rows-per-file K             every file K rows, the last possibly fewer
//   --files-from LIST             lines 'PATH ROWS' in sample order (then
//                                 --dataset gives only NAME)
//   --row-bytes B                 once for all fields, or once per --dataset
//
// A glob's files are taken in byte-wise order of their absolute paths (what
// sorted(glob.glob(pattern)) gives); each file is stored by its resolved
// absolute path (realpath) with its size and mtime. Stays HDF5-free: the
// connector checks each opened dataset's rows against the map.
#ifndef PRESCIENT_SCHEDULER_TOOL_MAP_FLAGS_H_
#define PRESCIENT_SCHEDULER_TOOL_MAP_FLAGS_H_

#include <cstdint>
#include <optional>

#include "scheduler/core/sample_map.h"
#include "scheduler/tool/flags.h"

namespace prescient::scheduler::tool {

// The flag names, for the commands' Flags sets.
inline constexpr const char* kMapValuedFlags[] = {"rows", "rows-per-file", "files-from"};
inline constexpr const char* kMapRepeatedFlags[] = {"dataset", "row-bytes"};

// The map the flags describe and the number of samples it implies (nullopt
// without files: abstract samples, counted by --samples). `samples` is
// --samples if given (checked against the map). Throws UsageError naming the
// flag and the file.
struct MapFromFlags {
  SampleMap map;
  std::optional<std::uint64_t> samples;
};
MapFromFlags SampleMapFromFlags(const Flags& flags, std::optional<std::uint64_t> samples);

// The usage text of the flags above.
extern const char* const kMapFlagsUsage;

}  // namespace prescient::scheduler::tool

#endif  // PRESCIENT_SCHEDULER_TOOL_MAP_FLAGS_H_
