#include "backend/backend.h"

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "model/model_fingerprint.h"
#include "model/model_weights.h"
#include "parallel/communicator.h"
#include "quant/kv_rotations.h"
#include "quant/published_rotations.h"
#include "util/error.h"

#ifdef OSCAR_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace oscar {
namespace {

// The rotation a KV method applies: none, Hadamard (QuaRot) or the calibrated file (OSCAR).
std::optional<KvRotations> rotations_for(const ModelWeights& weights, const KvCacheConfig& kv) {
  if (!kv.rotates_keys()) return std::nullopt;
  const ModelConfig& config = weights.config;
  if (kv.method == KvMethod::quarot) {
    return hadamard_rotations(config.num_layers, config.num_kv_heads, config.head_dim);
  }
  if (kv.reads_published_rotations()) {
    return load_published_kv_rotations(kv.published_key_rotations_path,
                                       kv.published_value_rotations_path,
                                       model_fingerprint(weights));
  }
  return load_kv_rotations(kv.rotations_path, model_fingerprint(weights));
}

}  // namespace

bool cuda_available() {
#ifdef OSCAR_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

int64_t device_free_bytes(DeviceKind device) {
  if (device == DeviceKind::cuda) {
#ifdef OSCAR_HAVE_CUDA
    return cuda_free_bytes();
#else
    fail("--device cuda: this oscar was built without the CUDA backend");
#endif
  }
  return int64_t(::sysconf(_SC_AVPHYS_PAGES)) * int64_t(::sysconf(_SC_PAGESIZE));
}

void use_gpu_of_local_rank(int local_rank) {
#ifdef OSCAR_HAVE_CUDA
  use_cuda_device(local_rank);
#else
  fail("--device cuda: this oscar was built without the CUDA backend (local rank {})", local_rank);
#endif
}

UniqueId make_gpu_group_id() {
#ifdef OSCAR_HAVE_CUDA
  return make_cuda_group_id();
#else
  fail("--device cuda: this oscar was built without the CUDA backend");
#endif
}

DeviceKind default_device() {
  return cuda_available() ? DeviceKind::cuda : DeviceKind::cpu;
}

std::unique_ptr<Backend> make_backend(const ModelWeights& weights, const BackendOptions& options) {
  validate(options.kv, weights.config.head_dim);
  const std::optional<KvRotations> rotations = rotations_for(weights, options.kv);
  const KvRotations* rotation_pointer = rotations ? &*rotations : nullptr;
  if (options.device == DeviceKind::cuda) {
#ifdef OSCAR_HAVE_CUDA
    return make_cuda_backend(weights, options, rotation_pointer);
#else
    fail("--device cuda: this oscar was built without the CUDA backend (nvcc was not found)");
#endif
  }
  return std::make_unique<CpuBackend>(weights, options, rotation_pointer);
}

}  // namespace oscar
