#pragma once
// What ties a rotations file to the model it was calibrated on (quant/kv_rotations.h): the shapes,
// the config's hash and a hash of the weights.
#include <string>

#include "model/model_weights.h"
#include "quant/kv_rotations.h"

namespace oscar {

// FNV-1a over every tensor's name, dtype and shape and 16 windows of 4 KiB spread evenly over its
// bytes (all of a tensor of at most 64 KiB). Another checkpoint or a fine-tune of the same shapes
// differs in every window of the tensors it changed; hashing every byte instead would read the
// whole checkpoint at each start, before the model is needed.
std::string weights_hash(const ModelWeights& weights);

ModelFingerprint model_fingerprint(const ModelWeights& weights);

}  // namespace oscar
