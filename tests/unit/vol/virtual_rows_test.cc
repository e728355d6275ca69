// A virtual dataset's rows read straight from its sources (virtual_rows.h):
// real HDF5 files, every byte compared with HDF5's own read of the virtual
// dataset, and the mappings that must be left to HDF5.
#include "vol/serve/virtual_rows.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "cache/io/coalescing_planner.h"
#include "cache/io/raw_loader.h"
#include "tests/unit/vol/virtual_files.h"
#include "vol/objects/dataset_queries.h"
#include "vol/objects/dataset_state.h"
#include "vol/objects/file_state.h"
#include "vol/objects/scoped_id.h"

namespace prescient::vol {
namespace {

namespace fs = std::filesystem;
using testing::kColumns;
using testing::Mapping;
using testing::Storage;

class VirtualRowsTest : public ::testing::Test {
 public:
  std::string Path(const std::string& name) const { return files_.Path(name); }
  void WriteSource(const std::string& name, hsize_t rows, int base, const Storage& storage = {}) {
    files_.WriteSource(name, rows, base, storage);
  }
  void WriteVirtual(hsize_t rows, const std::vector<Mapping>& mappings, hsize_t own_rows = 0,
                    hsize_t columns = kColumns, int fill = 0, bool no_fill = false) {
    files_.WriteVirtual(rows, mappings, own_rows, columns, fill, no_fill);
  }

  struct Opened {
    cache::io::Result<VirtualRows> source = cache::io::Status::Internal("not opened");
    std::vector<std::byte> native;  // HDF5's read of the whole VDS
    std::uint64_t row_bytes = 0;
  };
  // Opens vds.h5 as the application would, reads "v" through HDF5, and asks
  // for its rows' source. `between` runs after the sources are identified.
  Opened Open(const std::function<void()>& between = {}) {
    Opened out;
    const std::string path = Path("vds.h5");
    const std::shared_ptr<FileState> state =
        FileState::Make(path.c_str(), /*writable=*/false, /*posix_driver=*/true);
    ScopedId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    ScopedId dataset(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
    const PublicDataset queries(dataset.get());
    const std::shared_ptr<DatasetState> ds = DatasetState::Identify(queries, state.get());
    if (ds == nullptr) return out;
    out.row_bytes = ds->row_bytes();
    out.native.resize(ds->dims()[0] * ds->row_bytes());
    H5Dread(dataset.get(), H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.native.data());
    ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    auto sources = VirtualSources::Find(queries, dcpl.get(), *state);
    if (!sources.ok()) {
      out.source = sources.status();
      return out;
    }
    if (between) between();
    out.source = ReadVirtualRows(dcpl.get(), *ds, *state, sources.value());
    return out;
  }

  // VirtualMayReadAsNothing of vds.h5's "v".
  bool MayReadAsNothing() {
    const std::string path = Path("vds.h5");
    const std::shared_ptr<FileState> state =
        FileState::Make(path.c_str(), /*writable=*/false, /*posix_driver=*/true);
    ScopedId file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), &H5Fclose);
    ScopedId dataset(H5Dopen2(file.get(), "v", H5P_DEFAULT), &H5Dclose);
    ScopedId dcpl(H5Dget_create_plist(dataset.get()), &H5Pclose);
    auto sources = VirtualSources::Find(PublicDataset(dataset.get()), dcpl.get(), *state);
    EXPECT_TRUE(sources.ok()) << sources.status().message();
    return !sources.ok() || VirtualMayReadAsNothing(dcpl.get(), *state, sources.value());
  }

