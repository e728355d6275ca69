#include "vol/stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace prescient::vol {

void Stats::CountRead(const DecodedSelection& selection, bool simple, std::uint64_t bytes) {
  reads_.fetch_add(1, std::memory_order_relaxed);
  if (simple) reads_simple_.fetch_add(1, std::memory_order_relaxed);
  if (selection.whole_rows) reads_whole_rows_.fetch_add(1, std::memory_order_relaxed);
  if (selection.scalar) reads_scalar_.fetch_add(1, std::memory_order_relaxed);
  rows_.fetch_add(selection.rows.rows(), std::memory_order_relaxed);
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  selections_[static_cast<std::size_t>(selection.kind)].fetch_add(1, std::memory_order_relaxed);
}

void Stats::Reset() {
  for (auto* c : {&files_opened_, &datasets_opened_, &reads_, &reads_simple_, &reads_whole_rows_,
                  &reads_undecoded_, &reads_forwarded_, &reads_scalar_, &rows_, &bytes_}) {
    c->store(0, std::memory_order_relaxed);
  }
  for (auto& c : selections_) c.store(0, std::memory_order_relaxed);
}

std::string Stats::ToJson(const ProcessInfo& process) const {
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  std::ostringstream out;
  out << "{\n"
      << "  \"prescient_stats_version\": 1,\n"
      << "  \"pid\": " << process.pid << ",\n"
      << "  \"parent_pid\": " << process.parent_pid << ",\n"
      << "  \"forked_child\": " << (process.forked_child ? "true" : "false") << ",\n"
      << "  \"enabled\": " << (process.enabled ? "true" : "false") << ",\n"
      << "  \"files_opened\": " << get(files_opened_) << ",\n"
      << "  \"datasets_opened\": " << get(datasets_opened_) << ",\n"
      << "  \"reads\": " << get(reads_) << ",\n"
      << "  \"reads_simple\": " << get(reads_simple_) << ",\n"
      << "  \"reads_whole_rows\": " << get(reads_whole_rows_) << ",\n"
      << "  \"reads_scalar\": " << get(reads_scalar_) << ",\n"
      << "  \"reads_undecoded\": " << get(reads_undecoded_) << ",\n"
      << "  \"reads_forwarded\": " << get(reads_forwarded_) << ",\n"
      << "  \"rows\": " << get(rows_) << ",\n"
      << "  \"bytes\": " << get(bytes_) << ",\n"
      << "  \"selections\": {";
  for (std::size_t k = 0; k < kKinds; ++k) {
    out << (k ? ", " : "") << '"' << SelectionKindName(static_cast<SelectionKind>(k))
        << "\": " << get(selections_[k]);
  }
  out << "}\n}\n";
  return out.str();
}

std::string WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string error = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return "cannot write " + tmp + ": " + error;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string error = std::strerror(errno);
    ::unlink(tmp.c_str());
    return "cannot rename " + tmp + " to " + path + ": " + error;
  }
  return {};
}

}  // namespace prescient::vol
