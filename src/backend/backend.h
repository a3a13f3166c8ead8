#pragma once
// The one seam that varies: a Backend runs the model on one device (cpu or cuda). The engine
// hands it a step: for each sequence, the new tokens (a prefill chunk or one decode token) and
// its page table, already reserved for them. The backend writes their K/V into the pages,
// quantizes the tokens that leave the recent window, runs attention under the decode rule
// (kvcache/kv_cache_config.h) and returns logits.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvcache/kv_cache_config.h"
#include "kvcache/page_layout.h"
#include "kvcache/sequence_pages.h"
#include "model/model_config.h"
#include "parallel/gpu_group.h"

namespace oscar {

struct ModelWeights;
struct KvRotations;
class Communicator;

struct SequenceStep {
  std::span<const int32_t> tokens;  // the new tokens; positions continue from kv->num_tokens()
  const SequencePages* kv = nullptr;
  bool all_logits = false;  // logits for every new token (perplexity), else only the last
};

// The logits a step returns: a view of the backend's storage, valid until its next forward (the
// CUDA backend's is pinned host memory, which a step's copy fills at the link's speed).
struct StepLogits {
  std::span<const float> values;  // rows x vocab_size, in step order
  int64_t rows = 0;
  int64_t vocab_size = 0;
  const float* row(int64_t i) const { return values.data() + i * vocab_size; }
};

// Post-RoPE attention inputs of one layer for the step's new tokens, float32, before any KV
// rotation (calibration and attention-error analysis read these).
struct AttentionInputs {
  int64_t layer = 0;
  int64_t num_tokens = 0;
  const float* queries = nullptr;  // [tokens][num_heads][head_dim]
  const float* keys = nullptr;     // [tokens][num_kv_heads][head_dim]
  const float* values = nullptr;   // [tokens][num_kv_heads][head_dim]
};

class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  virtual void observe(const AttentionInputs& inputs) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string device_name() const = 0;
  virtual const ModelConfig& model_config() const = 0;
  virtual const KvCacheConfig& kv_config() const = 0;
  virtual const PageLayout& page_layout() const = 0;
  virtual KvPageCounts kv_capacity() const = 0;

  // Runs one step. `observer`, when given, sees every layer's attention inputs.
  virtual void forward(std::span<const SequenceStep> steps, StepLogits& logits,
                       ActivationObserver* observer = nullptr) = 0;
  // Why this backend can run no more steps (a tensor-parallel rank failed or left), or empty.
  virtual std::string failure() const { return {}; }
};

enum class DeviceKind { cpu, cuda };

struct BackendOptions {
  DeviceKind device = DeviceKind::cpu;
  KvCacheConfig kv;
  KvPageCounts capacity;  // pages to allocate
  int num_threads = 0;    // CPU threads; 0 = all cores
  // Tensor parallelism: this rank's group (parallel/communicator.h). The backend runs the rank's
  // shard (parallel/shard_plan.h) and returns the whole vocabulary's logits. Null: one rank. The
  // CUDA backend runs its collectives through host memory with it (ranks that share a GPU), or
  // over NCCL with gpu_group instead.
  Communicator* communicator = nullptr;
  // Tensor parallelism on GPUs: the NCCL group of this rank (the CUDA backend joins it on the
  // current device). Empty: one rank.
  std::optional<GpuGroup> gpu_group;
};

// Builds the backend for `options.device`; folds the value rotation into the weights when the KV
// method rotates (rotations: Hadamard for quarot, the calibrated file for oscar).
std::unique_ptr<Backend> make_backend(const ModelWeights& weights, const BackendOptions& options);

bool cuda_available();
// Memory free for the KV pool on a device: available host memory, or free GPU memory.
int64_t device_free_bytes(DeviceKind device);
DeviceKind default_device();  // cuda when a GPU is present
// A tensor-parallel rank on GPUs: the calling thread uses its node's GPU `local_rank` (Error naming
// the rank when the node has fewer GPUs); rank 0 makes the NCCL group's unique id.
void use_gpu_of_local_rank(int local_rank);
UniqueId make_gpu_group_id();

}  // namespace oscar
