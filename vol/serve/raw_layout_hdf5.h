// Reading a dataset's raw layout out of HDF5, on the caller's thread, so that
// I/O threads can later pread and decode its rows without calling HDF5.
//
// Contiguous datasets give their data address (H5Dget_offset); chunked ones
// their chunk index (H5Dchunk_iter: element offsets, addresses including the
// user block, as of HDF5 1.14.4), chunk shape, filter pipeline and fill value.
// Asked through DatasetQueries: the connector underneath's native optional
// operations inside a callback, the public API elsewhere; only the native
// connector answers.
#ifndef PRESCIENT_VOL_SERVE_RAW_LAYOUT_HDF5_H_
#define PRESCIENT_VOL_SERVE_RAW_LAYOUT_HDF5_H_

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"

namespace prescient::vol {

// Unsupported (load through HDF5 instead) for: a connector underneath that is
// not the native one, a file not opened with the POSIX driver, compact,
// virtual or external storage, unallocated contiguous data, filters other than
// deflate and shuffle. Never throws; leaves the HDF5 error stack as it was.
cache::io::Result<cache::io::RawLayout> ExtractRawLayout(const DatasetQueries& dataset,
                                                         const FileState* file,
                                                         const DatasetState& state) noexcept;

// Rows per chunk along dimension 0 for a chunked dataset, 0 otherwise (also
// when the connector underneath cannot say). Used to keep misses
// chunk-aligned when rows load through HDF5.
std::uint64_t ChunkRows(const DatasetQueries& dataset) noexcept;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_RAW_LAYOUT_HDF5_H_
