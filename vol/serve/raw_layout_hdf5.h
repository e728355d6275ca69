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

#include <memory>
#include <string>

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/object.h"
#include "vol/runtime/options.h"
#include "vol/serve/virtual_sources.h"

namespace prescient::vol {

// How a dataset's rows are stored, as far as Prescient reads them itself.
struct StoredRows {
  // Rows per chunk along dimension 0 for a chunked dataset, 0 otherwise (also
  // when the connector underneath cannot say). Keeps misses chunk-aligned
  // when rows load through HDF5.
  std::uint64_t chunk_rows = 0;
  // Unsupported (load through HDF5 instead) for: a connector underneath that
  // is not the native one, a file not opened with the POSIX driver, compact
  // or external storage, a virtual dataset whose sources cannot be read raw
  // (ReadVirtualRows), unallocated contiguous data, filters other than
  // deflate, shuffle and bitshuffle (cache/io/bitshuffle.h).
  cache::io::Result<cache::io::RawLayout> layout;
  // The bytes live in other files that cannot be watched (external storage,
  // a virtual dataset VirtualSources turns down), or where they live could
  // not be told. The file's identity, which every dataset key includes, says
  // nothing of those files: a source moved, rewritten or removed would leave
  // cached rows looking current. Such a dataset is never cached;
  // `elsewhere_reason` says why.
  bool bytes_elsewhere = false;
  std::string elsewhere_reason;
  // A virtual dataset's source files, whose identities its key must include.
  // Null for every other layout.
  std::shared_ptr<const VirtualSources> sources;
  // Where `layout`'s offsets point when not into the dataset's own file: a
  // virtual dataset's sources spliced (virtual_rows.h). Null: the file
  // itself.
  std::shared_ptr<const cache::io::RandomAccessSource> source;
};

// Never throws; leaves the HDF5 error stack as it was.
// `cache_virtual` (Options::cache_virtual): which virtual datasets are watched
// and cached rather than turned down.
StoredRows ReadStoredRows(const DatasetQueries& dataset, const FileState* file,
                          const DatasetState& state, VirtualCaching cache_virtual) noexcept;

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_RAW_LAYOUT_HDF5_H_