  // Every row read raw equals HDF5's: all rows at once, coalesced or not,
  // and row by row, through the loader (as the cache reads them).
  static void ExpectNativeBytes(const Opened& opened) {
    ASSERT_TRUE(opened.source.ok()) << opened.source.status().message();
    const VirtualRows& rows = opened.source.value();
    const std::uint64_t count = cache::io::NumRows(rows.layout);
    ASSERT_EQ(count * opened.row_bytes, opened.native.size());
    ASSERT_EQ(cache::io::RowBytes(rows.layout), opened.row_bytes);
    const auto load = [&](std::span<const std::uint64_t> wanted,
                          const cache::io::CoalescingOptions& options) {
      std::vector<std::byte> out(opened.native.size());
      cache::io::Result<cache::io::ReadPlan> plan =
          cache::io::PlanReads(rows.layout, wanted, options);
      EXPECT_TRUE(plan.ok()) << plan.status().message();
      if (!plan.ok()) return out;
      for (const cache::io::ReadTask& task : plan.value().tasks) {
        const cache::io::Status loaded = cache::io::LoadTask(
            rows.layout, *rows.source, task,
            [&](std::uint64_t row) { return out.data() + row * opened.row_bytes; });
        EXPECT_TRUE(loaded.ok()) << loaded.message();
      }
      return out;
    };
    std::vector<std::uint64_t> all(count);
    for (std::uint64_t r = 0; r < count; ++r) all[r] = r;
    EXPECT_EQ(load(all, cache::io::kNoCoalescing), opened.native);
    EXPECT_EQ(load(all, cache::io::kDefaultLocalDiskCoalescing), opened.native);
    for (std::uint64_t r = 0; r < count; ++r) {
      const std::vector<std::byte> one = load(std::span(&all[r], 1), cache::io::kNoCoalescing);
      EXPECT_TRUE(std::equal(one.begin() + r * opened.row_bytes,
                             one.begin() + (r + 1) * opened.row_bytes,
                             opened.native.begin() + r * opened.row_bytes))
          << "row " << r;
    }
  }

  // Sources written this long before the naming file's open are not "changed
  // while it was open" (VirtualSources allows for coarse file timestamps).
  static void Settle() { std::this_thread::sleep_for(std::chrono::milliseconds(60)); }

