// torch.save archives and their restricted pickle reader: the fixture's structure, hand-made
// hostile pickles refused by name, and random truncations and bit flips of a valid archive that
// end in an Error, never a crash (the suite runs under ASan/UBSan too).
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "format/torch_archive.h"
#include "util/error.h"

namespace oscar {
namespace {

using namespace std::string_literals;

const std::string kFixture = std::string(OSCAR_SOURCE_DIR) + "/tests/quant/data/k_rotation_v2.pt";

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

// One float storage "0" of 4 elements (1, 2, 3, 4).
std::shared_ptr<const TorchStorage> four_floats(const std::string& key, DType dtype,
                                                int64_t elements) {
  require(key == "0" && dtype == DType::f32 && elements == 4, "test storage: unexpected request");
  auto storage = std::make_shared<TorchStorage>();
  storage->elements = 4;
  const float values[4] = {1, 2, 3, 4};
  storage->bytes.resize(sizeof(values));
  std::memcpy(storage->bytes.data(), values, sizeof(values));
  return storage;
}

PickleValue read(const std::string& pickle) {
  const auto bytes = bytes_of(pickle);
  return read_torch_pickle(bytes, four_floats, "test.pt");
}

TEST(TorchArchive, ReadsTheFixture) {
  const PickleValue top = read_torch_file(kFixture);
  ASSERT_EQ(top.kind, PickleValue::Kind::dict);
  EXPECT_EQ(top.find("format_version")->integer, 2);
  EXPECT_EQ(top.find("objective")->text, "qqt");
  const PickleValue* layers = top.find("layers");
  ASSERT_NE(layers, nullptr);
  ASSERT_EQ(layers->items.size(), 4u);  // two layers, keyed "0" and "1"
  EXPECT_EQ(layers->items[0].text, "0");
  const PickleValue* rotation = layers->items[1].find("rotation");
  ASSERT_NE(rotation, nullptr);
  ASSERT_EQ(rotation->kind, PickleValue::Kind::tensor);
  EXPECT_EQ(rotation->tensor->shape, (std::vector<int64_t>{2, 8, 8}));
  const std::vector<float> values = rotation->tensor->to_float_vector();
  for (const float v : values) EXPECT_NEAR(std::abs(v), 0.35355339f, 1e-7f);  // +-1/sqrt(8)
  const PickleValue* eigen = layers->items[1].find("eigenvalues");
  EXPECT_EQ(eigen->tensor->storage->dtype, DType::f64);
  EXPECT_EQ(eigen->tensor->to_float_vector()[0], 1.0f);  // (seed 0 + 1) * (index 0 + 1)
}

TEST(TorchPickle, ReadsTensorViewsWithOffsetsAndStrides) {
  // _rebuild_tensor_v2(storage, offset 1, size (2,), stride (2,), False, OrderedDict())
  const std::string pickle =
      "\x80\x02"
      "ctorch._utils\n_rebuild_tensor_v2\n"
      "((X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0"
      "0X\x03\0\0\0cpuK\x04tQ"
      "K\x01K\x02\x85K\x02\x85\x89"
      "ccollections\nOrderedDict\n)Rt"
      "R."s;
  const PickleValue tensor = read(pickle);
  ASSERT_EQ(tensor.kind, PickleValue::Kind::tensor);
  EXPECT_EQ(tensor.tensor->to_float_vector(), (std::vector<float>{2, 4}));
}

struct HostileCase {
  const char* name;
  std::string pickle;
  const char* message;  // a part of the expected error
};

TEST(TorchPickle, RefusesWhatTheFilesNeverHold) {
  const std::string storage =
      "(X\x07\0\0\0storagectorch\nFloatStorage\nX\x01\0\0\0"
      "0X\x03\0\0\0cpuK\x04tQ"s;
  std::string deep = "\x80\x02";
  for (int i = 0; i < 100; ++i) deep += "]";
  for (int i = 0; i < 99; ++i) deep += "a";
  deep += ".";
  // Each step doubles a list by memo copies: 40 steps would be 2^40 values.
  std::string doubling = "\x80\x02]q\x00"s;
  for (int i = 0; i < 40; ++i) doubling += "h\x00h\x00\x86q\x00"s;
  doubling += ".";
  const HostileCase cases[] = {
      {"unknown opcode", "\x80\x02\x01."s, "unsupported opcode 0x01"},
      {"os.system",
       "\x80\x02"
       "cos\nsystem\nX\x02\0\0\0lst\x85R."s,
       "refuses global os.system"},
      {"builtins.eval",
       "\x80\x02"
       "cbuiltins\neval\n."s,
       "refuses global builtins.eval"},
      {"huge string length",
       "\x80\x02X\xff\xff\xff\x7f"
       "abc."s,
       "truncated"},
      {"truncated integer", "\x80\x02J\x01\x02"s, "truncated"},
      {"no STOP", "\x80\x02K\x01"s, "truncated"},
      {"protocol 0", "\x80\x00N."s, "pickle protocol 0"},
      {"deep nesting", deep, "nesting deeper than"},
      {"memo doubling", doubling, "values made or copied"},
      {"missing memo", "\x80\x02h\x05."s, "memo entry 5"},
      {"empty stack", "\x80\x02t."s, "no MARK"},
      {"pop below mark", "\x80\x02(\x85."s, "stack is empty"},
      {"float dict key", "\x80\x02}G\x3f\xf0\0\0\0\0\0\0K\x01s."s, "dict key of kind float"},
      {"integer of 9 bytes", "\x80\x02\x8a\x09\0\0\0\0\0\0\0\0\0."s, "9 bytes"},
      {"storage outside a tensor", "\x80\x02" + storage + ".", "storage outside a tensor"},
      {"bare global",
       "\x80\x02"
       "ctorch\nFloatStorage\n."s,
       "global outside a tensor"},
      {"tensor past its storage",
       "\x80\x02"
       "ctorch._utils\n_rebuild_tensor_v2\n(" +
           storage +
           "K\x02K\x04\x85K\x01\x85\x89"
           "ccollections\nOrderedDict\n)RtR."s,
       "reads past its storage"},
      {"tensor with a negative stride",
       "\x80\x02"
       "ctorch._utils\n_rebuild_tensor_v2\n(" +
           storage +
           "K\x00K\x02\x85J\xff\xff\xff\xff\x85\x89"
           "ccollections\nOrderedDict\n)RtR."s,
       "outside 0..2^40"},
      {"OrderedDict with items",
       "\x80\x02"
       "ccollections\nOrderedDict\n]\x85R."s,
       "OrderedDict with arguments"},
      {"call of a non-global", "\x80\x02K\x01)R."s, "REDUCE of a int"},
      {"other persistent id", "\x80\x02X\x01\0\0\0xQ."s, "persistent id"},
  };
  for (const HostileCase& c : cases) {
    try {
      read(c.pickle);
      ADD_FAILURE() << c.name << ": read without an error";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(c.message), std::string::npos)
          << c.name << ": " << error.what();
      EXPECT_NE(std::string(error.what()).find("test.pt: pickle byte"), std::string::npos)
          << c.name;
    }
  }
}

TEST(TorchArchive, RefusesArchivesWithoutData) {
  EXPECT_THROW(read_torch_archive(ZipArchive::from_bytes(bytes_of("not a zip at all"), "junk.pt")),
               Error);
  EXPECT_THROW(read_torch_file(std::string(OSCAR_SOURCE_DIR) + "/no/such/file.pt"), Error);
}

// Random truncations and bit flips of the fixture: each read succeeds or throws Error (libzip
// catches most damage by CRC; flips inside stored entries whose CRC still holds are impossible, so
// the pickle's own checks are reached through the flips of its directory and header fields).
TEST(TorchArchive, DamagedArchivesGiveErrors) {
  const std::vector<std::byte> valid = file_bytes(kFixture);
  ASSERT_GT(valid.size(), 1000u);
  std::mt19937 rng(45);
  int errors = 0, reads = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::vector<std::byte> damaged = valid;
    if (trial % 3 == 0) {
      damaged.resize(std::uniform_int_distribution<size_t>(0, valid.size() - 1)(rng));
    } else {
      const int flips = 1 + trial % 4;
      for (int f = 0; f < flips; ++f) {
        const size_t at = std::uniform_int_distribution<size_t>(0, damaged.size() - 1)(rng);
        damaged[at] ^= std::byte(1u << std::uniform_int_distribution<int>(0, 7)(rng));
      }
    }
    try {
      read_torch_archive(ZipArchive::from_bytes(std::move(damaged), "damaged.pt"));
      ++reads;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 300);  // most damage is detected; the rest hit bytes no reader looks at
  EXPECT_EQ(errors + reads, 600);
}

// The same pickle bytes fed to the reader directly (no CRC in the way): truncations and flips
// anywhere, including lengths, opcodes and memo indices.
TEST(TorchPickle, DamagedPicklesGiveErrors) {
  const ZipArchive archive = ZipArchive::open(kFixture);
  const std::vector<std::byte> pickle = archive.read("archive/data.pkl", kMaxTorchPickleBytes);
  const auto storages = [&](const std::string& key, DType dtype, int64_t elements) {
    auto storage = std::make_shared<TorchStorage>();
    storage->dtype = dtype;
    storage->elements = elements;
    storage->bytes =
        archive.read("archive/data/" + key, uint64_t(elements) * dtype_size_bytes(dtype));
    require(storage->bytes.size() == uint64_t(elements) * dtype_size_bytes(dtype), "size");
    return std::shared_ptr<const TorchStorage>(storage);
  };
  std::mt19937 rng(7);
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::byte> damaged = pickle;
    if (trial % 4 == 0) {
      damaged.resize(std::uniform_int_distribution<size_t>(0, pickle.size() - 1)(rng));
    } else {
      const size_t at = std::uniform_int_distribution<size_t>(0, damaged.size() - 1)(rng);
      damaged[at] = trial % 2 ? std::byte(rng()) : damaged[at] ^ std::byte(1u << (trial % 8));
    }
    try {
      read_torch_pickle(damaged, storages, "damaged.pt");
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1500);
}

}  // namespace
}  // namespace oscar
