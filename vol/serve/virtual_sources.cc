#include "vol/serve/virtual_sources.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "vol/objects/fingerprint.h"
#include "vol/objects/name_query.h"
#include "vol/objects/scoped_id.h"

namespace prescient::vol {
namespace {

namespace io = cache::io;

// A source whose status-change time is this close to the naming file's open
// may have changed after it: kernels before Linux 6.13 stamp files with a
// clock that lags the real time by up to a tick (4-10 ms).
constexpr std::int64_t kCoarseClockMarginNs = 20'000'000;

// HDF5 substitutes the directory of the naming file for a prefix's leading
// "${ORIGIN}" (H5D__build_file_prefix).
constexpr std::string_view kOrigin = "${ORIGIN}";

bool Absolute(std::string_view path) { return !path.empty() && path.front() == '/'; }

std::string Join(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string joined(dir);
  if (joined.back() != '/') joined += '/';
  joined += name;
  return joined;
}

// "" for a bare name, "/" for a name in the root.
std::string DirName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return "";
  return slash == 0 ? "/" : std::string(path.substr(0, slash));
}

std::string BaseName(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string ExpandOrigin(std::string_view prefix, std::string_view ext_path) {
  if (prefix.substr(0, kOrigin.size()) != kOrigin) return std::string(prefix);
  return std::string(ext_path) + std::string(prefix.substr(kOrigin.size()));
}

bool SameIdentity(const FileIdentity& a, const FileIdentity& b) {
  if (!a.valid || !b.valid) return a.valid == b.valid;  // still nothing there
  return SameVersion(a, b);
}

std::string WorkingDirectory() {
  std::string cwd(PATH_MAX, '\0');
  if (::getcwd(cwd.data(), cwd.size()) == nullptr) return "";
  cwd.resize(std::char_traits<char>::length(cwd.c_str()));
  return cwd;
}

std::string RealDirectory(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  return real ? DirName(real.get()) : "";
}

}  // namespace

std::vector<std::string> SourceCandidates(const std::string& source_name,
                                          const std::string& vds_name, const std::string& cwd,
                                          const std::string& vds_real_dir, const char* env_prefix,
                                          const std::string& dapl_prefix) {
  std::vector<std::string> found;
  auto add = [&](std::string path) {
    if (!Absolute(path)) path = Join(cwd, path);
    if (std::find(found.begin(), found.end(), path) == found.end()) found.push_back(path);
  };
  // The naming file's directory as HDF5 records it at open (H5_build_extpath).
  const std::string ext_path =
      Absolute(vds_name) ? DirName(vds_name) : Join(cwd, DirName(vds_name));
  // An absolute name is tried as it is; after it, its last component only.
  std::string name = source_name;
  if (Absolute(source_name)) {
    add(source_name);
    name = BaseName(source_name);
  }
  const std::string_view env = env_prefix != nullptr ? env_prefix : "";
  // HDF5_VDS_PREFIX's directories, split at ':' (each also with ${ORIGIN}
  // expanded: HDF5 expands it when it takes the variable as the prefix).
  for (std::size_t start = 0; start <= env.size();) {
    const std::size_t end = std::min(env.find(':', start), env.size());
    const std::string_view part = env.substr(start, end - start);
    if (!part.empty()) {
      add(Join(part, name));
      add(Join(ExpandOrigin(part, ext_path), name));
    }
    start = end + 1;
  }
  // The prefix of the dataset's access: the variable whole, else the
  // property list's; "." means none.
  for (std::string_view prefix : {env, std::string_view(dapl_prefix)}) {
    if (!prefix.empty() && prefix != ".") add(Join(ExpandOrigin(prefix, ext_path), name));
  }
  add(Join(ext_path, name));
  add(name);  // relative to the working directory
  if (!vds_real_dir.empty()) add(Join(vds_real_dir, name));
  return found;
}

io::Result<VirtualSources> VirtualSources::Find(const DatasetQueries& dataset, hid_t dcpl,
                                                const FileState& file) {
  int rank = 0;
  {
    ScopedId space(dataset.Space(), &H5Sclose);
    rank = space.get() < 0 ? -1 : H5Sget_simple_extent_ndims(space.get());
    if (rank < 1) return io::Status::Unsupported("cannot read its dataspace");
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), max_dims(dims.size());
    if (H5Sget_simple_extent_dims(space.get(), dims.data(), max_dims.data()) < 0)
      return io::Status::Unsupported("cannot read its dataspace");
    if (std::find(max_dims.begin(), max_dims.end(), H5S_UNLIMITED) != max_dims.end())
      return io::Status::Unsupported("its extent is unlimited: its sources decide its shape");
  }
  std::size_t count = 0;
  if (H5Pget_virtual_count(dcpl, &count) < 0)
    return io::Status::Unsupported("cannot read its mappings");
  VirtualSources sources;
  std::vector<std::string>& names = sources.names_;
  std::vector<hsize_t> start(static_cast<std::size_t>(rank)), end(start.size());
  for (std::size_t i = 0; i < count; ++i) {
    std::optional<std::string> name =
        QueryNameByLength([&](char* text, std::size_t size) -> ssize_t {
          return H5Pget_virtual_filename(dcpl, i, text, size);
        });
    if (!name) return io::Status::Unsupported("cannot read a source file's name");
    if (name->find('%') != std::string::npos)
      return io::Status::Unsupported("source file names are printf-style patterns");
    if (*name == ".") continue;  // the naming file itself, already in the key
    ScopedId vspace(H5Pget_virtual_vspace(dcpl, i), &H5Sclose);
    if (vspace.get() < 0 || H5Sget_select_bounds(vspace.get(), start.data(), end.data()) < 0)
      return io::Status::Unsupported("cannot read a mapping's selection");
    const auto found = std::find(names.begin(), names.end(), *name);
    const auto source = static_cast<std::uint32_t>(found - names.begin());
    if (found == names.end()) names.push_back(std::move(*name));
    sources.mappings_.push_back({start[0], end[0], source});
  }
  std::string dapl_prefix;
  {
    ScopedId dapl(dataset.AccessPlist(), &H5Pclose);
    std::optional<std::string> prefix =
        dapl.get() < 0 ? std::nullopt
                       : QueryNameByLength([&](char* text, std::size_t size) -> ssize_t {
                           return H5Pget_virtual_prefix(dapl.get(), text, size);
                         });
    if (!prefix) return io::Status::Unsupported("cannot read its access property list");
    dapl_prefix = std::move(*prefix);
  }
  // HDF5's own variable, read where HDF5 reads it (at every source open),
  // not Prescient's configuration.
  const char* env_prefix = std::getenv("HDF5_VDS_PREFIX");
  const std::string cwd = WorkingDirectory();
  const std::string real_dir = RealDirectory(file.name);

