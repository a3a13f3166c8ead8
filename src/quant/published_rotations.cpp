#include "quant/published_rotations.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>

#include "format/torch_archive.h"
#include "util/error.h"

namespace oscar {
namespace {

// One file's rotations: [layers][heads or 1][D][D] and eigenvalues [layers][heads or 1][D].
struct PublishedFile {
  int64_t per_layer = 1;  // rotations per layer: 1 (format_version 1) or the KV heads
  std::vector<float> rotations;
  std::vector<float> eigenvalues;  // empty when the file holds none
  std::string objective;
};

int64_t layer_key(const std::string& path, const PickleValue& key) {
  if (key.kind == PickleValue::Kind::integer) return key.integer;
  int64_t layer = -1;
  const auto [end, error] =
      std::from_chars(key.text.data(), key.text.data() + key.text.size(), layer);
  require(error == std::errc() && end == key.text.data() + key.text.size(),
          "{}: layers: key '{}' is not a layer number", path, key.text);
  return layer;
}

const TorchTensor& tensor_entry(const std::string& path, int64_t layer, const PickleValue& entry,
                                const char* name) {
  const PickleValue* value = entry.find(name);
  require(value != nullptr && value->kind == PickleValue::Kind::tensor,
          "{}: layer {}: no tensor '{}'", path, layer, name);
  return *value->tensor;
}

PublishedFile read_published_file(const std::string& path, const ModelFingerprint& model) {
  const PickleValue top = read_torch_file(path);
  require(top.kind == PickleValue::Kind::dict, "{}: holds a {}, expected a dict", path,
          kind_name(top.kind));
  const PickleValue* version = top.find("format_version");
  require(version != nullptr && version->kind == PickleValue::Kind::integer &&
              (version->integer == 1 || version->integer == 2),
          "{}: format_version must be 1 (per layer) or 2 (per KV head)", path);
  const PickleValue* layers = top.find("layers");
  require(layers != nullptr && layers->kind == PickleValue::Kind::dict, "{}: no dict 'layers'",
          path);
  std::map<int64_t, const PickleValue*> by_layer;
  for (size_t i = 0; i + 1 < layers->items.size(); i += 2) {
    const int64_t layer = layer_key(path, layers->items[i]);
    require(layer >= 0 && layer < model.num_layers, "{}: layer {} is outside the model's {} layers",
            path, layer, model.num_layers);
    require(by_layer.emplace(layer, &layers->items[i + 1]).second, "{}: layer {} appears twice",
            path, layer);
  }
  require(int64_t(by_layer.size()) == model.num_layers, "{}: holds {} layers, the model has {}",
          path, by_layer.size(), model.num_layers);
  PublishedFile file;
  if (const PickleValue* objective = top.find("objective");
      objective && objective->kind == PickleValue::Kind::string) {
    file.objective = objective->text;
  }
  const int64_t d = model.head_dim;
  const bool per_head = version->integer == 2;
  file.per_layer = per_head ? model.num_kv_heads : 1;
  const std::vector<int64_t> rotation_shape =
      per_head ? std::vector<int64_t>{model.num_kv_heads, d, d} : std::vector<int64_t>{d, d};
  const std::vector<int64_t> eigen_shape =
      per_head ? std::vector<int64_t>{model.num_kv_heads, d} : std::vector<int64_t>{d};
  for (const auto& [layer, entry] : by_layer) {
    require(entry->kind == PickleValue::Kind::dict, "{}: layer {} is a {}, expected a dict", path,
            layer, kind_name(entry->kind));
    if (const PickleValue* id = entry->find("layer_id")) {
      require(layer_key(path, *id) == layer, "{}: layer {} records layer_id {}", path, layer,
              id->kind == PickleValue::Kind::integer ? std::to_string(id->integer) : id->text);
    }
    const TorchTensor& rotation = tensor_entry(path, layer, *entry, "rotation");
    require(rotation.shape == rotation_shape,
            "{}: layer {}: rotation of shape {}, expected {} (format_version {})", path, layer,
            shape_to_string(rotation.shape), shape_to_string(rotation_shape), version->integer);
    const std::vector<float> matrices = rotation.to_float_vector();
    for (int64_t h = 0; h < file.per_layer; ++h) {
      const float* matrix = matrices.data() + h * d * d;
      require(std::all_of(matrix, matrix + d * d, [](float x) { return std::isfinite(x); }),
              "{}: layer {}: rotation {} holds a non-finite value", path, layer, h);
      const double error = orthogonality_error(matrix, d);
      require(error <= kMaxRotationOrthogonalityError,
              "{}: layer {}: rotation {} is not orthogonal (max |R R^T - I| = {:.3g})", path, layer,
              h, error);
    }
    file.rotations.insert(file.rotations.end(), matrices.begin(), matrices.end());
    const PickleValue* eigen = entry->find("eigenvalues");
    require(eigen == nullptr || eigen->kind == PickleValue::Kind::tensor,
            "{}: layer {}: eigenvalues are a {}", path, layer,
            kind_name(eigen ? eigen->kind : PickleValue::Kind::none));
    require(layer == 0 || (eigen != nullptr) == !file.eigenvalues.empty(),
            "{}: layer {}: eigenvalues present for some layers only", path, layer);
    if (eigen == nullptr) continue;
    require(eigen->tensor->shape == eigen_shape,
            "{}: layer {}: eigenvalues of shape {}, expected {}", path, layer,
            shape_to_string(eigen->tensor->shape), shape_to_string(eigen_shape));
    std::vector<float> values = eigen->tensor->to_float_vector();
    for (int64_t h = 0; h < file.per_layer; ++h) {
      std::sort(values.begin() + h * d, values.begin() + (h + 1) * d, std::greater<>());
    }
    file.eigenvalues.insert(file.eigenvalues.end(), values.begin(), values.end());
  }
  return file;
}

// Repeats each layer's rows `count` times: [layers][1][row] -> [layers][count][row].
std::vector<float> repeat_per_head(const std::vector<float>& per_layer, int64_t layers,
                                   int64_t count) {
  if (per_layer.empty()) return {};
  const size_t row = per_layer.size() / size_t(layers);
  std::vector<float> out;
  out.reserve(per_layer.size() * size_t(count));
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (int64_t h = 0; h < count; ++h) {
      out.insert(out.end(), per_layer.begin() + long(size_t(layer) * row),
                 per_layer.begin() + long(size_t(layer + 1) * row));
    }
  }
  return out;
}

}  // namespace

