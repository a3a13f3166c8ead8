#include "quant/kv_rotations.h"

#include <charconv>
#include <cmath>

#include <fmt/ranges.h>

#include "format/safetensors.h"
#include "quant/hadamard.h"
#include "util/error.h"

namespace oscar {
namespace {

size_t matrix_offset(const KvRotations& r, int64_t layer, int64_t kv_head) {
  require(layer >= 0 && layer < r.num_layers && kv_head >= 0 && kv_head < r.num_kv_heads,
          "rotation index (layer {}, kv head {}) out of range", layer, kv_head);
  const int64_t slot = layer * r.rotations_per_layer() + (r.per_head ? kv_head : 0);
  return size_t(slot * r.head_dim * r.head_dim);
}

std::string tensor_name(int64_t layer, const char* kind, const char* what) {
  return fmt::format("layers.{}.{}.{}", layer, kind, what);
}

// The model a file's metadata records (record_model).
ModelFingerprint recorded_model(const std::string& path,
                                const std::map<std::string, std::string>& metadata) {
  auto text = [&](const char* key) -> const std::string& {
    const auto it = metadata.find(key);
    require(it != metadata.end(),
            "{}: does not record the model it was calibrated on (no metadata '{}': an older `oscar "
            "calibrate` made it)",
            path, key);
    return it->second;
  };
  auto integer = [&](const char* key) {
    const std::string& value = text(key);
    int64_t parsed = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    require(error == std::errc() && end == value.data() + value.size() && parsed > 0,
            "{}: metadata {} is '{}', expected a positive integer", path, key, value);
    return parsed;
  };
  return {text("model"),       integer("num_layers"),     integer("num_kv_heads"),
          integer("head_dim"), text("model_config_hash"), text("model_weights_hash")};
}

std::string describe(const ModelFingerprint& m) {
  return fmt::format("{} ({} layers, {} KV heads, head_dim {}, config hash {}, weights hash {})",
                     m.name, m.num_layers, m.num_kv_heads, m.head_dim, m.config_hash,
                     m.weights_hash);
}

void check_model(const std::string& path, const std::map<std::string, std::string>& metadata,
                 const ModelFingerprint& model) {
  const ModelFingerprint recorded = recorded_model(path, metadata);
  std::vector<std::string> differences;
  if (recorded.num_layers != model.num_layers) differences.push_back("layer count");
  if (recorded.num_kv_heads != model.num_kv_heads) differences.push_back("KV head count");
  if (recorded.head_dim != model.head_dim) differences.push_back("head_dim");
  if (recorded.config_hash != model.config_hash) differences.push_back("config hash");
  if (recorded.weights_hash != model.weights_hash) differences.push_back("weights hash");
  require(differences.empty(),
          "{}: rotations of another model ({} {}): calibrated on {}, not on {}", path,
          fmt::join(differences, ", "), differences.size() == 1 ? "differs" : "differ",
          describe(recorded), describe(model));
}

}  // namespace

const float* KvRotations::key_rotation(int64_t layer, int64_t kv_head) const {
  return key.data() + matrix_offset(*this, layer, kv_head);
}
const float* KvRotations::value_rotation(int64_t layer, int64_t kv_head) const {
  return value.data() + matrix_offset(*this, layer, kv_head);
}
float* KvRotations::key_rotation(int64_t layer, int64_t kv_head) {
  return key.data() + matrix_offset(*this, layer, kv_head);
}
float* KvRotations::value_rotation(int64_t layer, int64_t kv_head) {
  return value.data() + matrix_offset(*this, layer, kv_head);
}

std::vector<float> KvRotations::layer_key_rotations(int64_t layer, int64_t kv_heads) const {
  std::vector<float> rotations;
  rotations.reserve(size_t(kv_heads * head_dim * head_dim));
  for (int64_t h = 0; h < kv_heads; ++h) {
    const float* r = key_rotation(layer, h);
    rotations.insert(rotations.end(), r, r + head_dim * head_dim);
  }
  return rotations;
}

KvRotations hadamard_rotations(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim) {
  const std::vector<double> h = hadamard_matrix(head_dim);
  KvRotations r;
  r.num_layers = num_layers;
  r.num_kv_heads = num_kv_heads;
  r.head_dim = head_dim;
  r.per_head = false;
  r.key.reserve(size_t(num_layers) * h.size());
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    for (const double v : h) r.key.push_back(float(v));
  }
  r.value = r.key;
  r.metadata["method"] = "quarot";
  return r;
}

double orthogonality_error(const float* rotation, int64_t d) {
  double worst = 0;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < d; ++k) dot += double(rotation[i * d + k]) * rotation[j * d + k];
      worst = std::max(worst, std::abs(dot - (i == j ? 1.0 : 0.0)));
    }
  }
  return worst;
}

void record_model(const ModelFingerprint& model, KvRotations& rotations) {
  rotations.metadata["model"] = model.name;
  rotations.metadata["num_layers"] = std::to_string(model.num_layers);
  rotations.metadata["num_kv_heads"] = std::to_string(model.num_kv_heads);
  rotations.metadata["head_dim"] = std::to_string(model.head_dim);
  rotations.metadata["model_config_hash"] = model.config_hash;
  rotations.metadata["model_weights_hash"] = model.weights_hash;
}

