#pragma once
// Runs one token sequence through a backend outside the engine, in prefill chunks, with its own
// page pools: for calibration (an observer sees every layer's activations) and for analyses that
// need every position's logits.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace oscar {

struct SequenceRunOptions {
  int64_t chunk_tokens = 512;
  ActivationObserver* observer = nullptr;
  bool all_logits = false;  // keep every position's logits (else only the last row)
  int64_t full_precision_until = 0;
};

// Returns the logits rows (all positions, or the last one), vocab_size floats each.
std::vector<float> run_sequence(Backend& backend, std::span<const int32_t> tokens,
                                const SequenceRunOptions& options);

}  // namespace oscar
