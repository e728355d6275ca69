// The sample map of a schedule: which HDF5 rows a sample id stands for.
//
// A dataset for training is an ordered list of files, each holding the same
// fields (HDF5 datasets: images, labels, records_0..k, ...) with one row per
// sample. Samples are numbered over the files in order, then rows:
//
//   sample = FirstSample(file) + row
//
// so a sample is the same row of every field of its file, and all fields of
// a sample share its next use. A "file" of the map may be a group of files: a
// field kept in a file of its own (PatchCamelyon's images in one file and
// its labels in another) is listed among the file's field_files, with the
// same rows. One file with one field is the classic
// single-dataset schedule; a map with no files describes abstract samples (a
// schedule made without --dataset) and may still carry row sizes.
//
// A "file" of the map may also be a group inside an HDF5 file: datasets that
// keep one sample's data each in a group of their own (PDEBench's
// "0000/data", "0001/data", ... in one file) are a map of one entry per
// (path, group), its fields named relative to the group, its rows the rows of
// that group's datasets. The same path then appears once per group. When
// each index reads its group whole, the group is one sample of all its rows
// (MapFile::rows_per_sample == rows): a sample then stands for a block of
// rows, and
//
//   sample = FirstSample(file) + row / rows_per_sample
//
// The connector binds what it opens to the map:
//
//   const SampleMap& map = reader.header().map;
//   std::optional<MapSlot> slot = map.Find(realpath_of_opened_file, dataset_name);
//   // "/images" == "images"; "/0003/data" is field "data" of group "0003"
//   // the field must live in the opened file: map.PlaceOf(slot->file, slot->field).path
//   std::string why = map.Mismatch(slot->file, slot->field, rows, row_bytes, st_size, mtime_ns);
//   if (why.empty()) sample = map.SampleOf(slot->file, row);
//
// A value type: copies share the (immutable) tables.
#ifndef PRESCIENT_SCHEDULER_CORE_SAMPLE_MAP_H_
#define PRESCIENT_SCHEDULER_CORE_SAMPLE_MAP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/core/access_schedule.h"

namespace prescient::scheduler {

// A field of a MapFile kept in a file of its own (format version 3).
struct FieldFile {
  std::uint32_t field = 0;    // index into SampleMap::fields()
  std::string path;           // absolute, symbolic links resolved
  std::uint64_t size = 0;     // st_size
  std::int64_t mtime_ns = 0;  // st_mtim, nanoseconds since the epoch

  bool operator==(const FieldFile&) const = default;
};

// One file of the map, as it was when the schedule was made.
struct MapFile {
  std::string path;           // absolute, symbolic links resolved (realpath); a
                              // version-1 file's path is as the user gave it
  std::uint64_t rows = 0;     // rows of every field in this file (samples it holds)
  std::uint64_t size = 0;     // st_size
  std::int64_t mtime_ns = 0;  // st_mtim, nanoseconds since the epoch
  // The fields kept elsewhere, each with `rows` rows; every field not listed
  // here is in `path`, and at least one is.
  std::vector<FieldFile> field_files = {};
  // The group the fields are in, without leading or trailing '/' ("" = the
  // root; format version 4 otherwise): field "data" of group "0003" is the
  // dataset "0003/data" (of the field file too, for a field kept elsewhere).
  std::string group = {};
  // Consecutive rows that make one sample (format version 5 otherwise): a
  // group read whole by its index has rows_per_sample == rows, so its index
  // is one sample of the schedule, not one per row. Divides `rows`.
  std::uint64_t rows_per_sample = 1;

  bool operator==(const MapFile&) const = default;
};

// Where one field of one file of the map lives.
struct FieldPlace {
  std::string_view path;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
};

// One field: a dataset read for every sample, present in every file.
struct MapField {
  std::string dataset;          // path inside each file; a leading '/' is not significant
  std::uint64_t row_bytes = 0;  // bytes of one row (0 = unknown)

  bool operator==(const MapField&) const = default;
};

// A dataset's place in the map: which of its files (or groups) and fields.
struct MapSlot {
  std::uint32_t file = 0;
  std::uint32_t field = 0;
  bool operator==(const MapSlot&) const = default;
};

struct SampleLocation {
  std::uint32_t file = 0;
  std::uint64_t row = 0;   // the sample's first row
  std::uint64_t rows = 1;  // and how many it has (its file's rows_per_sample)
  bool operator==(const SampleLocation&) const = default;
};

class SampleMap {
 public:
  // Most files a map may hold (file indices are 32-bit; the header caps
  // strings per string, so only the file size limits the header).
  static constexpr std::uint64_t kMaxFiles = 0xffffffffull;

