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

// How a dataset's rows are stored, as far as Prescient reads them itself.
struct StoredRows {
  // Rows per chunk along dimension 0 for a chunked dataset, 0 otherwise (also
  // when the connector underneath cannot say). Keeps misses chunk-aligned
  // when rows load through HDF5.
  std::uint64_t chunk_rows = 0;
  // Unsupported (load through HDF5 instead) for: a connector underneath that
  // is not the native one, a file not opened with the POSIX driver, compact,
  // virtual or external storage, unallocated contiguous data, filters other
  // than deflate and shuffle.
  cache::io::Result<cache::io::RawLayout> layout;
  // The bytes live in other files (a virtual dataset's sources, external
  // storage), or where they live could not be told. The file's identity, which every dataset key
  // includes, says nothing of those files: a source moved, rewritten or removed would leave cached
  // rows looking current. Such a dataset is never cached.
  bool bytes_elsewhere = false;
};

// Never throws; leaves the HDF5 error stack as it was.
StoredRows ReadStoredRows(const DatasetQueries& dataset, const FileState* file,
                          const DatasetState& state) noexcept;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_RAW_LAYOUT_HDF5_H_
