// prescient-rawread: reads rows of one dataset through cache/io (no HDF5), for
// cross-checks against h5py and for debugging raw layouts.
//
//   prescient-rawread --layout L.txt --rows R.txt --out OUT.bin
//                     [--threads N] [--max-gap BYTES] [--max-run BYTES]
//
// L.txt is a raw layout in the text form of raw_layout_text.h; R.txt holds row
// numbers separated by white space (repeats allowed). OUT.bin receives the
// rows' bytes in the order of R.txt. A one-line JSON summary of the plan goes
// to stdout. Exit status: 0 done, 1 an error (message on stderr), 2 usage.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/executor.h"
#include "cache/io/random_access_file.h"
#include "cache/io/raw_layout_text.h"
#include "cache/io/raw_loader.h"

namespace io = prescient::cache::io;

namespace {

int Fail(const std::string& message) {
  std::cerr << "prescient-rawread: " << message << "\n";
  return 1;
}

int Usage(const std::string& message) {
  std::cerr << "prescient-rawread: " << message
            << "\nusage: prescient-rawread --layout FILE --rows FILE --out FILE [--threads N] "
               "[--max-gap BYTES] [--max-run BYTES]\n";
  return 2;
}

bool ReadWholeFile(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  out = text.str();
  return true;
}

bool ParseCount(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') return false;
  out = value;
  return true;
}

int Run(int argc, char** argv) {
  std::string layout_path, rows_path, out_path;
  std::uint64_t threads = 2;
  io::CoalescingOptions options = io::kDefaultLocalDiskCoalescing;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return Usage("missing value after " + flag);
    const char* value = argv[++i];
    if (flag == "--layout") {
      layout_path = value;
    } else if (flag == "--rows") {
      rows_path = value;
    } else if (flag == "--out") {
      out_path = value;
    } else if (flag == "--threads") {
      if (!ParseCount(value, threads) || threads > 256) return Usage("bad --threads");
    } else if (flag == "--max-gap") {
      if (!ParseCount(value, options.max_gap_bytes)) return Usage("bad --max-gap");
    } else if (flag == "--max-run") {
      if (!ParseCount(value, options.max_run_bytes)) return Usage("bad --max-run");
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  if (layout_path.empty() || rows_path.empty() || out_path.empty()) {
    return Usage("--layout, --rows and --out are required");
  }

  std::string text;
  if (!ReadWholeFile(layout_path, text)) return Fail("cannot read " + layout_path);
  auto layout = io::ParseRawLayoutText(text);
  if (!layout.ok()) return Fail(layout.status().ToString());
  if (!ReadWholeFile(rows_path, text)) return Fail("cannot read " + rows_path);
  std::vector<std::uint64_t> requested;
  std::istringstream row_stream(text);
  for (std::string word; row_stream >> word;) {
    std::uint64_t row = 0;
    if (!ParseCount(word.c_str(), row)) return Fail("bad row number '" + word + "'");
    requested.push_back(row);
  }

  auto plan = io::PlanReads(*layout, requested, options);
  if (!plan.ok()) return Fail(plan.status().ToString());
  auto file = io::PosixFile::Open(io::PathOf(*layout));
  if (!file.ok()) return Fail(file.status().ToString());

  // One buffer per distinct row, in the plan's (sorted) row order.
  const std::uint64_t row_bytes = io::RowBytes(*layout);
  std::vector<std::uint64_t> rows;
  for (const auto& task : plan->tasks) rows.insert(rows.end(), task.rows.begin(), task.rows.end());
  std::sort(rows.begin(), rows.end());
  std::vector<std::byte> data(rows.size() * row_bytes);
  std::vector<std::byte*> buffers;
  for (std::size_t i = 0; i < rows.size(); ++i) buffers.push_back(data.data() + i * row_bytes);

  const std::uint64_t tasks = plan->tasks.size(), reads = plan->num_reads();
  const std::uint64_t bytes = plan->bytes_read();
  io::ThreadPool pool({.threads = static_cast<unsigned>(threads)});
  io::LoadJob job{.layout = std::make_shared<const io::RawLayout>(std::move(*layout)),
                  .source = std::shared_ptr<const io::RandomAccessSource>(std::move(*file)),
                  .plan = std::move(plan).value(),
                  .row_target = io::RowTargetsFromArrays(rows, buffers),
                  .on_task_done = {}};
  const io::LoadSummary summary = io::Load(std::move(job), pool);
  if (!summary.first_error.ok()) return Fail(summary.first_error.ToString());

  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  for (const std::uint64_t row : requested) {
    const auto at = std::lower_bound(rows.begin(), rows.end(), row) - rows.begin();
    out.write(reinterpret_cast<const char*>(buffers[static_cast<std::size_t>(at)]),
              static_cast<std::streamsize>(row_bytes));
  }
  out.close();
  if (!out) return Fail("cannot write " + out_path);
  std::cout << "{\"rows\": " << rows.size() << ", \"tasks\": " << tasks << ", \"reads\": " << reads
            << ", \"bytes_read\": " << bytes << "}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    return Fail(std::string("unexpected exception: ") + e.what());
  }
}
