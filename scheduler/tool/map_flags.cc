#include "scheduler/tool/map_flags.h"

#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace prescient::scheduler::tool {

const char* const kMapFlagsUsage =
    R"(Sample map (which HDF5 rows the sample ids stand for; see scheduler/README.md):
  --dataset FILE_OR_GLOB:NAME
                         a field: dataset NAME in FILE, or in every file the glob
                         matches (quote it); repeat for more fields (images, labels,
                         records_0..k), in order. A glob's files are taken in
                         byte-wise order of their absolute paths (= Python's
                         sorted(glob.glob(pattern))); for another order use
                         --files-from. A field kept in files of its own (labels in
                         a file beside the images') names as many files as the first
                         --dataset: its k-th file holds the same rows as the first
                         field's k-th file
  --rows N               rows of the single file (default: --samples)
  --rows-per-file K      every file holds K rows, the last one possibly fewer
                         (--samples says how many in all; default: files x K)
  --files-from LIST      the files in sample order, one 'PATH ROWS' line each ('#'
                         comments and blank lines skipped; relative paths are
                         relative to the current directory); --dataset then gives
                         only the dataset NAME, and every field is in the listed files
  --row-bytes B          bytes per row: once for all fields, or once per --dataset
                         in the same order (default 0 = unknown); without --dataset,
                         the size of an abstract sample (for simulate)
)";

namespace {

struct FieldSpec {
  std::string flag;     // the --dataset value, for messages
  std::string pattern;  // file or glob ("" with --files-from)
  std::string name;
};

bool HasGlobChars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string Absolute(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

std::string Resolved(const std::string& path, const std::string& flag) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    throw UsageError(flag + ": cannot resolve '" + path + "': " + std::strerror(errno));
  }
  return buf;
}

// The files of one pattern, byte-wise sorted by absolute path, resolved.
std::vector<std::string> ExpandPattern(const FieldSpec& field) {
  std::vector<std::string> matches;
  if (!HasGlobChars(field.pattern)) {
    matches.push_back(field.pattern);
  } else {
    glob_t g{};
    const int rc = ::glob(field.pattern.c_str(), GLOB_NOSORT | GLOB_ERR, nullptr, &g);
    std::unique_ptr<glob_t, void (*)(glob_t*)> free_glob(&g, ::globfree);
    if (rc == GLOB_NOMATCH || rc == GLOB_ABORTED) {
      throw UsageError("--dataset '" + field.flag + "': no file matches '" + field.pattern + "'" +
                       (rc == GLOB_ABORTED ? " (a directory on the way cannot be read)" : ""));
    }
    if (rc != 0) {
      throw UsageError("--dataset '" + field.flag + "': cannot expand '" + field.pattern + "'");
    }
    for (std::size_t i = 0; i < g.gl_pathc; ++i) matches.emplace_back(g.gl_pathv[i]);
  }
  std::vector<std::pair<std::string, std::string>> keyed;  // (absolute, as matched)
  for (std::string& m : matches) keyed.emplace_back(Absolute(m), std::move(m));
  // std::string compares as unsigned bytes: the order of Python's sorted() on
  // str for UTF-8 names.
  std::sort(keyed.begin(), keyed.end());
  std::vector<std::string> out;
  for (const auto& [absolute, as_matched] : keyed) {
    out.push_back(Resolved(as_matched, "--dataset '" + field.flag + "'"));
  }
  return out;
}

