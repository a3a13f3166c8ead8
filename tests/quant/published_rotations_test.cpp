// The published RotationZoo rotation files (torch.save archives): the fixtures of both format
// versions read as the values the generator wrote (tools/torch_save_rotations.py fixture), shapes
// checked against the model, and per-layer files repeated per head beside per-head ones.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "quant/error_feedback.h"
#include "quant/published_rotations.h"
#include "util/error.h"

namespace oscar {
namespace {

const std::string kData = std::string(OSCAR_SOURCE_DIR) + "/tests/quant/data/";
constexpr int64_t kD = 8;

ModelFingerprint fixture_model(int64_t layers = 2, int64_t heads = 2, int64_t head_dim = kD) {
  return {"fixture", layers, heads, head_dim, "", ""};
}

// The generator's rotation for `seed`: rows (3 seed + 5 i) mod 8 of the normalised Hadamard
// matrix, negated where (row + seed) is a multiple of 3.
std::vector<float> fixture_rotation(int seed) {
  std::vector<float> r;
  for (int i = 0; i < kD; ++i) {
    const int row = (seed * 3 + i * 5) % int(kD);
    for (int c = 0; c < kD; ++c) {
      const float hadamard =
          (__builtin_popcount(unsigned(row & c)) % 2 ? -1.0f : 1.0f) / std::sqrt(8.0f);
      r.push_back(hadamard * ((row + seed) % 3 == 0 ? -1.0f : 1.0f));
    }
  }
  return r;
}

struct VersionCase {
  int key_version;
  int value_version;
  bool per_head;
};

// The fixtures written without torch (tools/torch_save_rotations.py fixture) and, once made on a
// machine with torch, the same by torch.save (tools/make_torch_rotation_fixtures.py, in torch/).
class PublishedFixtures : public ::testing::TestWithParam<std::string> {};

TEST_P(PublishedFixtures, ReadAsWrittenInBothFormatVersions) {
  const std::string dir = kData + GetParam();
  if (GetParam() == "torch/" && !std::filesystem::exists(dir + "k_rotation_v1.pt")) {
    GTEST_SKIP() << "no torch.save fixtures yet in " << dir;
  }
  for (const VersionCase c :
       {VersionCase{1, 1, false}, VersionCase{2, 2, true}, VersionCase{1, 2, true}}) {
    SCOPED_TRACE("key v" + std::to_string(c.key_version) + ", value v" +
                 std::to_string(c.value_version));
    const KvRotations r = load_published_kv_rotations(
        dir + "k_rotation_v" + std::to_string(c.key_version) + ".pt",
        dir + "v_rotation_v" + std::to_string(c.value_version) + ".pt", fixture_model());
    EXPECT_EQ(r.per_head, c.per_head);
    for (int64_t layer = 0; layer < 2; ++layer) {
      for (int64_t head = 0; head < 2; ++head) {
        for (const bool key : {true, false}) {
          const int version = key ? c.key_version : c.value_version;
          // Version 1 holds head 0's seed for the whole layer; values' seeds are 2 above keys'.
          const int seed = int(layer * 4 + (version == 2 ? head : 0) + (key ? 0 : 2));
          const std::vector<float> expected = fixture_rotation(seed);
          const float* got = key ? r.key_rotation(layer, head) : r.value_rotation(layer, head);
          ASSERT_EQ(std::vector<float>(got, got + kD * kD), expected)
              << "layer " << layer << " head " << head;
          // Eigenvalues (seed + 1) * (i + 1), written increasing, kept decreasing.
          const auto& eigen = key ? r.key_eigenvalues : r.value_eigenvalues;
          const size_t at =
              size_t((layer * r.rotations_per_layer() + (r.per_head ? head : 0)) * kD);
          EXPECT_EQ(eigen[at], float((seed + 1) * kD));
          EXPECT_EQ(eigen[at + kD - 1], float(seed + 1));
        }
      }
    }
    // The keys' error feedback builds from them as from oscar's own files.
    EXPECT_EQ(key_feedback_factors(r).size(), size_t(2 * 2 * kD * kD));
  }
}

INSTANTIATE_TEST_SUITE_P(Writers, PublishedFixtures, ::testing::Values("", "torch/"),
                         [](const auto& case_info) {
                           return std::string(case_info.param.empty() ? "python_pickle"
                                                                      : "torch_save");
                         });

struct MismatchCase {
  ModelFingerprint model;
  const char* message;
};

TEST(PublishedRotations, ShapesAreCheckedAgainstTheModel) {
  const MismatchCase cases[] = {
      {fixture_model(3), "holds 2 layers, the model has 3"},
      {fixture_model(1), "layer 1 is outside the model's 1 layers"},
      {fixture_model(2, 4), "rotation of shape [2, 8, 8], expected [4, 8, 8]"},
      {fixture_model(2, 2, 16), "expected [2, 16, 16]"},
  };
  for (const MismatchCase& c : cases) {
    try {
      load_published_kv_rotations(kData + "k_rotation_v2.pt", kData + "v_rotation_v2.pt", c.model);
      ADD_FAILURE() << c.message << ": loaded";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(c.message), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("k_rotation_v2.pt"), std::string::npos)
          << error.what();
    }
  }
}

TEST(PublishedRotations, OtherFilesAreRefused) {
  EXPECT_THROW(
      load_published_kv_rotations(kData + "absent.pt", kData + "v_rotation_v2.pt", fixture_model()),
      Error);
  EXPECT_THROW(
      load_published_kv_rotations(std::string(OSCAR_SOURCE_DIR) + "/models/testbed/config.json",
                                  kData + "v_rotation_v2.pt", fixture_model()),
      Error);
}

}  // namespace
}  // namespace oscar
