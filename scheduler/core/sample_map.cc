#include "scheduler/core/sample_map.h"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace prescient::scheduler {

struct SampleMap::Tables {
  std::vector<MapFile> files;
  std::vector<MapField> fields;
  std::vector<std::uint64_t> first_sample;  // files.size() + 1 entries
  std::uint64_t uniform_samples = 0;        // > 0: every file but the last has this many samples
  bool has_field_files = false;
  bool has_groups = false;
  bool has_row_blocks = false;  // a file's rows_per_sample > 1
  std::uint64_t rows = 0;       // of every file
  // PlaceKey(path, group) -> file, for its own path and its field files'.
  std::unordered_map<std::string, std::uint32_t> by_place;
  std::unordered_set<std::string_view> paths;  // views into `files`
};

std::string_view BareDatasetName(std::string_view dataset) {
  const std::size_t first = dataset.find_first_not_of('/');
  return first == std::string_view::npos ? std::string_view() : dataset.substr(first);
}

namespace {

// A path and a group as one hash key ('\0' is in neither).
std::string PlaceKey(std::string_view path, std::string_view group) {
  std::string key;
  key.reserve(path.size() + 1 + group.size());
  key.append(path).push_back('\0');
  key.append(group);
  return key;
}

// "0003" and "train/0003" are groups; "", "/0003", "0003/" and "a//b" are not
// written so (the root is the empty group).
bool IsBareGroupName(std::string_view group) {
  return !group.empty() && group.front() != '/' && group.back() != '/' &&
         group.find("//") == std::string_view::npos && group.find('\0') == std::string_view::npos;
}

// A file's field files: each of a field of the map, once, not in the file's
// own path, and not all of them (the file's own path holds a field).
void CheckFieldFiles(const MapFile& f, std::size_t fields) {
  std::vector<bool> seen(fields, false);
  for (const FieldFile& ff : f.field_files) {
    const std::string where = "sample map: a field file of '" + f.path + "'";
    if (ff.field >= fields) {
      throw std::invalid_argument(where + " is of field " + std::to_string(ff.field) + " of " +
                                  std::to_string(fields));
    }
    if (ff.path.empty()) throw std::invalid_argument(where + " has no path");
    if (ff.path == f.path) {
      throw std::invalid_argument(where + " names the file itself: leave the field out");
    }
    if (seen[ff.field]) {
      throw std::invalid_argument(where + " repeats field " + std::to_string(ff.field));
    }
    seen[ff.field] = true;
  }
  if (fields > 0 && f.field_files.size() == fields) {
    throw std::invalid_argument("sample map: every field of '" + f.path +
                                "' is in another file (the file must hold one)");
  }
}

}  // namespace

SampleMap::SampleMap() : SampleMap({}, {}) {}

