// A chunked dataset's raw layout read out of HDF5: chunk shape, filter
// pipeline and fill value from its creation property list, and where each
// allocated chunk is from its chunk index (H5Dchunk_iter: element offsets,
// addresses including the user block, as of HDF5 1.14.4).
//
// Used for the datasets the application opens (raw_layout_hdf5.h) and for the
// chunked sources of a virtual dataset (virtual_rows.h). Caller's thread only.
#ifndef PRESCIENT_VOL_SERVE_CHUNKED_LAYOUT_HDF5_H_
#define PRESCIENT_VOL_SERVE_CHUNKED_LAYOUT_HDF5_H_

#include <span>
#include <string>

#include "cache/io/raw_layout.h"
#include "cache/io/status.h"
#include "vol/hdf5_compat.h"
#include "vol/objects/dataset_queries.h"

namespace prescient::vol {

// True when HDF5 leaves a reader's buffer as it was where the dataset was
// never written (fill time "never", or no fill value defined), instead of
// writing the fill value there: such parts have no bytes a cache could hold.
bool UnwrittenDataReadsAsNothing(hid_t dcpl);

// The layout of `dataset`, whose creation property list is `dcpl` (chunked),
// extent `dims` and stored type `type`. Unsupported, saying why, when the
// chunk shape, filters or fill value cannot be read, a filter is not one the
// loader undoes (cache/io/filter_codecs.h) or not one HDF5 can apply in this
// process (no plugin: the native read fails, and so must the application's),
// or chunks never written would be read as nothing
// (UnwrittenDataReadsAsNothing). `path` is informational.
cache::io::Result<cache::io::ChunkedLayout> ReadChunkedLayout(const DatasetQueries& dataset,
                                                              hid_t dcpl, std::string path,
                                                              std::span<const hsize_t> dims,
                                                              hid_t type);

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_CHUNKED_LAYOUT_HDF5_H_
