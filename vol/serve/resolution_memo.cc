#include "vol/serve/resolution_memo.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <utility>

#include "cache/io/raw_layout_text.h"
#include "vol/runtime/runtime.h"

namespace prescient::vol {
namespace {

// A record: this header, then `payload_bytes` of text (EncodePayload).
constexpr std::uint64_t kMagic = 0x3153455243535250ull;  // "PRSCRES1"
struct RecordHeader {
  std::uint64_t magic;
  std::uint32_t payload_bytes;
  std::uint32_t reserved;
  std::uint64_t checksum;  // FNV-1a of the payload
};
static_assert(sizeof(RecordHeader) == 24);
// A record larger than this is not written (a chunked dataset's index of
// hundreds of thousands of chunks is resolved each time instead).
constexpr std::uint32_t kMaxPayloadBytes = 1u << 20;

std::uint64_t Fnv1a(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string IndexKey(std::string_view path, std::string_view name) {
  std::string key(path);
  key.push_back('\0');
  if (!name.starts_with('/')) key.push_back('/');  // rooted at the file
  key.append(name);
  return key;
}

bool SameFile(const FileIdentity& a, const FileIdentity& b) {
  return a.valid && b.valid && SameVersion(a, b);
}

// The payload, one "tag values" line each, the layout's text last:
//   path <file path>        asked <the name resolved>
//   name <the dataset's name, as its identity has it>   description <text>
//   file dev ino size mtime_ns ctime_ns
//   key hi lo               rows row_bytes chunk_rows
//   dims d0 d1 ...          layout <raw layout text up to the end>
std::string EncodePayload(const std::string& path, const std::string& asked,
                          const FileIdentity& file, const CachedDataset::Facts& facts) {
  std::string out;
  out += "path " + path + "\n";
  out += "asked " + asked + "\n";
  out += "name " + facts.name + "\n";
  out += "description " + facts.description + "\n";
  out += "file " + std::to_string(file.device) + " " + std::to_string(file.inode) + " " +
         std::to_string(file.size) + " " + std::to_string(file.mtime_ns) + " " +
         std::to_string(file.ctime_ns) + "\n";
  out += "key " + std::to_string(facts.key.hi) + " " + std::to_string(facts.key.lo) + "\n";
  out += "rows " + std::to_string(facts.row_bytes) + " " + std::to_string(facts.chunk_rows) + "\n";
  out += "dims";
  for (const hsize_t d : facts.dims) out += " " + std::to_string(d);
  out += "\nlayout\n";
  out += cache::io::FormatRawLayoutText(*facts.layout);
  return out;
}

// Splits off the next line of `text` (without its '\n'); false at the end.
bool NextLine(std::string_view& text, std::string_view& line) {
  if (text.empty()) return false;
  const std::size_t end = text.find('\n');
  line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return true;
}

// The rest of `line` after "tag ", or false if the line has another tag.
bool Tagged(std::string_view line, std::string_view tag, std::string_view& rest) {
  if (line.substr(0, tag.size()) != tag) return false;
  rest = line.substr(tag.size());
  if (!rest.empty()) {
    if (rest.front() != ' ') return false;
    rest.remove_prefix(1);
  }
  return true;
}

// Whitespace-separated unsigned or signed integers of `text`, all of them.
template <typename T>
bool ParseNumbers(std::string_view text, std::vector<T>& out) {
  out.clear();
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    if (*p == ' ') {
      ++p;
      continue;
    }
    T value{};
    const auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || next == p) return false;
    out.push_back(value);
    p = next;
  }
  return true;
}

// Where the word after the first `words` words of `text` begins (npos if
// there are not that many).
std::size_t SplitAfterWords(std::string_view text, int words) {
  std::size_t at = 0;
  for (int w = 0; w < words; ++w) {
    at = text.find(' ', at);
    if (at == std::string_view::npos) return at;
    ++at;
  }
  return at;
}

// The file, opened only if it is the user's own regular file, 0600.
int OpenOwn(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 077) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

std::shared_ptr<CachedDataset> ResolutionMemo::Find(const std::shared_ptr<FileState>& file,
                                                    const std::string& name) {
  CachedDataset::Facts facts;
  {
    cache::MutexLock lock(&mutex_);
    if (given_up_) return nullptr;
    const std::string key = IndexKey(file->name, name);
    auto it = index_.find(key);
    if (it == index_.end() || !SameFile(it->second.file, file->identity)) {
      CatchUpLocked();
      it = index_.find(key);
      if (it == index_.end() || !SameFile(it->second.file, file->identity)) return nullptr;
    }
    ++found_;
    facts = it->second.facts;
  }
  return CachedDataset::FromFacts(std::move(facts), file);
}

void ResolutionMemo::Remember(const std::string& name, const CachedDataset& dataset) {
  CachedDataset::Facts facts = dataset.facts();
  // Rows read from other files (a virtual dataset's) are the preparing
  // process's descriptors, and their key holds more than the file's identity.
  if (!facts.layout || facts.source != nullptr || !dataset.file_identity().valid) return;
  cache::MutexLock lock(&mutex_);
  if (given_up_) return;
  // Under the file's canonical path, the one a schedule's map names (the
  // application may have opened it by a relative path or a link).
  auto [known, fresh] = canonical_.try_emplace(dataset.path());
  if (fresh) {
    char resolved[PATH_MAX];
    if (::realpath(dataset.path().c_str(), resolved) != nullptr) known->second = resolved;
  }
  const std::string& path = known->second;
  // One line per field: a path or name holding a line break is not kept.
  if (path.empty() || path.find('\n') != std::string::npos ||
      name.find('\n') != std::string::npos || facts.name.find('\n') != std::string::npos) {
    return;
  }
  for (char& c : facts.description)
    if (c == '\n') c = ' ';
  const std::string payload = EncodePayload(path, name, dataset.file_identity(), facts);
  if (payload.size() > kMaxPayloadBytes) return;
  const RecordHeader header{.magic = kMagic,
                            .payload_bytes = static_cast<std::uint32_t>(payload.size()),
                            .reserved = 0,
                            .checksum = Fnv1a(payload)};
  if (pending_.empty()) pending_since_ = std::chrono::steady_clock::now();
  pending_.append(reinterpret_cast<const char*>(&header), sizeof header);
  pending_.append(payload);
  // Known to this process at once (a later round finds it without a read).
  index_[IndexKey(path, name)] = {dataset.file_identity(), std::move(facts)};
}

void ResolutionMemo::Flush(bool batched) {
  cache::MutexLock lock(&mutex_);
  if (pending_.empty() || given_up_) return;
  if (batched && pending_.size() < kBatchBytes &&
      std::chrono::steady_clock::now() - pending_since_ < kBatchAge) {
    return;
  }
  std::string records = std::exchange(pending_, {});
  const int fd = OpenOwn(path_, O_WRONLY | O_CREAT | O_APPEND);
  if (fd < 0) return;  // not ours, or no room for a file: resolved as before
  struct stat st{};
  if (::fstat(fd, &st) == 0 &&
      static_cast<std::uint64_t>(st.st_size) + records.size() <= kMaxBytes) {
    // One write of whole records: appends of two leaders (one taking over
    // from the other) do not interleave. A short write (a full tmpfs) leaves
    // a torn record that readers stop at.
    (void)::write(fd, records.data(), records.size());
  }
  ::close(fd);
}

void ResolutionMemo::CatchUpLocked() {
  const int fd = OpenOwn(path_, O_RDONLY);
  if (fd < 0) return;
  struct stat st{};
  const std::uint64_t size =
      ::fstat(fd, &st) == 0 ? std::min<std::uint64_t>(st.st_size, kMaxBytes) : 0;
  std::string bytes;
  if (size > read_bytes_) {
    bytes.resize(size - read_bytes_);
    const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(read_bytes_));
    bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  std::string_view rest(bytes);
  while (rest.size() >= sizeof(RecordHeader)) {
    RecordHeader header;
    std::memcpy(&header, rest.data(), sizeof header);
    if (header.magic != kMagic || header.payload_bytes > kMaxPayloadBytes) {
      GiveUpLocked("a record that is not one");
      return;
    }
    if (rest.size() < sizeof header + header.payload_bytes) break;  // still being written
    const std::string_view payload = rest.substr(sizeof header, header.payload_bytes);
    if (Fnv1a(payload) != header.checksum || !IndexLocked(payload)) {
      GiveUpLocked("a damaged record");
      return;
    }
    ++records_;
    rest.remove_prefix(sizeof header + header.payload_bytes);
    read_bytes_ += sizeof header + header.payload_bytes;
  }
}

bool ResolutionMemo::IndexLocked(std::string_view payload) {
  std::string_view line, value, path, asked, name;
  Record record;
  std::vector<std::uint64_t> numbers;
  if (!NextLine(payload, line) || !Tagged(line, "path", path)) return false;
  if (!NextLine(payload, line) || !Tagged(line, "asked", asked)) return false;
  if (!NextLine(payload, line) || !Tagged(line, "name", name)) return false;
  record.facts.name = std::string(name);
  if (!NextLine(payload, line) || !Tagged(line, "description", value)) return false;
  record.facts.description = std::string(value);
  // Device, inode and size unsigned; the two times signed.
  std::vector<std::int64_t> times;
  if (!NextLine(payload, line) || !Tagged(line, "file", value)) return false;
  const std::size_t split = SplitAfterWords(value, 3);
  if (split == std::string_view::npos || !ParseNumbers(value.substr(0, split), numbers) ||
      numbers.size() != 3 || !ParseNumbers(value.substr(split), times) || times.size() != 2) {
    return false;
  }
  record.file = {.valid = true,
                 .device = numbers[0],
                 .inode = numbers[1],
                 .size = numbers[2],
                 .mtime_ns = times[0],
                 .ctime_ns = times[1]};
  if (!NextLine(payload, line) || !Tagged(line, "key", value) || !ParseNumbers(value, numbers) ||
      numbers.size() != 2) {
    return false;
  }
  record.facts.key = {.hi = numbers[0], .lo = numbers[1]};
  if (!NextLine(payload, line) || !Tagged(line, "rows", value) || !ParseNumbers(value, numbers) ||
      numbers.size() != 2) {
    return false;
  }
  record.facts.row_bytes = numbers[0];
  record.facts.chunk_rows = numbers[1];
  if (!NextLine(payload, line) || !Tagged(line, "dims", value) || !ParseNumbers(value, numbers) ||
      numbers.empty()) {
    return false;
  }
  record.facts.dims.assign(numbers.begin(), numbers.end());
  if (!NextLine(payload, line) || line != "layout") return false;
  cache::io::Result<cache::io::RawLayout> layout = cache::io::ParseRawLayoutText(payload);
  if (!layout.ok()) return false;
  record.facts.layout = std::make_shared<const cache::io::RawLayout>(std::move(layout.value()));
  index_[IndexKey(path, asked)] = std::move(record);
  return true;
}

void ResolutionMemo::GiveUpLocked(const std::string& why) {
  given_up_ = true;
  index_.clear();
  pending_.clear();
  Runtime::Get().Log(LogLevel::kInfo,
                     "prefetch: " + path_ + " holds " + why + "; datasets are resolved without it");
}

}  // namespace prescient::vol
