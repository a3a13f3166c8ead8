#pragma once
// Orthogonal rotations of the key and value head spaces, per layer and either per KV head or shared
// by the layer's heads. A row vector x is stored rotated as x R; keys are rotated at write time and
// queries at read time (q R)(k R)^T = q k^T; the value rotation is folded into W_v and W_o.
//
// File format (safetensors, written by `oscar calibrate`): per layer i
//   layers.{i}.key.rotation      F32 [kv_heads or 1, D, D]
//   layers.{i}.key.eigenvalues   F32 [kv_heads or 1, D]
//   layers.{i}.value.rotation    F32 [kv_heads or 1, D, D]
//   layers.{i}.value.eigenvalues F32 [kv_heads or 1, D]
// and metadata: oscar_format_version, method, group_size, clip_ratio_k, clip_ratio_v,
// calibration_tokens, rotation_scope ("per_head" or "per_layer"), and the model it was calibrated
// on (ModelFingerprint): model, num_layers, num_kv_heads, head_dim, model_config_hash,
// model_weights_hash.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace oscar {

struct KvRotations {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool per_head = true;                  // false: one rotation per layer, shared by its KV heads
  std::vector<float> key;                // [layers][heads or 1][D][D], row-major
  std::vector<float> value;              // same shape
  std::vector<float> key_eigenvalues;    // [layers][heads or 1][D], may be empty
  std::vector<float> value_eigenvalues;  // same
  std::map<std::string, std::string> metadata;

  int64_t rotations_per_layer() const { return per_head ? num_kv_heads : 1; }
  const float* key_rotation(int64_t layer, int64_t kv_head) const;
  const float* value_rotation(int64_t layer, int64_t kv_head) const;
  float* key_rotation(int64_t layer, int64_t kv_head);
  float* value_rotation(int64_t layer, int64_t kv_head);
  // Layer `layer`'s key rotations of KV heads 0..kv_heads-1, [kv_heads][D][D] (a rotation shared
  // by the layer's heads repeated; a rank's share of them when the heads are sharded).
  std::vector<float> layer_key_rotations(int64_t layer, int64_t kv_heads) const;
};

inline constexpr const char* kRotationsFormatVersion = "1";
// The name `oscar calibrate` gives the file beside the model, where every command looks for it
// when no --kv-rotations is given.
inline constexpr const char* kRotationsFileName = "oscar_rotations.safetensors";

// QuaRot: the normalised Hadamard matrix for every layer and head.
KvRotations hadamard_rotations(int64_t num_layers, int64_t num_kv_heads, int64_t head_dim);

// The model a rotations file belongs to: the shapes its rotations have, and hashes of the model's
// config and weights (model/model_fingerprint.h), which tell apart models of the same shapes.
struct ModelFingerprint {
  std::string name;  // the model directory, for messages
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  std::string config_hash;
  std::string weights_hash;
};

// Records `model` in the metadata that save_kv_rotations writes.
void record_model(const ModelFingerprint& model, KvRotations& rotations);
// Reads only the file's metadata; throws Error naming the file and both models when the file was
// calibrated on another model (or records none: made before the weights were recorded).
void check_rotations_model(const std::string& path, const ModelFingerprint& model);

// Reads and validates a rotations file: the model it was made for (check_rotations_model), shapes,
// finite values and orthogonality (max |R R^T - I| <= 1e-3). Errors name the file and the tensor.
KvRotations load_kv_rotations(const std::string& path, const ModelFingerprint& model);
void save_kv_rotations(const std::string& path, const KvRotations& rotations);

// The largest max |R R^T - I| a rotation read from a file may have.
inline constexpr double kMaxRotationOrthogonalityError = 1e-3;
// max |R R^T - I| of a D x D row-major matrix.
double orthogonality_error(const float* rotation, int64_t head_dim);

}  // namespace oscar