  Fingerprint fingerprint;
  for (const std::string& name : names) {
    sources.source_begin_.push_back(static_cast<std::uint32_t>(sources.candidates_.size()));
    // The files found, in HDF5's order, not the paths: HDF5 opens the first
    // of them that is an HDF5 file, and a process that named the naming file
    // otherwise (the prefetch leader, by its canonical path) finds the same
    // ones. A file found again under another name changes nothing.
    std::vector<FileIdentity> found;
    for (std::string& path :
         SourceCandidates(name, file.name, cwd, real_dir, env_prefix, dapl_prefix)) {
      const FileIdentity identity = IdentifyFile(path);
      if (identity.valid) {
        if (identity.ctime_ns >= file.open_since_realtime_ns - kCoarseClockMarginNs) {
          return io::Status::Unsupported("source " + path + " changed while " + file.name +
                                         " was open in this process");
        }
        if (std::none_of(found.begin(), found.end(),
                         [&](const FileIdentity& f) { return SameVersion(f, identity); })) {
          found.push_back(identity);
        }
      }
      sources.candidates_.push_back({std::move(path), identity});
    }
    fingerprint.AddValue(found.size());
    for (const FileIdentity& identity : found) {
      for (std::uint64_t v : {identity.device, identity.inode, identity.size,
                              static_cast<std::uint64_t>(identity.mtime_ns),
                              static_cast<std::uint64_t>(identity.ctime_ns)}) {
        fingerprint.AddValue(v);
      }
    }
    const bool somewhere = !found.empty();
    if (!somewhere) {
      return io::Status::Unsupported("source file " + name +
                                     " is found nowhere HDF5 looks (its rows read as fill values)");
    }
  }
  sources.source_begin_.push_back(static_cast<std::uint32_t>(sources.candidates_.size()));
  sources.fingerprint_ = fingerprint.Finish();