  SampleMap();  // no files, no fields
  // Throws std::invalid_argument: a file with no rows or no path, the same
  // path and group in two files of the map, a group that is not a bare
  // '/'-separated name, two fields of the same dataset, files
  // without fields, a field file of no field, of a field listed twice or in
  // the file's own path, a file whose every field is elsewhere, or 2^32
  // samples or more (sample ids are 32-bit).
  SampleMap(std::vector<MapFile> files, std::vector<MapField> fields);

  const std::vector<MapFile>& files() const;
  const std::vector<MapField>& fields() const;
  bool has_files() const { return !files().empty(); }
  // Whether any field is kept in a file of its own (format version 3).
  bool has_field_files() const;
  // Whether any file of the map is a group (format version 4).
  bool has_groups() const;
  // Whether any file's sample is more than one row (format version 5).
  bool has_row_blocks() const;

  // Sum of the files' samples, rows / rows_per_sample each (0 without files).
  std::uint64_t num_samples() const;
  // The bytes a sample occupies: the sum of the fields' known row sizes,
  // times the rows of a sample (their mean over the map's samples, rounded
  // up, when files differ in rows per sample).
  std::uint64_t bytes_per_sample() const;
  // The bytes of a sample whose row (over every field) has `row_bytes`.
  std::uint64_t SampleBytes(std::uint64_t row_bytes) const;

  // The file and rows of `sample`: O(1) when every file but the last has the
  // same number of samples, else a binary search. Throws std::out_of_range
  // when sample >= num_samples().
  SampleLocation Locate(SampleId sample) const;
  // The first sample of `file` (REQUIRES file <= files().size(); the value
  // for files().size() is num_samples()).
  std::uint64_t FirstSample(std::uint32_t file) const;
  // The sample row `row` of `file` belongs to (REQUIRES file < files().size()).
  std::uint64_t SampleOf(std::uint32_t file, std::uint64_t row) const;
  // The file with this absolute path and group, as its own path or one of
  // its field files (compared byte for byte: resolve the opened file's path
  // with realpath() first). A hash lookup.
  std::optional<std::uint32_t> FileIndex(std::string_view absolute_path,
                                         std::string_view group = {}) const;
  // Whether any file of the map (or field file) has this absolute path.
  bool HasPath(std::string_view absolute_path) const;
  // The file and field that dataset `dataset` of the HDF5 file at
  // `absolute_path` is: the file of that path whose group is the dataset's
  // parent (or an ancestor) and the field named by the rest of the name.
  // Does not check where the field lives (PlaceOf) or its shape (Mismatch).
  std::optional<MapSlot> Find(std::string_view absolute_path, std::string_view dataset) const;
  // Where `field` of `file` lives (REQUIRES both in range).
  FieldPlace PlaceOf(std::uint32_t file, std::uint32_t field) const;
  // The dataset's full name inside PlaceOf(file, field).path: the field's
  // name under the file's group (REQUIRES both in range).
  std::string DatasetOf(std::uint32_t file, std::uint32_t field) const;
  // Every path of `file`: its own first, then its field files' (once each).
  std::vector<std::string_view> PathsOf(std::uint32_t file) const;
  // The field of this dataset ("/images" and "images" are the same).
  std::optional<std::uint32_t> FieldIndex(std::string_view dataset) const;

  // "" when the dataset `field` of `file`, as the caller sees it now (rows
  // along dimension 0, bytes per row, the st_size and st_mtim of the file
  // the field lives in, PlaceOf), is what the map describes; otherwise why
  // not, naming the file. A row size of 0 in the map is not compared.
  std::string Mismatch(std::uint32_t file, std::uint32_t field, std::uint64_t rows,
                       std::uint64_t row_bytes, std::uint64_t size, std::int64_t mtime_ns) const;

  bool operator==(const SampleMap& other) const;

 private:
  struct Tables;
  std::shared_ptr<const Tables> tables_;
};

// "/images" -> "images": the form in which dataset names are compared.
std::string_view BareDatasetName(std::string_view dataset);

}  // namespace prescient::scheduler

#endif  // PRESCIENT_SCHEDULER_CORE_SAMPLE_MAP_H_
