// prescient-io-bench: cold-storage read patterns over one dataset's raw layout.
//
//   prescient-io-bench --layout L.txt [--threads 2] [--windows 64,512,4096,all]
//                      [--single-rows N] [--seed S] [--max-gap B] [--max-run B]
//                      [--patterns sequential,single,windows] [--repeat N]
//                      [--fadvise-random 0|1]  (1: the file is opened with POSIX_FADV_RANDOM)
//
// Before every pattern the file is made cold (fdatasync + POSIX_FADV_DONTNEED).
// Patterns, over one random permutation of the rows (an epoch's order):
//   sequential    one scan of the dataset's bytes in 8 MiB preads (no decoding)
//   single        rows one at a time in epoch order, each its own read (and,
//                 for chunked data, its own chunk decode): the first N rows
//   window W      the epoch cut into look-ahead windows of W rows; each window
//                 planned with the calibrated coalescing options and loaded on
//                 the thread pool ("all" = the whole epoch: each chunk once)
// Rows are scattered into a per-thread sink buffer: the cost of copying rows
// out is paid, the memory for a whole epoch is not needed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/executor.h"
#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout_text.h"
#include "cache/io/raw_loader.h"
#include "cache/io/storage_calibration.h"

namespace io = prescient::cache::io;

namespace {

using Clock = std::chrono::steady_clock;

struct Measurement {
  std::string name;
  std::uint64_t rows = 0;
  double seconds = 0;
  std::uint64_t reads = 0;
  std::uint64_t bytes = 0;
};

void Print(const Measurement& m) {
  std::printf("%-22s rows %6llu  %8.3f s  %9.1f us/row  reads %7llu  %8.1f MiB  %7.1f MiB/s\n",
              m.name.c_str(), static_cast<unsigned long long>(m.rows), m.seconds,
              m.rows ? m.seconds * 1e6 / static_cast<double>(m.rows) : 0.0,
              static_cast<unsigned long long>(m.reads), static_cast<double>(m.bytes) / (1 << 20),
              static_cast<double>(m.bytes) / (1 << 20) / std::max(m.seconds, 1e-9));
  std::fflush(stdout);
}

std::byte* Sink(std::uint64_t row_bytes) {
  thread_local std::vector<std::byte> sink;
  if (sink.size() < row_bytes) sink.resize(row_bytes);
  return sink.data();
}

// The file range holding the dataset's bytes.
std::pair<std::uint64_t, std::uint64_t> DataExtent(const io::RawLayout& layout) {
  if (const auto* c = std::get_if<io::ContiguousLayout>(&layout)) {
    return {c->data_offset, c->data_offset + c->row_bytes * c->num_rows};
  }
  const auto& k = std::get<io::ChunkedLayout>(layout);
  std::uint64_t begin = UINT64_MAX, end = 0;
  for (std::uint64_t i = 0; i < k.num_chunks(); ++i) {
    if (const auto& chunk = k.chunk(i)) {
      begin = std::min(begin, chunk->file_offset);
      end = std::max(end, chunk->file_offset + chunk->stored_size);
    }
  }
  return {begin == UINT64_MAX ? 0 : begin, end};
}

bool Cold(const std::string& path) {
  const io::Status status = io::DropFromPageCache(path);
  if (!status.ok()) std::fprintf(stderr, "warning: %s\n", status.ToString().c_str());
  return status.ok();
}

Measurement Sequential(const io::RawLayout& layout, const io::RandomAccessSource& file) {
  const auto [begin, end] = DataExtent(layout);
  std::vector<std::byte> buffer(8u << 20);
  Measurement m{.name = "sequential scan", .rows = io::NumRows(layout)};
  const auto start = Clock::now();
  for (std::uint64_t at = begin; at < end;) {
    const std::uint64_t n = std::min<std::uint64_t>(buffer.size(), end - at);
    const io::Status status = file.ReadExact(at, {buffer.data(), n});
    if (!status.ok()) std::fprintf(stderr, "error: %s\n", status.ToString().c_str());
    at += n;
    ++m.reads;
    m.bytes += n;
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return m;
}

Measurement Windows(const io::RawLayout& layout, const io::RandomAccessSource& file,
                    const std::vector<std::uint64_t>& order, std::size_t window,
                    const io::CoalescingOptions& options, io::Executor& executor,
                    std::string name) {
  const std::uint64_t row_bytes = io::RowBytes(layout);
  const auto shared_layout = std::make_shared<const io::RawLayout>(layout);
  const std::shared_ptr<const io::RandomAccessSource> source(&file,
                                                             [](const io::RandomAccessSource*) {});
  Measurement m{.name = std::move(name), .rows = order.size()};
  const auto start = Clock::now();
  for (std::size_t at = 0; at < order.size(); at += window) {
    const std::size_t n = std::min(window, order.size() - at);
    auto plan = io::PlanReads(layout, {order.data() + at, n}, options);
    if (!plan.ok()) {
      std::fprintf(stderr, "error: %s\n", plan.status().ToString().c_str());
      std::exit(1);
    }
    io::LoadJob job{.layout = shared_layout,
                    .source = source,
                    .plan = std::move(plan).value(),
                    .row_target = [row_bytes](std::uint64_t) { return Sink(row_bytes); },
                    .on_task_done = {}};
    const io::LoadSummary summary = io::Load(std::move(job), executor);
    if (!summary.first_error.ok()) {
      std::fprintf(stderr, "error: %s\n", summary.first_error.ToString().c_str());
      std::exit(1);
    }
    m.reads += summary.reads;
    m.bytes += summary.bytes_read;
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return m;
}

bool ReadText(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string layout_path, windows_text = "64,512,4096,all";
  unsigned threads = 2;
  std::uint64_t single_rows = 2000, seed = 1;
  std::int64_t max_gap = -1, max_run = 8 << 20;
  std::string patterns = "sequential,single,windows";
  int repeat = 1;
  bool random_advice = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--layout")
      layout_path = value;
    else if (flag == "--threads")
      threads = static_cast<unsigned>(std::stoul(value));
    else if (flag == "--windows")
      windows_text = value;
    else if (flag == "--single-rows")
      single_rows = std::stoull(value);
    else if (flag == "--seed")
      seed = std::stoull(value);
    else if (flag == "--max-gap")
      max_gap = std::stoll(value);
    else if (flag == "--max-run")
      max_run = std::stoll(value);
    else if (flag == "--patterns")
      patterns = "," + value + ",";
    else if (flag == "--repeat")
      repeat = std::stoi(value);
    else if (flag == "--fadvise-random")
      random_advice = value == "1";
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::string text;
  if (layout_path.empty() || !ReadText(layout_path, text)) {
    std::fprintf(stderr, "usage: prescient-io-bench --layout FILE [...]\n");
    return 2;
  }
  auto layout = io::ParseRawLayoutText(text);
  if (!layout.ok()) {
    std::fprintf(stderr, "%s\n", layout.status().ToString().c_str());
    return 1;
  }
  const std::string& path = io::PathOf(*layout);
  auto file = io::PosixFile::Open(
      path, random_advice ? io::AccessPattern::kRandom : io::AccessPattern::kNormal);
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 1;
  }

  io::CoalescingOptions options{.max_gap_bytes = 0,
                                .max_run_bytes = static_cast<std::uint64_t>(max_run)};
  Cold(path);
  auto profile = io::CalibrateStorage(path);
  if (!profile.ok()) {
    std::fprintf(stderr, "calibration: %s\n", profile.status().ToString().c_str());
    return 1;
  }
  std::printf("calibration (cold): %s\n", profile->ToString().c_str());
  options.max_gap_bytes =
      max_gap >= 0 ? static_cast<std::uint64_t>(max_gap) : profile->gap_threshold_bytes;
  std::printf("coalescing: max_gap %llu bytes, max_run %llu bytes, %u I/O threads\n",
              static_cast<unsigned long long>(options.max_gap_bytes),
              static_cast<unsigned long long>(options.max_run_bytes), threads);

  const std::uint64_t rows = io::NumRows(*layout);
  std::vector<std::uint64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);

  const auto wanted = [&](const char* pattern) {
    return ("," + patterns + ",").find(std::string(",") + pattern + ",") != std::string::npos;
  };
  io::InlineExecutor inline_executor;
  io::ThreadPool pool({.threads = threads});
  const std::vector<std::uint64_t> single(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(single_rows, rows)));
  for (int pass = 0; pass < repeat; ++pass) {
    if (wanted("sequential")) {
      Cold(path);
      Print(Sequential(*layout, **file));
    }
    if (wanted("single")) {
      Cold(path);
      Print(Windows(*layout, **file, single, 1, io::kNoCoalescing, inline_executor,
                    "single (1 thread)"));
    }
    if (!wanted("windows")) continue;
    std::istringstream windows(windows_text);
    for (std::string item; std::getline(windows, item, ',');) {
      const std::size_t window = item == "all" ? order.size() : std::stoull(item);
      Cold(path);
      Print(Windows(*layout, **file, order, window, options, pool, "window " + item));
    }
  }
  return 0;
}