  std::sort(sources.mappings_.begin(), sources.mappings_.end(),
            [](const Mapping& a, const Mapping& b) { return a.first_row < b.first_row; });
  std::uint64_t reach = 0;
  for (const Mapping& mapping : sources.mappings_) {
    reach = std::max(reach, mapping.last_row);
    sources.reach_.push_back(reach);
  }
  sources.checked_for_open_ = std::make_unique<std::atomic<std::uint64_t>[]>(names.size());
  return sources;
}

std::optional<VirtualSources::Located> VirtualSources::Where(const std::string& source_name) const {
  const auto found = std::find(names_.begin(), names_.end(), source_name);
  if (found == names_.end()) return std::nullopt;
  const auto source = static_cast<std::size_t>(found - names_.begin());
  for (std::uint32_t c = source_begin_[source]; c < source_begin_[source + 1]; ++c) {
    if (candidates_[c].identity.valid) return Located{candidates_[c].path, candidates_[c].identity};
  }
  return std::nullopt;  // (Find turns such a dataset down)
}

std::optional<std::string> VirtualSources::SourceChanged(std::uint32_t source) const noexcept {
  try {
    for (std::uint32_t c = source_begin_[source]; c < source_begin_[source + 1]; ++c) {
      if (!SameIdentity(IdentifyFile(candidates_[c].path), candidates_[c].identity))
        return candidates_[c].path;
    }
    return std::nullopt;
  } catch (...) {
    return std::string("?");  // cannot tell: as changed
  }
}

std::optional<std::string> VirtualSources::ChangedForRows(std::uint64_t open_serial,
                                                          std::uint64_t first_row,
                                                          std::uint64_t last_row) const noexcept {
  // Mappings starting at or before last_row, latest first, while one of them
  // or an earlier one reaches first_row.
  const auto after = std::upper_bound(
      mappings_.begin(), mappings_.end(), last_row,
      [](std::uint64_t row, const Mapping& mapping) { return row < mapping.first_row; });
  for (auto i = static_cast<std::size_t>(after - mappings_.begin()); i-- > 0;) {
    if (reach_[i] < first_row) break;
    const Mapping& mapping = mappings_[i];
    if (mapping.last_row < first_row) continue;
    std::atomic<std::uint64_t>& checked = checked_for_open_[mapping.source];
    if (checked.load(std::memory_order_acquire) == open_serial) continue;
    if (std::optional<std::string> changed = SourceChanged(mapping.source)) return changed;
    checked.store(open_serial, std::memory_order_release);
  }
  return std::nullopt;
}

std::optional<std::string> VirtualSources::FirstChanged() const noexcept {
  const std::size_t n = candidates_.size();
  if (n == 0) return std::nullopt;
  const std::size_t start = next_check_->load(std::memory_order_relaxed) % n;
  const std::size_t count = std::min(n, kCheckedPerCall);
  try {
    for (std::size_t k = 0; k < count; ++k) {
      const Candidate& candidate = candidates_[(start + k) % n];
      if (!SameIdentity(IdentifyFile(candidate.path), candidate.identity)) return candidate.path;
    }
  } catch (...) {
    return std::string("?");  // cannot tell: as changed
  }
  next_check_->store((start + count) % n, std::memory_order_relaxed);
  return std::nullopt;
}

}  // namespace prescient::vol
