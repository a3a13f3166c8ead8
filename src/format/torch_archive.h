#pragma once
// torch.save archives (PyTorch's zip format): a zip whose entries share one top folder <prefix>
// (the file's stem, or "archive"):
//   <prefix>/data.pkl       the pickled object (format/torch_pickle.h)
//   <prefix>/data/<key>     each storage's raw elements, little-endian
//   <prefix>/version, <prefix>/byteorder ("little" when present), and others not read.
#include <cstdint>
#include <string>

#include "format/torch_pickle.h"
#include "format/zip_archive.h"

namespace oscar {

inline constexpr uint64_t kMaxTorchPickleBytes = uint64_t(64) << 20;
inline constexpr uint64_t kMaxTorchStorageBytes = uint64_t(4) << 30;

// Reads the object an archive holds; throws Error naming the archive, entry and fault.
PickleValue read_torch_archive(const ZipArchive& archive);
PickleValue read_torch_file(const std::string& path);

}  // namespace oscar
