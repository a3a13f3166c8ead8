#pragma once
// A reader for the pickle inside a torch.save archive, restricted to what a dict of ints, floats,
// strings and tensors needs (pickle protocols 2-5 as torch.save writes them):
//   containers: dict, list, tuple (and an empty collections.OrderedDict, a tensor's hooks);
//   scalars: None, bool, int (up to 64 bits), float, str;
//   tensors: torch._utils._rebuild_tensor_v2 over a storage named by a persistent id
//     ('storage', torch.<Float|Double|Half|BFloat16>Storage, key, location, numel).
// Any other opcode or global is refused with an error naming it and its byte offset; nothing is
// ever imported or called. Memory is bounded: values may be copied (memo reads copy), and every
// node made or copied counts against a budget; nesting deeper than kMaxPickleDepth is refused.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/tensor.h"

namespace oscar {

inline constexpr int kMaxPickleDepth = 32;
inline constexpr size_t kMaxPickleNodes = size_t(1) << 20;

// The elements of one storage (archive/data/<key>), little-endian.
struct TorchStorage {
  DType dtype = DType::f32;
  int64_t elements = 0;
  std::vector<std::byte> bytes;
};

// A tensor: a strided view of a storage, bounds checked when it was rebuilt.
struct TorchTensor {
  std::shared_ptr<const TorchStorage> storage;
  int64_t offset = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;

  int64_t numel() const;
  std::vector<float> to_float_vector() const;  // row-major, converted from the storage dtype
};

struct PickleValue {
  // global_name and storage appear only while reading: a result holding one is refused.
  enum class Kind : uint8_t {
    none,
    boolean,
    integer,
    real,
    string,
    tuple,
    list,
    dict,
    tensor,
    global_name,
    storage
  };
  Kind kind = Kind::none;
  int64_t integer = 0;  // boolean, integer
  double real = 0;
  std::string text;                // string; global_name: "module.name"
  std::vector<PickleValue> items;  // tuple, list; dict: key, value, key, value, ...
  std::shared_ptr<const TorchTensor> tensor;
  std::shared_ptr<const TorchStorage> storage_ref;
  size_t nodes = 1;  // this value's size for the memory budget
  int depth = 0;     // containers nested inside it

  // dict: the value of the last entry whose key is the string `key`, or nullptr.
  const PickleValue* find(std::string_view key) const;
};

std::string_view kind_name(PickleValue::Kind kind);

// Returns the bytes of storage `key` with `dtype` and `elements` as the persistent id states them;
// it must check them against the archive.
using TorchStorageLoader = std::function<std::shared_ptr<const TorchStorage>(
    const std::string& key, DType dtype, int64_t elements)>;

// Reads `pickle`; errors start with `context` (the file and entry).
PickleValue read_torch_pickle(std::span<const std::byte> pickle,
                              const TorchStorageLoader& load_storage, const std::string& context);

}  // namespace oscar
