#pragma once
// The CPU reference backend: float32 math from the checkpoint's weights, multi-threaded with
// OpenMP, the KV cache in host memory. Every other backend is checked against this one. Given a
// communicator it runs one tensor-parallel rank's shard (parallel/shard_plan.h): its heads, KV
// heads, MLP channels and vocabulary, with the group's collectives at the sharding points.
#include <memory>
#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_kv_store.h"
#include "backend/cpu/cpu_math.h"
#include "model/model_weights.h"
#include "parallel/communicator.h"
#include "parallel/shard_plan.h"
#include "quant/kv_rotations.h"

namespace oscar {

class CpuBackend final : public Backend {
 public:
  // `rotations` (may be null, the whole model's): key rotations applied at write/read time, value
  // rotations folded into W_v and W_o here; a rank keeps its KV heads' share.
  CpuBackend(const ModelWeights& weights, const BackendOptions& options,
             const KvRotations* rotations);

  std::string device_name() const override;
  const ModelConfig& model_config() const override { return config_; }
  const KvCacheConfig& kv_config() const override { return kv_; }
  const PageLayout& page_layout() const override { return layout_; }  // this rank's KV heads
  KvPageCounts kv_capacity() const override { return capacity_; }
  void forward(std::span<const SequenceStep> steps, StepLogits& logits,
               ActivationObserver* observer) override;

 private:
  struct Layer {
    std::vector<float> input_norm, post_attention_norm, q_norm, k_norm;
    CpuMatrix q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj;
    std::vector<float> key_rotations;  // [rank's kv heads][D][D]; empty: keys not rotated
  };
  struct StepRows;  // per-step bookkeeping (cpu_backend.cpp)

  void attention_block(int64_t layer_index, const StepRows& rows,
                       std::span<const SequenceStep> steps, float* hidden,
                       ActivationObserver* observer);
  void mlp_block(const Layer& layer, int64_t tokens, float* hidden);
  void apply_qk_norm_and_rope(const Layer& layer, const StepRows& rows, float* q, float* k) const;
  void compute_logits(const StepRows& rows, std::span<const SequenceStep> steps,
                      const float* hidden, StepLogits& logits);
  void embed(std::span<const SequenceStep> steps, float* hidden) const;
  // Sums a row-parallel layer's partial outputs over the ranks (nothing with one rank).
  void all_reduce(std::vector<float>& partial);

  ModelConfig config_;  // the whole model's
  ShardPlan plan_;
  ModelConfig shard_;  // the shapes this rank runs (config_ itself with one rank)
  Communicator* communicator_ = nullptr;
  KvCacheConfig kv_;
  PageLayout layout_;
  KvPageCounts capacity_;
  std::vector<Layer> layers_;
  CpuMatrix embed_tokens_;  // this rank's vocabulary rows
  std::optional<CpuMatrix> untied_lm_head_;
  std::vector<float> shard_logits_;  // [rows][this rank's vocabulary], before the gather
  std::vector<float> final_norm_;
  std::vector<float> rope_inverse_frequencies_;
  CpuKvStore store_;
  std::vector<float> logits_;  // the last step's, which StepLogits views
};

}  // namespace oscar
