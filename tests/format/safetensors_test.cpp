// safetensors: deterministic round trip, and a randomised-corruption fuzz of the header parser.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "format/safetensors.h"
#include "support/test_paths.h"
#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

std::vector<TensorToWrite> sample_tensors() {
  std::vector<float> values(24);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.25f * float(i) - 2.0f;
  TensorToWrite bf16{"b", DType::bf16, {3, 2}, std::vector<std::byte>(12)};
  for (size_t i = 0; i < 12; ++i) bf16.data[i] = std::byte(0x40 + i);
  return {make_f32_tensor("weights.a", {2, 3, 4}, values), bf16};
}

TEST(Safetensors, RoundTripIsExactAndDeterministic) {
  const std::string dir = testing::make_temp_dir("safetensors");
  write_safetensors(dir + "/one.safetensors", sample_tensors(), {{"format", "pt"}, {"note", "x"}});
  write_safetensors(dir + "/two.safetensors", sample_tensors(), {{"format", "pt"}, {"note", "x"}});
  EXPECT_EQ(read_file(dir + "/one.safetensors"), read_file(dir + "/two.safetensors"));
  const auto file = SafetensorsFile::open(dir + "/one.safetensors");
  EXPECT_EQ(file->metadata().at("note"), "x");
  const TensorView& a = file->get("weights.a");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3, 4}));
  const auto values = to_float_vector(a);
  EXPECT_EQ(values[5], 0.25f * 5 - 2.0f);
  EXPECT_EQ(file->get("b").dtype, DType::bf16);
  EXPECT_EQ(std::to_integer<int>(file->get("b").data[11]), 0x4b);
  EXPECT_THROW(file->get("missing"), Error);
}

// Every corrupted variant either opens (and then every view lies inside the file) or throws Error.
void expect_safe(const std::string& bytes, const std::string& dir, int trial) {
  const std::string path = dir + "/fuzz.safetensors";
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  try {
    const auto file = SafetensorsFile::open(path);
    for (const TensorView& t : file->tensors()) {
      ASSERT_EQ(int64_t(t.data.size()), t.numel() * int64_t(dtype_size_bytes(t.dtype))) << trial;
    }
  } catch (const Error&) {
  } catch (const std::exception& other) {
    ADD_FAILURE() << "trial " << trial << ": non-oscar exception " << other.what();
  }
}

TEST(SafetensorsFuzz, CorruptedFilesNeverCrash) {
  const std::string dir = testing::make_temp_dir("safetensors-fuzz");
  write_safetensors(dir + "/base.safetensors", sample_tensors(), {{"format", "pt"}});
  const std::string base = read_file(dir + "/base.safetensors");
  // The real model's header region too (its 8-byte length and JSON, plus a little data).
  const std::string model = read_file(testing::testbed_model_dir() + "/model.safetensors");
  uint64_t header_length = 0;
  std::memcpy(&header_length, model.data(), 8);
  const std::string model_head = model.substr(0, 8 + header_length + 64);
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    std::string bytes = trial % 4 == 3 ? model_head : base;
    const size_t json_end =
        8 + size_t(std::min<uint64_t>(bytes.size() - 8, trial % 4 == 3 ? header_length : 200));
    switch (trial % 6) {
      case 0:  // truncation anywhere
        bytes.resize(std::uniform_int_distribution<size_t>(0, bytes.size())(rng));
        break;
      case 1:  // bit flips in the header
        for (int k = 0; k < 4; ++k)
          bytes[std::uniform_int_distribution<size_t>(8, json_end - 1)(rng)] ^=
              char(1 << (k + trial) % 8);
        break;
      case 2: {  // absurd or off-by-some header length
        const uint64_t length =
            trial % 12 == 2
                ? ~uint64_t(0)
                : uint64_t(std::uniform_int_distribution<int>(0, int(bytes.size()) + 50)(rng));
        std::memcpy(bytes.data(), &length, 8);
        break;
      }
      case 3:  // the real header with digits changed (offsets, shapes)
        for (int k = 0; k < 6; ++k) {
          const size_t at = std::uniform_int_distribution<size_t>(8, json_end - 1)(rng);
          if (bytes[at] >= '0' && bytes[at] <= '9')
            bytes[at] = char('0' + (bytes[at] - '0' + 1 + k) % 10);
        }
        break;
      case 4:  // random JSON-ish bytes in the header
        for (size_t i = 8; i < json_end; i += 1 + rng() % 7)
          bytes[i] = "{}[]\",:0123456789ABCDEFxyz"[rng() % 26];
        break;
      default:  // data removed after a valid header
        bytes.resize(json_end + std::uniform_int_distribution<size_t>(0, 30)(rng));
    }
    expect_safe(bytes, dir, trial);
  }
}

TEST(Safetensors, SpecificHeaderErrorsNameTheTensor) {
  const std::string dir = testing::make_temp_dir("safetensors-errors");
  auto write_raw = [&](const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t length = header.size();
    std::memcpy(bytes.data(), &length, 8);
    bytes += header;
    bytes.append(data_bytes, '\x01');
    std::ofstream(dir + "/x.safetensors", std::ios::binary) << bytes;
    return dir + "/x.safetensors";
  };
  struct Case {
    std::string header;
    size_t data;
    std::string fragment;
  };
  const Case cases[] = {
      {R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", 8, "outside"},
      {R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,16]}})", 16, "needs 24 bytes"},
      {R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2, "unsupported dtype"},
      {R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "non-negative"},
      {R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
       6, "overlap"},
      {R"([1,2])", 0, "not a JSON object"},
      {R"({"w":)", 0, "not valid JSON"},
  };
  for (const Case& c : cases) {
    try {
      SafetensorsFile::open(write_raw(c.header, c.data));
      ADD_FAILURE() << "accepted " << c.header;
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(c.fragment), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find("x.safetensors"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace oscar
