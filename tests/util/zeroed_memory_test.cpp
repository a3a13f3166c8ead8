// ZeroedMemory: reads as zeros, and only the pages written become resident.
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>
#include <utility>

#include "util/error.h"
#include "util/zeroed_memory.h"

namespace oscar {
namespace {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * ::sysconf(_SC_PAGESIZE);
}

TEST(ZeroedMemory, ReadsAsZerosAndBecomesResidentOnlyWhereWritten) {
  constexpr size_t kBytes = size_t(1) << 30;
  constexpr size_t kWritten = size_t(32) << 20;
  const int64_t before = resident_bytes();
  ZeroedMemory memory(kBytes, "test pool");
  ASSERT_EQ(memory.size(), kBytes);
  EXPECT_LT(resident_bytes() - before, int64_t(kWritten));  // none of the 1 GiB yet
  for (size_t offset = 0; offset < kWritten; offset += 4096) memory.data()[offset] = std::byte{1};
  EXPECT_GE(resident_bytes() - before, int64_t(kWritten));
  EXPECT_LT(resident_bytes() - before, int64_t(kBytes / 4));
  EXPECT_EQ(memory.data()[kBytes - 1], std::byte{0});
  EXPECT_EQ(memory.data()[kWritten + 1], std::byte{0});
  EXPECT_EQ(memory.data()[4096], std::byte{1});

  ZeroedMemory moved = std::move(memory);
  EXPECT_EQ(memory.size(), 0u);
  EXPECT_EQ(memory.data(), nullptr);
  EXPECT_EQ(moved.data()[4096], std::byte{1});
  EXPECT_EQ(ZeroedMemory(0, "empty").data(), nullptr);
}

TEST(ZeroedMemory, ARequestTheMachineCannotMapNamesTheMemory) {
  try {
    ZeroedMemory impossible(size_t(1) << 62, "KV cache: test pages");
    FAIL() << "mapped 4 EiB";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("KV cache: test pages: cannot reserve"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace oscar