SampleMap::SampleMap(std::vector<MapFile> files, std::vector<MapField> fields) {
  auto t = std::make_shared<Tables>();
  if (files.size() > kMaxFiles) throw std::invalid_argument("sample map: too many files");
  if (!files.empty() && fields.empty()) {
    throw std::invalid_argument("sample map: files but no field (dataset) to read in them");
  }
  for (std::size_t i = 0; i < fields.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (BareDatasetName(fields[i].dataset) == BareDatasetName(fields[j].dataset)) {
        throw std::invalid_argument("sample map: dataset '" + fields[i].dataset +
                                    "' is listed twice");
      }
    }
  }
  t->files = std::move(files);
  t->fields = std::move(fields);
  t->first_sample.assign(t->files.size() + 1, 0);
  t->by_place.reserve(t->files.size());
  bool uniform = true;
  for (std::size_t i = 0; i < t->files.size(); ++i) {
    const MapFile& f = t->files[i];
    if (f.rows == 0) throw std::invalid_argument("sample map: file '" + f.path + "' has no rows");
    if (f.path.empty()) throw std::invalid_argument("sample map: a file has no path");
    if (f.rows_per_sample == 0 || f.rows % f.rows_per_sample != 0) {
      throw std::invalid_argument("sample map: file '" + f.path + "' has " +
                                  std::to_string(f.rows) + " rows, not samples of " +
                                  std::to_string(f.rows_per_sample) + " rows each");
    }
    if (f.rows_per_sample > 1) t->has_row_blocks = true;
    t->rows += f.rows;
    const std::uint64_t samples = f.rows / f.rows_per_sample;
    t->first_sample[i + 1] = t->first_sample[i] + samples;
    if (t->first_sample[i + 1] > 0xffffffffull) {
      throw std::invalid_argument("sample map: 2^32 or more samples (sample ids are 32-bit)");
    }
    const std::string in_group = f.group.empty() ? "" : " (group '" + f.group + "')";
    if (!f.group.empty()) {
      if (!IsBareGroupName(f.group)) {
        throw std::invalid_argument("sample map: file '" + f.path + "' has group '" + f.group +
                                    "': write it without leading or trailing '/'");
      }
      t->has_groups = true;
    }
    if (!t->by_place.emplace(PlaceKey(f.path, f.group), static_cast<std::uint32_t>(i)).second) {
      throw std::invalid_argument("sample map: file '" + f.path + "'" + in_group +
                                  " is listed twice");
    }
    t->paths.insert(f.path);
    CheckFieldFiles(f, t->fields.size());
    for (const FieldFile& ff : f.field_files) {
      t->has_field_files = true;
      const auto [at, fresh] =
          t->by_place.emplace(PlaceKey(ff.path, f.group), static_cast<std::uint32_t>(i));
      if (!fresh && at->second != i) {
        throw std::invalid_argument("sample map: file '" + ff.path + "'" + in_group +
                                    " is listed twice");
      }
      t->paths.insert(ff.path);
    }
    if (i + 1 < t->files.size() && f.rows != t->files[0].rows) uniform = false;
    if (f.rows_per_sample != t->files[0].rows_per_sample) uniform = false;
  }
  if (!t->files.empty() && uniform && t->files.back().rows <= t->files[0].rows) {
    t->uniform_samples = t->files[0].rows / t->files[0].rows_per_sample;
  }
  tables_ = std::move(t);
}

const std::vector<MapFile>& SampleMap::files() const { return tables_->files; }
const std::vector<MapField>& SampleMap::fields() const { return tables_->fields; }
std::uint64_t SampleMap::num_samples() const { return tables_->first_sample.back(); }
bool SampleMap::has_field_files() const { return tables_->has_field_files; }
bool SampleMap::has_groups() const { return tables_->has_groups; }
bool SampleMap::has_row_blocks() const { return tables_->has_row_blocks; }

std::uint64_t SampleMap::bytes_per_sample() const {
  std::uint64_t row = 0;
  for (const MapField& f : tables_->fields) row += f.row_bytes;
  return SampleBytes(row);
}

std::uint64_t SampleMap::SampleBytes(std::uint64_t row_bytes) const {
  const Tables& t = *tables_;
  if (!t.has_row_blocks || t.first_sample.back() == 0) return row_bytes;
  // row_bytes * rows is at most the bytes of the whole dataset.
  const std::uint64_t samples = t.first_sample.back();
  return (row_bytes * t.rows + samples - 1) / samples;
}

SampleLocation SampleMap::Locate(SampleId sample) const {
  const Tables& t = *tables_;
  if (sample >= t.first_sample.back()) {
    throw std::out_of_range("sample map: sample " + std::to_string(sample) +
                            " >= " + std::to_string(t.first_sample.back()) + " samples");
  }
  std::uint32_t file;
  if (t.uniform_samples > 0) {
    file = static_cast<std::uint32_t>(sample / t.uniform_samples);
  } else {
    const auto it = std::upper_bound(t.first_sample.begin(), t.first_sample.end(),
                                     static_cast<std::uint64_t>(sample));
    file = static_cast<std::uint32_t>(it - t.first_sample.begin() - 1);
  }
  const std::uint64_t rows = t.files[file].rows_per_sample;
  return {file, (sample - t.first_sample[file]) * rows, rows};
}

std::uint64_t SampleMap::FirstSample(std::uint32_t file) const {
  return tables_->first_sample.at(file);
}

std::uint64_t SampleMap::SampleOf(std::uint32_t file, std::uint64_t row) const {
  const Tables& t = *tables_;
  const std::uint64_t rows = t.files[file].rows_per_sample;
  return t.first_sample[file] + (rows == 1 ? row : row / rows);
}

