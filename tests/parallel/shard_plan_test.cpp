// The shard plans of real model shapes: every head, KV head, MLP channel and vocabulary row is
// owned by exactly one rank (KV heads by tp / num_kv_heads ranks when replicated), each rank's
// query heads read only its KV heads, and splits that cannot be even are refused by name.
#include <gtest/gtest.h>

#include "parallel/shard_plan.h"
#include "util/error.h"

namespace oscar {
namespace {

struct Shape {
  const char* name;
  int64_t heads, kv_heads, intermediate, vocab;
};

ModelConfig config_of(const Shape& shape) {
  ModelConfig config;
  config.num_heads = shape.heads;
  config.num_kv_heads = shape.kv_heads;
  config.intermediate_size = shape.intermediate;
  config.vocab_size = shape.vocab;
  config.hidden_size = 1024;
  config.head_dim = 128;
  config.num_layers = 2;
  return config;
}

const Shape kShapes[] = {
    {"testbed", 8, 2, 1024, 8192},
    {"qwen3-8b", 32, 8, 12288, 151936},
    {"qwen3-32b", 64, 8, 25600, 151936},
    {"llama-3.1-70b", 64, 8, 28672, 128256},
};

TEST(ShardPlan, RanksCoverEveryHeadChannelAndRowOnce) {
  for (const Shape& shape : kShapes) {
    const ModelConfig config = config_of(shape);
    for (const int tp : {1, 2, 4, 8}) {
      std::vector<int> head_owners(size_t(shape.heads)), kv_owners(size_t(shape.kv_heads));
      int64_t channels = 0, rows = 0;
      for (int rank = 0; rank < tp; ++rank) {
        const ShardPlan plan = make_shard_plan(config, tp, rank);
        for (int64_t h = plan.first_head; h < plan.first_head + plan.num_heads; ++h) {
          ++head_owners[size_t(h)];
          // The query head's KV head is one the rank holds.
          const int64_t kv = h / config.group_size();
          EXPECT_GE(kv, plan.first_kv_head) << shape.name << " tp " << tp;
          EXPECT_LT(kv, plan.first_kv_head + plan.num_kv_heads) << shape.name << " tp " << tp;
        }
        for (int64_t h = plan.first_kv_head; h < plan.first_kv_head + plan.num_kv_heads; ++h) {
          ++kv_owners[size_t(h)];
        }
        EXPECT_EQ(plan.first_intermediate, channels);
        EXPECT_EQ(plan.first_vocab, rows);
        channels += plan.intermediate_size;
        rows += plan.vocab_size;
        const ModelConfig shard = shard_config(config, plan);
        EXPECT_EQ(shard.num_heads % shard.num_kv_heads, 0) << shape.name << " tp " << tp;
      }
      const int replicas = tp > shape.kv_heads ? tp / int(shape.kv_heads) : 1;
      for (const int owners : head_owners) EXPECT_EQ(owners, 1) << shape.name << " tp " << tp;
      for (const int owners : kv_owners) EXPECT_EQ(owners, replicas) << shape.name << " tp " << tp;
      EXPECT_EQ(channels, shape.intermediate);
      EXPECT_EQ(rows, shape.vocab);
    }
  }
}

TEST(ShardPlan, ReplicatedKvHeadsFollowTheQueryHeads) {
  // The testbed at tp 4: heads 0-1 and 2-3 read KV head 0, heads 4-5 and 6-7 KV head 1.
  const ModelConfig config = config_of(kShapes[0]);
  const int64_t expected_kv_head[] = {0, 0, 1, 1};
  for (int rank = 0; rank < 4; ++rank) {
    const ShardPlan plan = make_shard_plan(config, 4, rank);
    EXPECT_EQ(plan.first_head, 2 * rank);
    EXPECT_EQ(plan.num_heads, 2);
    EXPECT_EQ(plan.first_kv_head, expected_kv_head[rank]);
    EXPECT_EQ(plan.num_kv_heads, 1);
    EXPECT_EQ(plan.kv_head_replicas, 2);
  }
}

TEST(ShardPlan, UnevenSplitsNameTheField) {
  struct Bad {
    Shape shape;
    int tp;
    const char* field;
  };
  const Bad cases[] = {
      {{"heads", 8, 2, 1024, 8192}, 3, "num_attention_heads (8)"},
      {{"intermediate", 8, 2, 1020, 8192}, 8, "intermediate_size (1020)"},
      {{"vocab", 8, 2, 1024, 8190}, 4, "vocab_size (8190)"},
      {{"kv heads", 12, 3, 1536, 8192}, 2, "num_key_value_heads (3)"},
      {{"zero", 8, 2, 1024, 8192}, 0, "at least 1"},
  };
  for (const Bad& bad : cases) {
    try {
      check_tensor_parallel(config_of(bad.shape), bad.tp);
      ADD_FAILURE() << bad.shape.name << ": tp " << bad.tp << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad.field), std::string::npos) << e.what();
    }
  }
}

TEST(ShardPlan, RotationsAndFactorsFollowTheKvHeads) {
  // 2 layers x 4 KV heads of 2 x 2 "rotations" whose entries name their layer and head.
  KvRotations rotations;
  rotations.num_layers = 2;
  rotations.num_kv_heads = 4;
  rotations.head_dim = 2;
  for (int layer = 0; layer < 2; ++layer)
    for (int head = 0; head < 4; ++head)
      for (int i = 0; i < 4; ++i) {
        rotations.key.push_back(float(100 * layer + 10 * head + i));
        rotations.value.push_back(-float(100 * layer + 10 * head + i));
      }
  ModelConfig config = config_of({"four kv heads", 8, 4, 1024, 8192});
  config.head_dim = 2;
  const ShardPlan plan = make_shard_plan(config, 2, 1);  // KV heads 2 and 3
  const KvRotations shard = shard_rotations(rotations, plan);
  EXPECT_EQ(shard.num_kv_heads, 2);
  for (int layer = 0; layer < 2; ++layer)
    for (int head = 0; head < 2; ++head) {
      EXPECT_EQ(shard.key_rotation(layer, head)[3], float(100 * layer + 10 * (head + 2) + 3));
      EXPECT_EQ(shard.value_rotation(layer, head)[0], -float(100 * layer + 10 * (head + 2)));
    }
  EXPECT_EQ(shard_per_kv_head(rotations.key, 2, 4, plan), shard.key);
  EXPECT_THROW(shard_per_kv_head(std::vector<float>(7), 2, 4, plan), Error);
}

}  // namespace
}  // namespace oscar
