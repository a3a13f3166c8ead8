// Text corpora: xz documents split at 0x1e, JSONL with a "text" field, plain text.
#include <gtest/gtest.h>

#include <fstream>

#include "format/documents.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace oscar {
namespace {

TEST(Documents, TestbedXzFilesSplitIntoDocuments) {
  const auto calibration = read_documents(testing::testbed_model_dir() + "/calib.xz");
  EXPECT_EQ(calibration.size(), 400u);  // models/testbed/README.md: 400 documents
  for (const auto& document : calibration) {
    EXPECT_FALSE(document.empty());
    EXPECT_EQ(document.find('\x1e'), std::string::npos);
  }
  EXPECT_GT(read_documents(testing::testbed_model_dir() + "/valid.xz").size(), 10u);
}

TEST(Documents, JsonlAndPlainText) {
  const std::string dir = testing::make_temp_dir("documents");
  std::ofstream(dir + "/a.jsonl") << "{\"text\": \"first\"}\n\n{\"text\": \"second\", \"id\": 2}\n";
  EXPECT_EQ(read_documents(dir + "/a.jsonl"), (std::vector<std::string>{"first", "second"}));
  std::ofstream(dir + "/bad.jsonl") << "{\"text\": \"ok\"}\n{\"body\": 1}\n";
  try {
    read_documents(dir + "/bad.jsonl");
    FAIL();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("bad.jsonl:2"), std::string::npos) << error.what();
  }
  std::ofstream(dir + "/plain.txt") << "one\x1etwo";
  EXPECT_EQ(read_documents(dir + "/plain.txt"), (std::vector<std::string>{"one", "two"}));
  std::ofstream(dir + "/broken.xz") << "not xz at all";
  EXPECT_THROW(read_documents(dir + "/broken.xz"), Error);
  EXPECT_THROW(read_documents(dir + "/missing.txt"), Error);
}

}  // namespace
}  // namespace oscar