  testing::VirtualFiles files_{"vrows"};
};

TEST_F(VirtualRowsTest, RowsFromSeveralFilesInAnyOrderAreTheBytesHdf5Reads) {
  WriteSource("a.h5", 6, 0);
  WriteSource("b.h5", 4, 100);
  // Out of row order, part of a source, one source twice, and the naming file.
  WriteVirtual(12, {{"b.h5", 0, 4, 0}, {"a.h5", 4, 3, 3}, {".", 7, 2, 1}, {"a.h5", 9, 3, 0}},
               /*own_rows=*/4);
  Settle();
  ExpectNativeBytes(Open());
}

TEST_F(VirtualRowsTest, RowsNoMappingGivesReadAsTheFillValue) {
  WriteSource("a.h5", 6, 0);
  WriteSource("b.h5", 4, 100);
  // Gaps first, between mappings and last; a fill value set, then the default (zeros).
  const std::vector<Mapping> mappings = {{"b.h5", 2, 4, 0}, {"a.h5", 9, 3, 1}};
  WriteVirtual(14, mappings, 0, kColumns, /*fill=*/-9);
  Settle();
  ExpectNativeBytes(Open());
  WriteVirtual(14, mappings);
  Settle();
  ExpectNativeBytes(Open());
}

TEST_F(VirtualRowsTest, ChunkedSourcesAreReadAsOneChunkedDataset) {
  // Compressed, two chunks per row, chunks never written (the sources' fill
  // value), mappings out of order from chunk boundaries; the last mapping
  // ends the dataset halfway through a chunk.
  const Storage storage{.chunked = true,
                        .chunk_rows = 2,
                        .chunk_columns = 2,
                        .deflate = true,
                        .fill = -7,
                        .written_rows = 4};
  WriteSource("a.h5", 6, 0, storage);
  WriteSource("b.h5", 4, 100, storage);
  WriteVirtual(11, {{"b.h5", 0, 4, 0}, {"a.h5", 4, 2, 2}, {"a.h5", 6, 4, 0}, {"a.h5", 10, 1, 4}});
  Settle();
  const Opened opened = Open();
  ASSERT_TRUE(opened.source.ok()) << opened.source.status().message();
  ASSERT_TRUE(std::holds_alternative<cache::io::ChunkedLayout>(opened.source.value().layout));
  ExpectNativeBytes(opened);
}

TEST_F(VirtualRowsTest, ChunkedSourcesWithRowsNoMappingGives) {
  const Storage storage{.chunked = true, .chunk_rows = 2, .deflate = true, .fill = -5};
  WriteSource("a.h5", 4, 0, storage);
  // Rows 0-1 and 6-9 given by no mapping: whole chunks, read as the fill value.
  WriteVirtual(10, {{"a.h5", 2, 4, 0}}, 0, kColumns, /*fill=*/-5);
  Settle();
  const Opened opened = Open();
  ASSERT_TRUE(opened.source.ok()) << opened.source.status().message();
  ASSERT_TRUE(std::holds_alternative<cache::io::ChunkedLayout>(opened.source.value().layout));
  ExpectNativeBytes(opened);
}

TEST_F(VirtualRowsTest, ChunkedSourcesOneChunkPerRowUncompressed) {
  const Storage storage{.chunked = true, .chunk_rows = 1};
  WriteSource("a.h5", 5, 0, storage);
  WriteSource("b.h5", 3, 100, storage);
  WriteVirtual(8, {{"b.h5", 0, 3, 0}, {"a.h5", 3, 5, 0}});
  Settle();
  ExpectNativeBytes(Open());
}

TEST_F(VirtualRowsTest, ChunkedSourcesThatDoNotSplitAtChunksAreLeftToHdf5) {
  const Storage chunked{.chunked = true, .chunk_rows = 2};
  struct Case {
    const char* what;
    const char* why;  // in the refusal
    std::function<void(VirtualRowsTest*)> write;
  };
  const std::vector<Case> cases = {
      {"a mapping from inside a source chunk", "not whole chunks",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 6, 0, chunked);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 1}});
       }},
      {"a mapping ending inside a chunk, not at the end", "not whole chunks",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 3, 0, chunked);
         t->WriteSource("b.h5", 4, 100, chunked);
         t->WriteVirtual(7, {{"a.h5", 0, 3, 0}, {"b.h5", 3, 4, 0}});
       }},
      {"sources chunked differently", "chunked, filtered or filled unlike",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, chunked);
         t->WriteSource("b.h5", 4, 100, {.chunked = true, .chunk_rows = 4});
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"sources filtered differently", "chunked, filtered or filled unlike",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, chunked);
         t->WriteSource("b.h5", 4, 100, {.chunked = true, .deflate = true});
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"sources filled differently", "chunked, filtered or filled unlike",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, chunked);
         t->WriteSource("b.h5", 4, 100, {.chunked = true, .fill = 3});
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"rows no mapping gives filled unlike the sources' unwritten chunks", "fill unlike",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, chunked);
         t->WriteVirtual(6, {{"a.h5", 2, 4, 0}}, 0, kColumns, /*fill=*/-5);
       }},
      {"a chunked source beside a contiguous one", "some of its sources are chunked",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteSource("b.h5", 4, 100, chunked);
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"chunks never written, fill time never", "never written",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, {.chunked = true, .fill_never = true, .written_rows = 2});
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
      {"a filter the loader does not undo", "filter",
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, {.chunked = true, .scaleoffset = true});
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.write(this);
    Settle();
    const Opened opened = Open();
    EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported);
    EXPECT_NE(opened.source.status().message().find(c.why), std::string::npos)
        << opened.source.status().message();
  }
}

TEST_F(VirtualRowsTest, MappingsHdf5MustResolveAreLeftToIt) {
  struct Case {
    const char* what;
    std::function<void(VirtualRowsTest*)> write;
  };
  const std::vector<Case> cases = {
      {"another type",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, {.type = H5T_STD_I32BE});
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
      {"rows left to the fill value, and no fill value",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteVirtual(6, {{"a.h5", 0, 4, 0}}, 0, kColumns, 0, /*no_fill=*/true);
       }},
      {"rows given twice",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteSource("b.h5", 4, 100);
         t->WriteVirtual(6, {{"a.h5", 0, 4, 0}, {"b.h5", 2, 4, 0}});
       }},
      {"parts of rows",
       [](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}}, 0, /*columns=*/2);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.write(this);
    Settle();
    const Opened opened = Open();
    EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported)
        << opened.source.status().message();
  }
}

