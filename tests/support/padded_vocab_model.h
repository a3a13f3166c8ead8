#pragma once
// A copy of the testbed whose config says more ids than its tokenizer has, as real checkpoints do
// (Qwen3's config says 151,936 ids, its tokenizer has 151,669). The padding's embedding rows, which
// the tied embeddings also make its output rows, are +-kPaddingScale along each hidden channel:
// whatever the final hidden state, one of them has by far the largest logit, so a sampler that does
// not mask the padding draws from it at every step.
// Header-only: only the rooms whose tests link the format library include it.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "support/test_paths.h"
#include "util/file_io.h"
#include "util/half.h"

namespace oscar::testing {

inline constexpr int64_t kTestbedVocabulary = 8192;  // the testbed's tokenizer and config
inline constexpr float kPaddingScale = 100.0f;

// The padded model's directory; its config's vocab_size is 8192 + 2 * hidden_size.
inline std::string make_padded_vocab_model(const std::string& label) {
  const std::string dir = copy_testbed_model(label);
  const auto source = SafetensorsFile::open(testbed_model_dir() + "/model.safetensors");
  std::vector<TensorToWrite> tensors;
  int64_t padded_vocabulary = 0;
  for (const TensorView& view : source->tensors()) {
    TensorToWrite tensor{view.name, view.dtype, view.shape, {view.data.begin(), view.data.end()}};
    if (view.name == "model.embed_tokens.weight") {  // bf16 [vocab, hidden]
      const int64_t hidden = view.shape[1];
      for (int64_t row = 0; row < 2 * hidden; ++row) {
        std::vector<uint16_t> values(size_t(hidden), float_to_bf16(0.0f));
        values[size_t(row / 2)] = float_to_bf16(row % 2 == 0 ? kPaddingScale : -kPaddingScale);
        const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
        tensor.data.insert(tensor.data.end(), bytes, bytes + values.size() * sizeof(uint16_t));
      }
      tensor.shape[0] += 2 * hidden;
      padded_vocabulary = tensor.shape[0];
    }
    tensors.push_back(std::move(tensor));
  }
  write_safetensors(dir + "/model.safetensors", tensors, source->metadata());
  auto config = nlohmann::json::parse(read_file(dir + "/config.json"));
  config["vocab_size"] = padded_vocabulary;
  std::ofstream(dir + "/config.json") << config.dump(2);
  return dir;
}

}  // namespace oscar::testing
