// The files a virtual dataset's rows come from, watched so that its rows can
// be cached.
//
// A virtual dataset (VDS) keeps no rows: HDF5 reads them from source datasets
// in other files, found by name when the rows are first read. The identity of
// the file that names the VDS, which every dataset key includes, says nothing
// of those files. So a VDS is cached only under a key that also holds the
// identity of every file found where HDF5 may take each source file from, in
// the order it tries them (H5F_prefix_open_file in HDF5 1.14): the name if absolute,
// HDF5_VDS_PREFIX's directories, the access property list's prefix, the
// directory of the file that names the VDS (as opened and as resolved), and the
// name relative to the working directory. Another process that finds any of
// them different (a source moved, rewritten, replaced, or a file appearing
// earlier in the search) computes another key; this process re-checks them at
// the change-check interval, as it does the naming file.
//
// Never cached (Find says why): a VDS whose source names are printf-style
// patterns or whose extent is unlimited (its sources decide its shape), one
// with a source file found nowhere (HDF5 reads fill values and looks again at
// every read), and one whose sources changed while the naming file was open in
// this process: HDF5 opens a source once, at the first read of any handle to
// the VDS, and keeps it open, so a source replaced after that would be keyed by
// the new file while HDF5 reads the old one.
#ifndef PRESCIENT_VOL_SERVE_VIRTUAL_SOURCES_H_
#define PRESCIENT_VOL_SERVE_VIRTUAL_SOURCES_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/io/status.h"
#include "vol/hdf5_compat.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/file_state.h"

namespace prescient::vol {

// Where HDF5 may look for a source file named `source_name` by a VDS in the
// file opened as `vds_name`, in HDF5's order; duplicates removed. `cwd` is the
// working directory, `vds_real_dir` the directory of the naming file with
// symbolic links resolved ("" when unknown), `env_prefix` HDF5_VDS_PREFIX (or
// null), `dapl_prefix` the access property list's prefix ("" when none).
// Pure: unit-tested without HDF5 or a file system.
std::vector<std::string> SourceCandidates(const std::string& source_name,
                                          const std::string& vds_name, const std::string& cwd,
                                          const std::string& vds_real_dir, const char* env_prefix,
                                          const std::string& dapl_prefix);

class VirtualSources {
 public:
  // Reads the VDS's mappings (on the caller's thread, inside an HDF5 call)
  // and takes the identity of every candidate of every source file.
  // Unsupported when the VDS must not be cached (see above).
  static cache::io::Result<VirtualSources> Find(const DatasetQueries& dataset, hid_t dcpl,
                                                const FileState& file);

  VirtualSources(VirtualSources&&) noexcept = default;
  VirtualSources& operator=(VirtualSources&&) = delete;

  // Over the identities of the files found among the candidates, in order
  // (the paths, and places where nothing is, left out: a file appearing there
  // is a change FirstChanged and ChangedForRows see, and a new key for the
  // processes that look after it).
  std::array<std::uint64_t, 2> fingerprint() const { return fingerprint_; }
  std::size_t candidates() const { return candidates_.size(); }

  // HDF5 looks a source file up again when a handle to the VDS is opened with
  // no other open (and keeps what it found while one is): before rows
  // [first_row, last_row] are served through the open numbered `open_serial`
  // (DatasetState::open_serial), the sources of the mappings holding them
  // are looked at, each once per open. The first that changed, or nullopt.
  // A file per sample opened and read once costs the stats of its mapping's
  // source only. Thread-safe.
  std::optional<std::string> ChangedForRows(std::uint64_t open_serial, std::uint64_t first_row,
                                            std::uint64_t last_row) const noexcept;
  // Re-takes the identities of up to kCheckedPerCall candidates, in turn (a
  // VDS of thousands of files costs no more per check than a few hundred
  // stats), for a handle kept open: the first that changed, or nullopt. One
  // caller at a time.
  std::optional<std::string> FirstChanged() const noexcept;

  static constexpr std::size_t kCheckedPerCall = 256;

  // The file HDF5 opens for the source file a mapping names (as
  // H5Pget_virtual_filename gives it; not "."): the first of its candidates
  // that existed when they were taken, with the identity it had then.
  // Nullopt for a name no mapping gave.
  struct Located {
    std::string path;
    FileIdentity identity;
  };
  std::optional<Located> Where(const std::string& source_name) const;

 private:
  VirtualSources() = default;
  struct Candidate {
    std::string path;
    FileIdentity identity;  // invalid: nothing there (or not a regular file)
  };
  // Rows [first_row, last_row] come from source file `source` (a bounding
  // range: a strided mapping's may interleave with others').
  struct Mapping {
    std::uint64_t first_row = 0;
    std::uint64_t last_row = 0;
    std::uint32_t source = 0;
  };
  std::optional<std::string> SourceChanged(std::uint32_t source) const noexcept;

  // The source file names, by source number.
  std::vector<std::string> names_;
  // Every source file's candidates in turn: source s has
  // candidates_[source_begin_[s], source_begin_[s + 1]).
  std::vector<Candidate> candidates_;
  std::vector<std::uint32_t> source_begin_;
  // By first_row; mappings whose source is the naming file left out.
  std::vector<Mapping> mappings_;
  // The largest last_row of mappings_[0..i]: a search for the mappings of
  // some rows stops where no earlier mapping reaches them.
  std::vector<std::uint64_t> reach_;
  // Per source file: the open it was last found unchanged for (0: none).
  std::unique_ptr<std::atomic<std::uint64_t>[]> checked_for_open_;
  std::array<std::uint64_t, 2> fingerprint_{};
  std::unique_ptr<std::atomic<std::size_t>> next_check_ =
      std::make_unique<std::atomic<std::size_t>>(0);
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_VIRTUAL_SOURCES_H_
