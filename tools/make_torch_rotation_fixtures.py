#!/usr/bin/env python3
"""Writes the published-format rotation fixtures with real torch.save (run where torch is installed):

  python3 tools/make_torch_rotation_fixtures.py tests/quant/data/torch

The same small rotations as `tools/torch_save_rotations.py fixture` (two layers, two KV heads,
head_dim 8; signed row permutations of the normalised Hadamard matrix, eigenvalues (seed + 1) *
(i + 1) as float64), in both format versions: version 1 with int layer keys, version 2 with str
keys. tests/quant/published_rotations_test.cpp reads them when they are there and expects the
same values as from the fixtures written without torch.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_save_rotations import fixture_rotation  # noqa: E402  (pure Python, no torch stand-ins used)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/quant/data/torch"
    os.makedirs(out_dir, exist_ok=True)
    d, heads, layers = 8, 2, 2
    for version, key_type in ((1, int), (2, str)):
        for kind, objective in (("k", "qqt"), ("v", "sst")):
            entries = {}
            for layer in range(layers):
                count = heads if version == 2 else 1
                seeds = [layer * 4 + h + (0 if kind == "k" else 2) for h in range(count)]
                rotation = torch.tensor([fixture_rotation(d, s) for s in seeds], dtype=torch.float32).reshape(count, d, d)
                eigen = torch.tensor([[float((s + 1) * (i + 1)) for i in range(d)] for s in seeds], dtype=torch.float64)
                if version == 1:
                    rotation, eigen = rotation[0].clone(), eigen[0].clone()
                entries[key_type(layer)] = {"layer_id": layer, "rotation": rotation, "eigenvalues": eigen}
            obj = {"format_version": version, "objective": objective,
                   "source_grouping": "per_kv_head" if version == 2 else "layer_mean", "layers": entries}
            torch.save(obj, os.path.join(out_dir, "%s_rotation_v%d.pt" % (kind, version)))
    print("wrote", sorted(os.listdir(out_dir)), "with torch", torch.__version__)


if __name__ == "__main__":
    main()