std::optional<std::uint32_t> SampleMap::FileIndex(std::string_view absolute_path,
                                                  std::string_view group) const {
  const auto it = tables_->by_place.find(PlaceKey(absolute_path, group));
  if (it == tables_->by_place.end()) return std::nullopt;
  return it->second;
}

bool SampleMap::HasPath(std::string_view absolute_path) const {
  return tables_->paths.contains(absolute_path);
}

std::optional<MapSlot> SampleMap::Find(std::string_view absolute_path,
                                       std::string_view dataset) const {
  const std::string_view name = BareDatasetName(dataset);
  // The root first, then each ancestor group of the dataset, nearest the
  // root first ("a/b/c": field "a/b/c" of the root, "b/c" of "a", "c" of "a/b").
  std::size_t split = 0;
  for (std::string_view group;;) {
    if (const std::optional<std::uint32_t> file = FileIndex(absolute_path, group)) {
      if (const std::optional<std::uint32_t> field = FieldIndex(name.substr(split))) {
        return MapSlot{*file, *field};
      }
    }
    if (!tables_->has_groups) return std::nullopt;
    const std::size_t slash = name.find('/', split);
    if (slash == std::string_view::npos) return std::nullopt;
    group = name.substr(0, slash);
    split = slash + 1;
  }
}

FieldPlace SampleMap::PlaceOf(std::uint32_t file, std::uint32_t field) const {
  const MapFile& f = tables_->files.at(file);
  for (const FieldFile& ff : f.field_files) {
    if (ff.field == field) return {ff.path, ff.size, ff.mtime_ns};
  }
  return {f.path, f.size, f.mtime_ns};
}

std::string SampleMap::DatasetOf(std::uint32_t file, std::uint32_t field) const {
  const std::string& group = tables_->files.at(file).group;
  const std::string& dataset = tables_->fields.at(field).dataset;
  if (group.empty()) return dataset;  // as the map names it
  const std::string_view name = BareDatasetName(dataset);
  std::string full;
  full.reserve(group.size() + 1 + name.size());
  full.append(group).push_back('/');
  full.append(name);
  return full;
}

std::vector<std::string_view> SampleMap::PathsOf(std::uint32_t file) const {
  const MapFile& f = tables_->files.at(file);
  std::vector<std::string_view> paths{f.path};
  for (const FieldFile& ff : f.field_files) {
    if (std::find(paths.begin(), paths.end(), std::string_view(ff.path)) == paths.end()) {
      paths.emplace_back(ff.path);
    }
  }
  return paths;
}

std::optional<std::uint32_t> SampleMap::FieldIndex(std::string_view dataset) const {
  const std::vector<MapField>& fields = tables_->fields;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (BareDatasetName(fields[i].dataset) == BareDatasetName(dataset)) {
      return static_cast<std::uint32_t>(i);
    }
  }
  return std::nullopt;
}

std::string SampleMap::Mismatch(std::uint32_t file, std::uint32_t field, std::uint64_t rows,
                                std::uint64_t row_bytes, std::uint64_t size,
                                std::int64_t mtime_ns) const {
  const Tables& t = *tables_;
  if (file >= t.files.size() || field >= t.fields.size()) return "not in the schedule's map";
  const MapFile& f = t.files[file];
  const MapField& d = t.fields[field];
  const FieldPlace place = PlaceOf(file, field);
  const std::string path(place.path);
  const std::string where = "dataset '" + DatasetOf(file, field) + "' of '" + path + "'";
  if (place.size != size || place.mtime_ns != mtime_ns) {
    return "'" + path + "' changed since the schedule was made (size or modification time differ)";
  }
  if (f.rows != rows) {
    return where + " has " + std::to_string(rows) + " rows, the schedule " + std::to_string(f.rows);
  }
  if (d.row_bytes != 0 && d.row_bytes != row_bytes) {
    return where + " has rows of " + std::to_string(row_bytes) + " bytes, the schedule " +
           std::to_string(d.row_bytes);
  }
  return {};
}

bool SampleMap::operator==(const SampleMap& other) const {
  return tables_ == other.tables_ ||
         (tables_->files == other.tables_->files && tables_->fields == other.tables_->fields);
}

}  // namespace prescient::scheduler
