// prescient-admission-bench: what it costs to put a row read from cold
// storage into the node cache, against reading it the way native HDF5 does.
//
//   prescient-admission-bench [--dir D] [--rows 40000] [--row-bytes 16384] [--rounds 2]
//
// Makes D/prescient-admission-bench.dat (rows of random bytes, each followed by
// a 64-byte record, so rows are not page aligned, like images beside their
// labels), then reads every row once in a random order, the file made cold
// (fdatasync + POSIX_FADV_DONTNEED) before each pass, into a fresh segment file
// in /dev/shm (2 MiB extents backed with posix_fallocate before first use, as
// the cache does). Ways of getting a row there, alternated round by round:
//   native        pread into a reused buffer, no segment (what h5py pays)
//   pwrite-unbacked  the same into a segment never fallocated (pwrite
//                 allocates each page itself)
//   pwrite        pread into a reused buffer, pwrite into the segment
//                 (the cache's path: FileBacking::WriteThrough)
//   into-mapping  pread straight into the mapped segment (no second copy, but
//                 the first write of each page faults the mapping in)
//   sendfile      sendfile from the file into the segment (no user buffer)
//   direct        O_DIRECT pread of the page-aligned span into a reused
//                 buffer (no page cache), pwrite into the segment
//   direct-scatter  O_DIRECT pread of the aligned span into a scratch buffer,
//                 memcpy of the row into the caller's buffer, pwrite of it into
//                 the segment (what a miss path bypassing the page cache does)
//   direct-into-mapping  O_DIRECT pread of the aligned span straight into the
//                 mapped segment (slots page aligned; no page cache, no copy)
// Prints wall and CPU time (user + system) per pass and per row. The segment
// pages are the cost native does not have; this shows whether any way of
// writing them is cheaper than the cache's.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kRecordBytes = 64;
constexpr std::size_t kExtentBytes = 2 << 20;
constexpr std::size_t kPage = 4096;

enum class Way {
  kNative,
  kPwriteUnbacked,
  kPwrite,
  kIntoMapping,
  kSendfile,
  kDirect,
  kDirectScatter,
  kDirectIntoMapping
};
constexpr Way kWays[] = {Way::kNative,        Way::kPwriteUnbacked,   Way::kPwrite,
                         Way::kIntoMapping,   Way::kSendfile,         Way::kDirect,
                         Way::kDirectScatter, Way::kDirectIntoMapping};

const char* NameOf(Way way) {
  switch (way) {
    case Way::kNative:
      return "native";
    case Way::kPwriteUnbacked:
      return "pwrite-unbacked";
    case Way::kPwrite:
      return "pwrite";
    case Way::kIntoMapping:
      return "into-mapping";
    case Way::kSendfile:
      return "sendfile";
    case Way::kDirect:
      return "direct";
    case Way::kDirectScatter:
      return "direct-scatter";
    case Way::kDirectIntoMapping:
      return "direct-into-mapping";
  }
  return "?";
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

bool MakeFile(const std::string& path, std::size_t rows, std::size_t row_bytes) {
  const std::size_t stride = row_bytes + kRecordBytes;
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && static_cast<std::size_t>(st.st_size) == rows * stride) {
    return true;
  }
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return false;
  std::mt19937_64 random(7);
  std::vector<std::uint64_t> row((stride + 7) / 8);
  for (std::size_t i = 0; i < rows; ++i) {
    for (auto& word : row) word = random();
    if (std::fwrite(row.data(), 1, stride, out) != stride) {
      std::fclose(out);
      return false;
    }
  }
  return std::fclose(out) == 0;
}

