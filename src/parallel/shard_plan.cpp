#include "parallel/shard_plan.h"

#include "util/error.h"

namespace oscar {

void check_tensor_parallel(const ModelConfig& config, int tensor_parallel_size) {
  const int64_t tp = tensor_parallel_size;
  require(tp >= 1, "--tensor-parallel-size must be at least 1 (got {})", tp);
  auto require_divides = [&](int64_t value, const char* field) {
    require(value % tp == 0,
            "--tensor-parallel-size {} does not divide the model's {} ({}): each rank needs an "
            "equal share",
            tp, field, value);
  };
  require_divides(config.num_heads, "num_attention_heads");
  require_divides(config.intermediate_size, "intermediate_size");
  require_divides(config.vocab_size, "vocab_size");
  require(config.num_kv_heads % tp == 0 || tp % config.num_kv_heads == 0,
          "--tensor-parallel-size {} neither divides the model's num_key_value_heads ({}) nor is a "
          "multiple of it: the KV heads can be neither split nor replicated evenly",
          tp, config.num_kv_heads);
}

ShardPlan make_shard_plan(const ModelConfig& config, int tensor_parallel_size, int rank) {
  check_tensor_parallel(config, tensor_parallel_size);
  const int64_t tp = tensor_parallel_size;
  require(rank >= 0 && rank < tp, "rank {} outside a tensor-parallel group of {}", rank, tp);
  ShardPlan plan;
  plan.rank = rank;
  plan.world_size = tensor_parallel_size;
  plan.num_heads = config.num_heads / tp;
  plan.first_head = rank * plan.num_heads;
  if (config.num_kv_heads >= tp) {
    plan.num_kv_heads = config.num_kv_heads / tp;
    plan.first_kv_head = rank * plan.num_kv_heads;
  } else {
    // Each rank's query heads lie in one KV head's group (num_heads / tp divides the group size,
    // since tp is a multiple of num_kv_heads): the rank holds that KV head.
    plan.num_kv_heads = 1;
    plan.kv_head_replicas = tp / config.num_kv_heads;
    plan.first_kv_head = plan.first_head / config.group_size();
  }
  plan.intermediate_size = config.intermediate_size / tp;
  plan.first_intermediate = rank * plan.intermediate_size;
  plan.vocab_size = config.vocab_size / tp;
  plan.first_vocab = rank * plan.vocab_size;
  return plan;
}

ModelConfig shard_config(const ModelConfig& config, const ShardPlan& plan) {
  ModelConfig shard = config;
  shard.num_heads = plan.num_heads;
  shard.num_kv_heads = plan.num_kv_heads;
  shard.intermediate_size = plan.intermediate_size;
  shard.vocab_size = plan.vocab_size;
  return shard;
}

KvRotations shard_rotations(const KvRotations& rotations, const ShardPlan& plan) {
  if (!rotations.per_head) return rotations;
  require(plan.first_kv_head + plan.num_kv_heads <= rotations.num_kv_heads,
          "rotations of {} KV heads cannot give rank {} its heads {}..{}", rotations.num_kv_heads,
          plan.rank, plan.first_kv_head, plan.first_kv_head + plan.num_kv_heads - 1);
  KvRotations shard = rotations;
  shard.num_kv_heads = plan.num_kv_heads;
  const int64_t d = rotations.head_dim;
  shard.key = shard_per_kv_head(rotations.key, rotations.num_layers, rotations.num_kv_heads, plan);
  shard.value =
      shard_per_kv_head(rotations.value, rotations.num_layers, rotations.num_kv_heads, plan);
  if (!rotations.key_eigenvalues.empty()) {
    shard.key_eigenvalues = shard_per_kv_head(rotations.key_eigenvalues, rotations.num_layers,
                                              rotations.num_kv_heads, plan);
  }
  if (!rotations.value_eigenvalues.empty()) {
    shard.value_eigenvalues = shard_per_kv_head(rotations.value_eigenvalues, rotations.num_layers,
                                                rotations.num_kv_heads, plan);
  }
  require(int64_t(shard.key.size()) == rotations.num_layers * plan.num_kv_heads * d * d,
          "sharded key rotations have {} values, expected {}", shard.key.size(),
          rotations.num_layers * plan.num_kv_heads * d * d);
  return shard;
}

std::vector<float> shard_per_kv_head(const std::vector<float>& values, int64_t num_layers,
                                     int64_t num_kv_heads, const ShardPlan& plan) {
  const int64_t blocks = num_layers * num_kv_heads;
  require(blocks > 0 && int64_t(values.size()) % blocks == 0,
          "{} values are not {} layers x {} KV heads of equal blocks", values.size(), num_layers,
          num_kv_heads);
  require(plan.first_kv_head + plan.num_kv_heads <= num_kv_heads,
          "rank {}'s KV heads {}..{} lie outside the model's {}", plan.rank, plan.first_kv_head,
          plan.first_kv_head + plan.num_kv_heads - 1, num_kv_heads);
  const size_t block = values.size() / size_t(blocks);
  std::vector<float> shard;
  shard.reserve(size_t(num_layers * plan.num_kv_heads) * block);
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    const auto first = values.begin() + long((layer * num_kv_heads + plan.first_kv_head) * block);
    shard.insert(shard.end(), first, first + long(plan.num_kv_heads * block));
  }
  return shard;
}

}  // namespace oscar