KvRotations load_published_kv_rotations(const std::string& key_path, const std::string& value_path,
                                        const ModelFingerprint& model) {
  PublishedFile key = read_published_file(key_path, model);
  PublishedFile value = read_published_file(value_path, model);
  KvRotations r;
  r.num_layers = model.num_layers;
  r.num_kv_heads = model.num_kv_heads;
  r.head_dim = model.head_dim;
  r.per_head = (key.per_layer > 1 || value.per_layer > 1) && model.num_kv_heads > 1;
  for (PublishedFile* file : {&key, &value}) {
    if (r.per_head && file->per_layer == 1) {
      file->rotations = repeat_per_head(file->rotations, r.num_layers, r.num_kv_heads);
      file->eigenvalues = repeat_per_head(file->eigenvalues, r.num_layers, r.num_kv_heads);
    }
  }
  r.key = std::move(key.rotations);
  r.value = std::move(value.rotations);
  r.key_eigenvalues = std::move(key.eigenvalues);
  r.value_eigenvalues = std::move(value.eigenvalues);
  r.metadata = {{"method", "oscar"},
                {"source", "published"},
                {"key_file", key_path},
                {"value_file", value_path},
                {"key_objective", key.objective},
                {"value_objective", value.objective},
                {"rotation_scope", r.per_head ? "per_head" : "per_layer"}};
  return r;
}

}  // namespace oscar
