// Which files hold one small dataset per sample, as a followed process sees
// them open (CacheClient::TooSmallToCache asks).
//
// Without a schedule, a small contiguous dataset is never cached: a hit would
// save no storage read. The follower is different: it learns which rows each
// sample index reads and prefetches them by the order it publishes, and a few
// small fields per file are worth that (labels beside the samples, the `x` and
// `y` of a file per sample: its prefetch brings the whole small file in). One
// dataset per sample (a group per sample, each with its own `data` and
// `label`) is what no learned map describes: caching those datasets costs
// every open for nothing. A file is taken for such a layout once more than
// kManyPerFile distinct small datasets of it were opened.
//
// A value type; its owner locks it.
#ifndef PRESCIENT_VOL_SERVE_SMALL_DATASET_CENSUS_H_
#define PRESCIENT_VOL_SERVE_SMALL_DATASET_CENSUS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace prescient::vol {

class SmallDatasetCensus {
 public:
  // More distinct small datasets than any learned map has fields in a file.
  static constexpr std::size_t kManyPerFile = 32;
  // Files tallied before the ones not found to hold many are forgotten (a
  // job of one small file per sample opens hundreds of thousands).
  static constexpr std::size_t kFilesKept = 4096;

  // The file as it is on disk: a file rewritten in place is another one.
  using FileKey = std::tuple<std::uint64_t /*device*/, std::uint64_t /*inode*/,
                             std::uint64_t /*size*/, std::int64_t /*mtime_ns*/>;

  // Notes a small contiguous dataset of `file` whose data starts at `address`
  // (which names it in its file, however often it is opened). True once the
  // file has had more than kManyPerFile distinct ones, for every dataset of it
  // from then on.
  bool NoteAndCheckMany(const FileKey& file, std::uint64_t address);

  std::size_t files_tallied() const { return files_.size(); }

 private:
  struct Tally {
    std::vector<std::uint64_t> addresses;  // distinct; dropped once many
    bool many = false;
  };
  std::map<FileKey, Tally> files_;
};

}  // namespace prescient::vol

#endif  // PRESCIENT_VOL_SERVE_SMALL_DATASET_CENSUS_H_