MapFile Stat(const std::string& path, std::uint64_t rows, const std::string& flag) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) {
    throw UsageError(flag + ": cannot stat '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw UsageError(flag + ": '" + path + "' is not a regular file");
  return {path, rows, static_cast<std::uint64_t>(st.st_size),
          static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// --files-from: (resolved path, rows) per line.
std::vector<std::pair<std::string, std::uint64_t>> ReadFileList(const std::string& list) {
  std::ifstream in(list);
  if (!in) throw UsageError("--files-from: cannot read '" + list + "'");
  std::vector<std::pair<std::string, std::uint64_t>> files;
  std::string line;
  for (std::uint64_t number = 1; std::getline(in, line); ++number) {
    const std::string where = "--files-from " + list + ":" + std::to_string(number);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const std::size_t space = line.find_last_of(" \t");
    if (space == std::string::npos || space < start) {
      throw UsageError(where + ": expected 'PATH ROWS', got '" + line + "'");
    }
    const std::uint64_t rows = ParseUnsigned(line.substr(space + 1), where + ": ROWS");
    std::string path = line.substr(start, space - start);
    while (!path.empty() && (path.back() == ' ' || path.back() == '\t')) path.pop_back();
    if (rows == 0) throw UsageError(where + ": '" + path + "' has 0 rows");
    files.emplace_back(Resolved(path, where), rows);
  }
  if (files.empty()) throw UsageError("--files-from: '" + list + "' lists no files");
  return files;
}

}  // namespace

MapFromFlags SampleMapFromFlags(const Flags& flags, std::optional<std::uint64_t> samples) {
  const std::vector<std::string> datasets = flags.GetAll("dataset");
  const std::optional<std::string> files_from = flags.Get("files-from");
  std::vector<std::uint64_t> row_bytes;
  for (const std::string& b : flags.GetAll("row-bytes")) {
    row_bytes.push_back(ParseUnsigned(b, "--row-bytes"));
  }

  if (datasets.empty()) {
    for (const char* flag : {"files-from", "rows-per-file"}) {
      if (flags.Has(flag)) throw UsageError(std::string("--") + flag + " needs --dataset");
    }
    if (row_bytes.size() > 1) throw UsageError("--row-bytes is given twice without --dataset");
    if (flags.Has("rows") && samples && flags.U64("rows", 0) != *samples) {
      throw UsageError("--rows " + *flags.Get("rows") + " differs from --samples " +
                       std::to_string(*samples));
    }
    MapFromFlags out;
    if (!row_bytes.empty() && row_bytes[0] != 0) out.map = SampleMap({}, {{"", row_bytes[0]}});
    out.samples = samples
                      ? samples
                      : (flags.Has("rows") ? std::optional(flags.U64("rows", 0)) : std::nullopt);
    return out;
  }

  // Fields.
  std::vector<FieldSpec> fields;
  for (const std::string& d : datasets) {
    FieldSpec f{d, "", d};
    if (files_from) {
      if (const std::size_t colon = d.rfind(':'); colon != std::string::npos) {
        if (colon != 0) {
          throw UsageError("--dataset '" + d + "': with --files-from give only the dataset NAME");
        }
        f.name = d.substr(1);
      }
    } else {
      const std::size_t colon = d.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == d.size()) {
        throw UsageError("--dataset: expected FILE:NAME, got '" + d + "'");
      }
      f.pattern = d.substr(0, colon);
      f.name = d.substr(colon + 1);
    }
    if (f.name.empty()) throw UsageError("--dataset '" + d + "': no dataset NAME");
    fields.push_back(std::move(f));
  }
  if (!row_bytes.empty() && row_bytes.size() != 1 && row_bytes.size() != fields.size()) {
    throw UsageError("--row-bytes is given " + std::to_string(row_bytes.size()) + " times for " +
                     std::to_string(fields.size()) +
                     " --dataset fields (give it once for all, or once per --dataset)");
  }
  std::vector<MapField> map_fields;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    map_fields.push_back({fields[i].name, row_bytes.empty()       ? 0
                                          : row_bytes.size() == 1 ? row_bytes[0]
                                                                  : row_bytes[i]});
  }

  // Files and their rows.
  std::vector<std::pair<std::string, std::uint64_t>> files;  // (resolved path, rows)
  // Per field after the first, its file beside each of `files` (paired in
  // sorted order); empty with --files-from, where every field is in the list's files.
  std::vector<std::vector<std::string>> field_paths;
  if (files_from) {
    for (const char* flag : {"rows", "rows-per-file"}) {
      if (flags.Has(flag)) {
        throw UsageError(std::string("--") + flag + " and --files-from: the list gives the rows");
      }
    }
    files = ReadFileList(*files_from);
  } else {
    const std::vector<std::string> first = ExpandPattern(fields[0]);
    for (std::size_t i = 1; i < fields.size(); ++i) {
      std::vector<std::string> other = ExpandPattern(fields[i]);
      if (other.size() != first.size()) {
        throw UsageError("--dataset '" + fields[i].flag + "' names " +
                         std::to_string(other.size()) + " file" + (other.size() == 1 ? "" : "s") +
                         " and --dataset '" + fields[0].flag + "' " + std::to_string(first.size()) +
                         ": a field in files of its own needs one file beside each of the first "
                         "field's, paired in sorted order");
      }
      field_paths.push_back(std::move(other));
    }
    if (flags.Has("rows-per-file")) {
      if (flags.Has("rows")) throw UsageError("--rows is for one file; use --rows-per-file alone");
      const std::uint64_t k = flags.U64("rows-per-file", 0);
      if (k == 0) throw UsageError("--rows-per-file must be >= 1");
      const std::uint64_t n = first.size();
      const std::uint64_t total = samples.value_or(n * k);
      if (total > n * k || total <= (n - 1) * k) {
        throw UsageError("--rows-per-file " + std::to_string(k) + " with " + std::to_string(n) +
                         " files holds " + std::to_string((n - 1) * k + 1) + " to " +
                         std::to_string(n * k) + " samples, not --samples " +
                         std::to_string(total));
      }
      for (std::uint64_t i = 0; i < n; ++i) {
        files.emplace_back(first[i], i + 1 < n ? k : total - (n - 1) * k);
      }
    } else if (first.size() == 1) {
      if (!flags.Has("rows") && !samples) throw UsageError("--samples or --rows is required");
      const std::uint64_t rows = flags.Has("rows") ? flags.U64("rows", 0) : *samples;
      if (rows == 0) throw UsageError("--rows must be >= 1");
      files.emplace_back(first[0], rows);
    } else {
      throw UsageError("--dataset '" + fields[0].flag + "' matches " +
                       std::to_string(first.size()) +
                       " files: say how many rows each holds with --rows-per-file K or "
                       "--files-from LIST");
    }
  }

  std::vector<MapFile> map_files;
  map_files.reserve(files.size());
  for (std::size_t k = 0; k < files.size(); ++k) {
    const auto& [path, rows] = files[k];
    MapFile file = Stat(path, rows, files_from ? "--files-from" : "--dataset");
    for (std::size_t i = 0; i < field_paths.size(); ++i) {
      const std::string& own = field_paths[i][k];
      if (own == path) continue;
      const MapFile stamp = Stat(own, rows, "--dataset '" + fields[i + 1].flag + "'");
      file.field_files.push_back(
          {static_cast<std::uint32_t>(i + 1), stamp.path, stamp.size, stamp.mtime_ns});
    }
    map_files.push_back(std::move(file));
  }
  MapFromFlags out;
  try {
    out.map = SampleMap(std::move(map_files), std::move(map_fields));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string(files_from ? "--files-from: " : "--dataset: ") + e.what());
  }
  if (samples && *samples != out.map.num_samples()) {
    throw UsageError("--samples " + std::to_string(*samples) + " differs from the " +
                     std::to_string(out.map.num_samples()) + " rows the files hold");
  }
  out.samples = out.map.num_samples();
  return out;
}

}  // namespace prescient::scheduler::tool
