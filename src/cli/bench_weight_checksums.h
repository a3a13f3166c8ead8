#pragma once
// Checksums of a weight set, by checkpoint tensor name, which bench/prefill_peer.py computes the
// same way over the random weights it regenerates in PyTorch (so that the peer is shown to run on
// oscar's weights without writing them to a file). Of a tensor's bf16 bit patterns b_i, read as
// unsigned 16-bit integers: sum b_i, and sum b_i (i mod 1021), which also sees elements moved. Both
// are exact in 64-bit integers for tensors of up to 2^37 elements.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_weights.h"

namespace oscar::cli {

struct TensorChecksum {
  std::string name;
  int64_t sum = 0;
  int64_t weighted_sum = 0;
};

// Every tensor of `weights` (bf16 only), the LM head once when tied to the embedding.
std::vector<TensorChecksum> weight_checksums(const ModelWeights& weights);

// {"tensor name": [sum, weighted sum], ...}
nlohmann::json checksums_json(const std::vector<TensorChecksum>& checksums);

}  // namespace oscar::cli
