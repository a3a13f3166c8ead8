#pragma once
// The published OSCAR rotation files (the RotationZoo's torch.save archives, e.g.
// k_rotation_qqt_r_h_pbr.pt and v_rotation_sst_r_h_pbr.pt), one for keys and one for values:
//   {"format_version": 1 or 2, "objective": str, "source_grouping": str,
//    "layers": {layer_id (int or str): {"layer_id": int, "rotation": tensor, "eigenvalues":
//    tensor}}}
// format_version 1: rotation [D, D] and eigenvalues [D] per layer (shared by its KV heads);
// format_version 2: rotation [kv_heads, D, D] and eigenvalues [kv_heads, D]. Rotations apply as
// K @ R, oscar's convention, so they are used as read.
#include <string>

#include "quant/kv_rotations.h"

namespace oscar {

// Reads both files and checks them against the model's shapes (the files record no model hash, so
// shapes are all that can be checked): one entry per layer 0..num_layers-1, [.., D, D] rotations
// that are finite and orthogonal, eigenvalues of matching shape. Eigenvalues are kept sorted in
// decreasing order per rotation, as `oscar calibrate` stores them, so the keys' error feedback is
// built from them exactly as from oscar's own files. When one file is per KV head and the other
// per layer, the per-layer rotations are repeated for every head. Errors name the file, the layer
// and the expected and found shapes.
KvRotations load_published_kv_rotations(const std::string& key_path, const std::string& value_path,
                                        const ModelFingerprint& model);

}  // namespace oscar
