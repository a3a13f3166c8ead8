#include "format/torch_archive.h"

#include <algorithm>

#include "util/error.h"

namespace oscar {
namespace {

// The folder holding data.pkl: the only entry named <prefix>/data.pkl with no further folder.
std::string archive_prefix(const ZipArchive& archive) {
  std::string prefix;
  int found = 0;
  for (const std::string& name : archive.entry_names()) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      prefix = name.substr(0, slash);
      ++found;
    }
  }
  require(found == 1, "{}: not a torch.save archive ({} entries <folder>/data.pkl, expected 1)",
          archive.name(), found);
  return prefix;
}

bool plain_key(const std::string& key) {
  return !key.empty() && key.size() <= 64 && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  });
}

}  // namespace

PickleValue read_torch_archive(const ZipArchive& archive) {
  const std::string prefix = archive_prefix(archive);
  const std::string byteorder = prefix + "/byteorder";
  if (archive.contains(byteorder)) {
    const std::vector<std::byte> order = archive.read(byteorder, 16);
    const std::string text(reinterpret_cast<const char*>(order.data()), order.size());
    require(text == "little", "{}: byteorder is '{}' (only little-endian archives are read)",
            archive.name(), text);
  }
  const std::vector<std::byte> pickle = archive.read(prefix + "/data.pkl", kMaxTorchPickleBytes);
  const auto load_storage = [&](const std::string& key, DType dtype, int64_t elements) {
    require(plain_key(key), "{}: storage key '{}' is not a plain name", archive.name(), key);
    const std::string entry = prefix + "/data/" + key;
    const uint64_t element_bytes = dtype_size_bytes(dtype);
    require(uint64_t(elements) <= kMaxTorchStorageBytes / element_bytes,
            "{}: storage {} of {} elements is larger than the {} bytes allowed", archive.name(),
            key, elements, kMaxTorchStorageBytes);
    auto storage = std::make_shared<TorchStorage>();
    storage->dtype = dtype;
    storage->elements = elements;
    storage->bytes = archive.read(entry, uint64_t(elements) * element_bytes);
    require(storage->bytes.size() == uint64_t(elements) * element_bytes,
            "{}: entry {} holds {} bytes, expected {} ({} elements of {} bytes)", archive.name(),
            entry, storage->bytes.size(), uint64_t(elements) * element_bytes, elements,
            element_bytes);
    return std::shared_ptr<const TorchStorage>(std::move(storage));
  };
  return read_torch_pickle(pickle, load_storage, archive.name() + ": " + prefix + "/data.pkl");
}

PickleValue read_torch_file(const std::string& path) {
  return read_torch_archive(ZipArchive::open(path));
}

}  // namespace oscar