void check_rotations_model(const std::string& path, const ModelFingerprint& model) {
  check_model(path, SafetensorsFile::open(path)->metadata(), model);
}

KvRotations load_kv_rotations(const std::string& path, const ModelFingerprint& expected) {
  const auto file = SafetensorsFile::open(path);
  const auto& meta = file->metadata();
  const auto version = meta.find("oscar_format_version");
  require(version != meta.end(), "{}: not an oscar rotations file (no oscar_format_version)", path);
  require(version->second == kRotationsFormatVersion,
          "{}: rotations format version {} is not supported (expected {})", path, version->second,
          kRotationsFormatVersion);
  check_model(path, meta, expected);
  KvRotations r;
  r.num_layers = expected.num_layers;
  r.num_kv_heads = expected.num_kv_heads;
  r.head_dim = expected.head_dim;
  r.metadata = meta;
  const int64_t d = expected.head_dim;
  const TensorView& first = file->get(tensor_name(0, "key", "rotation"));
  require(first.shape.size() == 3 && (first.shape[0] == 1 || first.shape[0] == r.num_kv_heads),
          "{}: tensor {}: expected shape [{} or 1, {}, {}], found {}", path, first.name,
          r.num_kv_heads, d, d, shape_to_string(first.shape));
  r.per_head = first.shape[0] == r.num_kv_heads && r.num_kv_heads > 1;
  const int64_t count = r.rotations_per_layer();
  for (int64_t layer = 0; layer < r.num_layers; ++layer) {
    for (const char* kind : {"key", "value"}) {
      const bool is_key = std::string(kind) == "key";
      const TensorView& rotation = file->get(tensor_name(layer, kind, "rotation"));
      require(rotation.dtype == DType::f32 && rotation.shape == std::vector<int64_t>{count, d, d},
              "{}: tensor {}: expected F32 [{}, {}, {}], found {} {}", path, rotation.name, count,
              d, d, dtype_name(rotation.dtype), shape_to_string(rotation.shape));
      std::vector<float> values = to_float_vector(rotation);
      for (int64_t h = 0; h < count; ++h) {
        const float* matrix = values.data() + h * d * d;
        for (int64_t i = 0; i < d * d; ++i) {
          require(std::isfinite(matrix[i]), "{}: tensor {}: head {} holds a non-finite value", path,
                  rotation.name, h);
        }
        const double error = orthogonality_error(matrix, d);
        require(error <= kMaxRotationOrthogonalityError,
                "{}: tensor {}: head {} is not orthogonal (max |R R^T - I| = {:.3g})", path,
                rotation.name, h, error);
      }
      auto& target = is_key ? r.key : r.value;
      target.insert(target.end(), values.begin(), values.end());
      if (const TensorView* eigen = file->find(tensor_name(layer, kind, "eigenvalues"))) {
        require(eigen->dtype == DType::f32 && eigen->shape == std::vector<int64_t>{count, d},
                "{}: tensor {}: expected F32 [{}, {}], found {}", path, eigen->name, count, d,
                shape_to_string(eigen->shape));
        const auto eigenvalues = to_float_vector(*eigen);
        auto& eigen_target = is_key ? r.key_eigenvalues : r.value_eigenvalues;
        eigen_target.insert(eigen_target.end(), eigenvalues.begin(), eigenvalues.end());
      }
    }
  }
  require(file->find(tensor_name(r.num_layers, "key", "rotation")) == nullptr,
          "{}: holds rotations for more than the model's {} layers", path, r.num_layers);
  return r;
}

void save_kv_rotations(const std::string& path, const KvRotations& r) {
  const int64_t count = r.rotations_per_layer();
  const int64_t d = r.head_dim;
  const size_t matrices = size_t(count * d * d);
  const size_t vectors = size_t(count * d);
  std::vector<TensorToWrite> tensors;
  for (int64_t layer = 0; layer < r.num_layers; ++layer) {
    for (const char* kind : {"key", "value"}) {
      const bool is_key = std::string(kind) == "key";
      const auto& rotation = is_key ? r.key : r.value;
      const auto& eigen = is_key ? r.key_eigenvalues : r.value_eigenvalues;
      tensors.push_back(make_f32_tensor(
          tensor_name(layer, kind, "rotation"), {count, d, d},
          std::vector<float>(rotation.begin() + long(size_t(layer) * matrices),
                             rotation.begin() + long(size_t(layer + 1) * matrices))));
      if (!eigen.empty()) {
        tensors.push_back(
            make_f32_tensor(tensor_name(layer, kind, "eigenvalues"), {count, d},
                            std::vector<float>(eigen.begin() + long(size_t(layer) * vectors),
                                               eigen.begin() + long(size_t(layer + 1) * vectors))));
      }
    }
  }
  auto metadata = r.metadata;
  metadata["oscar_format_version"] = kRotationsFormatVersion;
  metadata["rotation_scope"] = r.per_head ? "per_head" : "per_layer";
  write_safetensors(path, tensors, metadata);
}

}  // namespace oscar
