#include "format/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/file_io.h"

namespace oscar {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit

uint64_t read_u64_le(const std::byte* p) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | uint64_t(p[i]);
  return value;
}

// numel * element_size, or false on overflow.
bool checked_byte_count(const std::vector<int64_t>& shape, size_t element_size, uint64_t* bytes) {
  uint64_t count = element_size;
  for (const int64_t dim : shape) {
    if (dim < 0) return false;
    if (dim != 0 && count > std::numeric_limits<uint64_t>::max() / uint64_t(dim)) return false;
    count *= uint64_t(dim);
  }
  *bytes = count;
  return true;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(MappedFile(path)));
  file->parse();
  return file;
}

void SafetensorsFile::parse() {
  const auto bytes = file_.bytes();
  const std::string& path = file_.path();
  require(bytes.size() >= 8, "{}: truncated safetensors file ({} bytes, no header length)", path,
          bytes.size());
  const uint64_t header_bytes = read_u64_le(bytes.data());
  require(header_bytes <= kMaxHeaderBytes, "{}: header length {} is not plausible", path,
          header_bytes);
  require(header_bytes <= bytes.size() - 8,
          "{}: truncated safetensors file (header of {} bytes, file of {} bytes)", path,
          header_bytes, bytes.size());
  const auto header_text =
      std::string_view(reinterpret_cast<const char*>(bytes.data()) + 8, size_t(header_bytes));
  // nlohmann keeps the last of repeated keys silently; a header that names a tensor twice is
  // ambiguous (another reader may take the first), so the parse notes top-level repeats.
  std::set<std::string> top_level_keys;
  std::string repeated_key;
  const auto note_repeats = [&](int depth, nlohmann::json::parse_event_t event,
                                nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 &&
        !top_level_keys.insert(parsed.get<std::string>()).second && repeated_key.empty()) {
      repeated_key = parsed.get<std::string>();
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text, note_repeats);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: header is not valid JSON: {}", path, error.what());
  }
  require(header.is_object(), "{}: header is not a JSON object", path);
  require(repeated_key.empty(), "{}: tensor {} appears twice in the header", path, repeated_key);

  const std::span<const std::byte> data = bytes.subspan(8 + size_t(header_bytes));
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      require(entry.is_object(), "{}: __metadata__ is not an object", path);
      for (const auto& [key, value] : entry.items()) {
        require(value.is_string(), "{}: metadata {} is not a string", path, key);
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    require(entry.is_object(), "{}: tensor {}: entry is not an object", path, name);
    const auto dtype_field = entry.find("dtype");
    const auto shape_field = entry.find("shape");
    const auto offsets_field = entry.find("data_offsets");
    require(dtype_field != entry.end() && dtype_field->is_string(),
            "{}: tensor {}: missing or invalid dtype", path, name);
    TensorView view;
    view.name = name;
    const auto dtype_text = dtype_field->get<std::string>();
    require(parse_dtype(dtype_text, &view.dtype), "{}: tensor {}: unsupported dtype {}", path, name,
            dtype_text);
    require(shape_field != entry.end() && shape_field->is_array(),
            "{}: tensor {}: missing or invalid shape", path, name);
    for (const auto& dim : *shape_field) {
      require(dim.is_number_unsigned(),
              "{}: tensor {}: shape entries must be non-negative integers", path, name);
      view.shape.push_back(dim.get<int64_t>());
    }
    require(offsets_field != entry.end() && offsets_field->is_array() &&
                offsets_field->size() == 2 && (*offsets_field)[0].is_number_unsigned() &&
                (*offsets_field)[1].is_number_unsigned(),
            "{}: tensor {}: data_offsets must be two non-negative integers", path, name);
    const uint64_t begin = (*offsets_field)[0].get<uint64_t>();
    const uint64_t end = (*offsets_field)[1].get<uint64_t>();
    require(begin <= end && end <= data.size(),
            "{}: tensor {}: data_offsets [{}, {}) lie outside the {} data bytes (truncated file?)",
            path, name, begin, end, data.size());
    uint64_t expected = 0;
    require(checked_byte_count(view.shape, dtype_size_bytes(view.dtype), &expected),
            "{}: tensor {}: shape {} overflows", path, name, shape_to_string(view.shape));
    require(end - begin == expected, "{}: tensor {}: {} {} needs {} bytes, data_offsets give {}",
            path, name, dtype_text, shape_to_string(view.shape), expected, end - begin);
    view.data = data.subspan(size_t(begin), size_t(end - begin));
    ranges.emplace_back(begin, end);
    index_[name] = tensors_.size();
    tensors_.push_back(std::move(view));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    require(ranges[i].first >= ranges[i - 1].second, "{}: tensor data ranges overlap at byte {}",
            path, ranges[i].first);
  }
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& SafetensorsFile::get(const std::string& name) const {
  const TensorView* view = find(name);
  if (view == nullptr) fail("{}: tensor {} not found", path(), name);
  return *view;
}

TensorToWrite make_f32_tensor(std::string name, std::vector<int64_t> shape,
                              const std::vector<float>& values) {
  TensorToWrite tensor{std::move(name), DType::f32, std::move(shape), {}};
  tensor.data.resize(values.size() * sizeof(float));
  std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps the insertion order, so the bytes depend only on the inputs.
  nlohmann::ordered_json header;
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    require(tensor.name != "__metadata__" && !header.contains(tensor.name),
            "{}: tensor name {} is reserved or repeated", path, tensor.name);
    uint64_t expected = 0;
    require(checked_byte_count(tensor.shape, dtype_size_bytes(tensor.dtype), &expected) &&
                expected == tensor.data.size(),
            "{}: tensor {} has {} bytes for shape {}", path, tensor.name, tensor.data.size(),
            shape_to_string(tensor.shape));
    header[tensor.name] = {{"dtype", std::string(dtype_name(tensor.dtype))},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + expected}}};
    offset += expected;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keep data 8-byte aligned
  std::vector<std::byte> out(8 + header_text.size() + offset);
  const uint64_t header_bytes = header_text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((header_bytes >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, header_text.data(), header_text.size());
  size_t position = 8 + header_text.size();
  for (const auto& tensor : tensors) {
    std::memcpy(out.data() + position, tensor.data.data(), tensor.data.size());
    position += tensor.data.size();
  }
  write_file_atomically(path, std::span<const std::byte>(out));
}

}  // namespace oscar