// One pass: every row once in `order`; false (with a message) on an error.
bool Pass(Way way, const std::string& path, const std::vector<std::uint32_t>& order,
          std::size_t row_bytes, double* wall, double* cpu) {
  const std::size_t stride = row_bytes + kRecordBytes;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool direct =
      way == Way::kDirect || way == Way::kDirectScatter || way == Way::kDirectIntoMapping;
  const int direct_fd = direct ? open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
  if (fd < 0 || (direct && direct_fd < 0)) {
    std::perror("open");
    return false;
  }
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  // Direct reads into the mapping need page-aligned slots with room for the
  // aligned span around the row.
  const std::size_t slot_bytes =
      way == Way::kDirectIntoMapping ? (row_bytes + 2 * kPage) & ~(kPage - 1) : row_bytes;
  const std::size_t segment_bytes = order.size() * slot_bytes;
  char segment_path[] = "/dev/shm/prescient-admission-bench-XXXXXX";
  const int segment = mkstemp(segment_path);
  if (segment < 0 || unlink(segment_path) != 0 ||
      ftruncate(segment, static_cast<off_t>(segment_bytes)) != 0) {
    std::perror("segment");
    return false;
  }
  auto* base = static_cast<char*>(
      mmap(nullptr, segment_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, segment, 0));
  void* buffer = nullptr;
  if (base == MAP_FAILED || posix_memalign(&buffer, kPage, row_bytes + 2 * kPage) != 0) {
    std::perror("buffers");
    return false;
  }
  auto* bytes = static_cast<char*>(buffer);
  std::vector<char> caller(row_bytes);  // the caller's buffer (direct-scatter)
  std::vector<bool> backed(segment_bytes / kExtentBytes + 1, false);
  auto back = [&](std::size_t offset) {
    const std::size_t extent = offset / kExtentBytes;
    if (backed[extent]) return true;
    backed[extent] = true;
    const std::size_t length = std::min(kExtentBytes, segment_bytes - extent * kExtentBytes);
    return posix_fallocate(segment, static_cast<off_t>(extent * kExtentBytes),
                           static_cast<off_t>(length)) == 0;
  };
  bool ok = true;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = CpuSeconds();
  for (std::size_t k = 0; k < order.size() && ok; ++k) {
    const off_t offset = static_cast<off_t>(order[k] * stride);
    const std::size_t slot = k * slot_bytes;  // rows admitted in arrival order
    const auto length = static_cast<ssize_t>(row_bytes);
    if (way != Way::kNative && way != Way::kPwriteUnbacked)
      ok = back(slot) && back(slot + row_bytes - 1);
    switch (way) {
      case Way::kNative:
        ok = ok && pread(fd, bytes, row_bytes, offset) == length;
        break;
      case Way::kPwriteUnbacked:
      case Way::kPwrite:
        ok = ok && pread(fd, bytes, row_bytes, offset) == length &&
             pwrite(segment, bytes, row_bytes, static_cast<off_t>(slot)) == length;
        break;
      case Way::kIntoMapping:
        ok = ok && pread(fd, base + slot, row_bytes, offset) == length;
        break;
      case Way::kSendfile: {
        off_t in = offset;
        ok = ok && lseek(segment, static_cast<off_t>(slot), SEEK_SET) >= 0 &&
             sendfile(segment, fd, &in, row_bytes) == length;
        break;
      }
      case Way::kDirect: {
        const off_t aligned = offset & ~static_cast<off_t>(kPage - 1);
        const std::size_t span =
            (static_cast<std::size_t>(offset - aligned) + row_bytes + kPage - 1) & ~(kPage - 1);
        ok = ok && pread(direct_fd, bytes, span, aligned) >= (offset - aligned) + length &&
             pwrite(segment, bytes + (offset - aligned), row_bytes, static_cast<off_t>(slot)) ==
                 length;
        break;
      }
      case Way::kDirectScatter: {
        const off_t aligned = offset & ~static_cast<off_t>(kPage - 1);
        const std::size_t span =
            (static_cast<std::size_t>(offset - aligned) + row_bytes + kPage - 1) & ~(kPage - 1);
        ok = ok && pread(direct_fd, bytes, span, aligned) >= (offset - aligned) + length;
        if (ok) std::memcpy(caller.data(), bytes + (offset - aligned), row_bytes);
        ok = ok && pwrite(segment, caller.data(), row_bytes, static_cast<off_t>(slot)) == length;
        break;
      }
      case Way::kDirectIntoMapping: {
        const off_t aligned = offset & ~static_cast<off_t>(kPage - 1);
        const std::size_t span =
            (static_cast<std::size_t>(offset - aligned) + row_bytes + kPage - 1) & ~(kPage - 1);
        ok = ok && back(slot + span - 1) &&
             pread(direct_fd, base + slot, span, aligned) >= (offset - aligned) + length;
        break;
      }
    }
  }
  *wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  *cpu = CpuSeconds() - cpu_start;
  if (!ok)
    std::fprintf(stderr, "%s: a read or write failed: %s\n", NameOf(way), std::strerror(errno));
  munmap(base, segment_bytes);
  std::free(buffer);
  close(segment);
  close(fd);
  if (direct_fd >= 0) close(direct_fd);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = ".";
  std::size_t rows = 40000, row_bytes = 16384;
  int rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--dir") {
      dir = argv[i + 1];
    } else if (flag == "--rows") {
      rows = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--row-bytes") {
      row_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (flag == "--rounds") {
      rounds = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (argc % 2 == 0 || rows == 0 || row_bytes == 0 || rounds <= 0) {
    std::fprintf(stderr,
                 "usage: %s [--dir D] [--rows N] [--row-bytes B] [--rounds R] (D on real "
                 "storage, not tmpfs)\n",
                 argv[0]);
    return 2;
  }
  const std::string path = dir + "/prescient-admission-bench.dat";
  if (!MakeFile(path, rows, row_bytes)) {
    std::perror(path.c_str());
    return 1;
  }
  std::vector<std::uint32_t> order(rows);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(42));
  std::printf("%zu rows of %zu bytes (+%zu-byte records) from %s, cold, random order\n", rows,
              row_bytes, kRecordBytes, path.c_str());
  std::printf("%-6s %-20s %8s %8s %10s %10s\n", "round", "way", "wall s", "cpu s", "wall us/row",
              "cpu us/row");
  for (int round = 0; round < rounds; ++round) {
    for (Way way : kWays) {
      double wall = 0, cpu = 0;
      if (!Pass(way, path, order, row_bytes, &wall, &cpu)) return 1;
      std::printf("%-6d %-20s %8.3f %8.3f %10.1f %10.1f\n", round, NameOf(way), wall, cpu,
                  wall * 1e6 / static_cast<double>(rows), cpu * 1e6 / static_cast<double>(rows));
      std::fflush(stdout);
    }
  }
  return 0;
}