TEST_F(VirtualRowsTest, MoreSourceFilesThanDescriptorsAllowAreLeftToHdf5) {
  std::vector<Mapping> mappings;
  const hsize_t files = kMaxRawVirtualSourceFiles + 1;
  for (hsize_t k = 0; k < files; ++k) {
    const std::string name = "s" + std::to_string(k) + ".h5";
    WriteSource(name, 1, static_cast<int>(k));
    mappings.push_back({name, k, 1, 0});
  }
  WriteVirtual(files, mappings);
  Settle();
  const Opened opened = Open();
  EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported);
  EXPECT_NE(opened.source.status().message().find("source files"), std::string::npos)
      << opened.source.status().message();
}

TEST_F(VirtualRowsTest, AMissingSourceDatasetIsLeftToHdf5Quietly) {
  WriteSource("a.h5", 4, 0);
  // Mapped from "y", which a.h5 lacks: HDF5 reads the fill value there.
  {
    ScopedId file(H5Fcreate(Path("vds.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                  &H5Fclose);
    const hsize_t dims[2] = {4, kColumns};
    ScopedId space(H5Screate_simple(2, dims, nullptr), &H5Sclose);
    ScopedId dcpl(H5Pcreate(H5P_DATASET_CREATE), &H5Pclose);
    ASSERT_GE(H5Pset_virtual(dcpl.get(), space.get(), "a.h5", "y", space.get()), 0);
    ScopedId dataset(H5Dcreate2(file.get(), "v", H5T_NATIVE_INT, space.get(), H5P_DEFAULT,
                                dcpl.get(), H5P_DEFAULT),
                     &H5Dclose);
    ASSERT_GE(dataset.get(), 0);
  }
  Settle();
  ::testing::internal::CaptureStderr();
  const Opened opened = Open();
  const std::string printed = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(opened.source.status().code(), cache::io::Status::Code::kUnsupported)
      << opened.source.status().message();
  EXPECT_NE(opened.source.status().message().find("no source dataset y"), std::string::npos)
      << opened.source.status().message();
  // HDF5's own read of the VDS in Open() prints nothing either (fill values).
  EXPECT_EQ(printed.find("HDF5-DIAG"), std::string::npos) << printed;
}

TEST_F(VirtualRowsTest, ASourceReplacedAfterItWasIdentifiedIsNotRead) {
  WriteSource("a.h5", 4, 0);
  WriteVirtual(4, {{"a.h5", 0, 4, 0}});
  Settle();
  const Opened opened = Open([this] {
    WriteSource("a2.h5", 4, 900);
    fs::rename(Path("a2.h5"), Path("a.h5"));
  });
  ASSERT_FALSE(opened.source.ok());
  EXPECT_NE(opened.source.status().message().find("changed since it was identified"),
            std::string::npos)
      << opened.source.status().message();
}

// Loaded through HDF5 (PRESCIENT_CACHE_VIRTUAL=1), a VDS is cached only when
// HDF5 writes every byte of a read: not where a source was never written and
// has no fill value to give, nor where the VDS has none for rows no mapping
// gives.
TEST_F(VirtualRowsTest, WhereHdf5ReadsNothingIsTold) {
  const Storage never{.chunked = true, .fill_never = true};
  struct Case {
    const char* what;
    bool nothing;
    std::function<void(VirtualRowsTest*)> write;
  };
  const std::vector<Case> cases = {
      {"sources written whole", false,
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0, never);
         t->WriteSource("b.h5", 4, 100);
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"a source dataset missing (the VDS's fill value)", false,
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         ScopedId empty(H5Fcreate(t->Path("b.h5").c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                        &H5Fclose);
         t->WriteVirtual(8, {{"a.h5", 0, 4, 0}, {"b.h5", 4, 4, 0}});
       }},
      {"chunks never written, fill time never", true,
       [&](VirtualRowsTest* t) {
         Storage half = never;
         half.written_rows = 2;
         t->WriteSource("a.h5", 4, 0, half);
         t->WriteVirtual(4, {{"a.h5", 0, 4, 0}});
       }},
      {"no fill value for rows no mapping gives", true,
       [&](VirtualRowsTest* t) {
         t->WriteSource("a.h5", 4, 0);
         t->WriteVirtual(6, {{"a.h5", 0, 4, 0}}, 0, kColumns, 0, /*no_fill=*/true);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.write(this);
    Settle();
    EXPECT_EQ(MayReadAsNothing(), c.nothing);
  }
}

}  // namespace
}  // namespace prescient::vol
