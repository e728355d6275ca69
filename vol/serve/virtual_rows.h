// Reading a virtual dataset's rows straight from its source files.
//
// HDF5 reads a row of a virtual dataset (VDS) by opening its source file and
// dataset and reading there: for a VDS opened per sample, about 200 us of CPU
// a read, most of it the source file's open. When every mapping takes whole
// rows from a source of the VDS's type and row shape, and no row is given
// twice, the VDS can be read as one dataset of the loader's (rows no mapping
// gives read as its fill value: a run of that value, cache/io/pattern_source.h,
// or chunks never written):
// - sources all contiguous: each run of rows is one byte range of one source
//   file; spliced in row order (cache/io/spliced_source.h), the VDS reads as
//   a contiguous dataset at offset 0, and a miss is a pread, as for any
//   contiguous dataset (prefetch, coalescing and read-around included);
// - sources all chunked alike (one chunk shape, filter pipeline and fill
//   value), each mapping taking whole chunks' rows: the source files are
//   spliced whole, one after another, and the VDS reads as a chunked dataset
//   whose chunks are the sources' at their offsets in that splice (compressed
//   chunks decoded once by the loader, like any chunked dataset's).
//
// The sources' addresses are asked of HDF5 here, on the caller's thread: each
// source file is opened once, with the native connector and the stdio driver
// (HDF5 shares an open file only between opens of one driver, so this never
// joins HDF5's own open of the source, nor the application's), and closed
// before returning. The file opened, and the file the path names then, are
// checked to be the versions VirtualSources keyed the dataset by, and the
// descriptors that read the rows (the process's pool, file_handles.h) are
// opened only on a file of the same device and inode: rows are never read
// from a file the key does not name. Later changes are VirtualSources' to
// see, as for rows loaded through HDF5.
#ifndef PRESCIENT_VOL_SERVE_VIRTUAL_ROWS_H_
#define PRESCIENT_VOL_SERVE_VIRTUAL_ROWS_H_

#include <memory>

#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout.h"
#include "cache/io/status.h"
#include "vol/hdf5_compat.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/serve/virtual_sources.h"

namespace prescient::vol {

// More source files than this are loaded through HDF5: preparing the VDS
// opens each one through HDF5, and the descriptors that read them raw come
// from the process's pool (file_handles.h, 256 at most), which more would
// keep reopening.
inline constexpr std::size_t kMaxRawVirtualSourceFiles = 256;

// Where a VDS's rows are: `layout`'s offsets point into `source`.
struct VirtualRows {
  cache::io::RawLayout layout;
  std::shared_ptr<const cache::io::RandomAccessSource> source;
};

// The VDS's rows as one dataset of the loader's; Unsupported, saying why,
// when they cannot be read raw (rows load through HDF5 then). `dcpl` is the
// VDS's creation property list, `file` the file naming it (opened with the
// POSIX driver: HDF5 opens the sources with its driver).
cache::io::Result<VirtualRows> ReadVirtualRows(hid_t dcpl, const DatasetState& state,
                                               const FileState& file,
                                               const VirtualSources& sources);

// True when HDF5 may read some of the VDS as nothing, leaving the reader's
// buffer as it was there (no bytes a cache could hold): the VDS has no fill
// value, or a source dataset not wholly written has none to give either
// (chunked_layout_hdf5.h, UnwrittenDataReadsAsNothing). Also true when it
// cannot tell. Opens every source file, as ReadVirtualRows does.
bool VirtualMayReadAsNothing(hid_t dcpl, const FileState& file, const VirtualSources& sources);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_VIRTUAL_ROWS_H_
