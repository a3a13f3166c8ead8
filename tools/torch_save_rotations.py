#!/usr/bin/env python3
"""Writes OSCAR rotation files in the published RotationZoo format without PyTorch.

The files have the structure torch.save gives them (a zip archive with archive/data.pkl, a
protocol-2 pickle whose tensors are torch._utils._rebuild_tensor_v2 over persistent-id storages,
archive/data/<key> with each storage's raw little-endian elements, archive/version and
archive/byteorder): the pickle is written by Python's own pickler with stand-ins registered as the
torch globals, as torch.save itself pickles. Used to make the test fixtures on a machine without
torch, and to convert `oscar calibrate`'s safetensors file into the published format:

  tools/torch_save_rotations.py convert ROTATIONS.safetensors KEY.pt VALUE.pt [--format-version 1|2]
  tools/torch_save_rotations.py fixture OUT_DIR   (the small files tests/quant/data holds)

tools/make_torch_rotation_fixtures.py writes the same fixtures with real torch.save.
"""
import argparse
import collections
import io
import json
import math
import os
import pickle
import struct
import sys
import types
import zipfile


def _register_torch_stand_ins():
    """Modules named torch and torch._utils whose globals pickle writes by name."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        raise RuntimeError("stand-in: never called")

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    storage_types = {}
    for name in ("FloatStorage", "DoubleStorage"):
        storage_types[name] = type(name, (), {"__module__": "torch"})
        setattr(torch, name, storage_types[name])
    torch._utils = utils
    sys.modules.setdefault("torch", torch)
    sys.modules.setdefault("torch._utils", utils)
    return sys.modules["torch._utils"]._rebuild_tensor_v2, storage_types


_REBUILD, _STORAGE_TYPES = _register_torch_stand_ins()


class Storage:
    def __init__(self, key, values, dtype):
        self.key, self.values, self.dtype = key, values, dtype

    def raw(self):
        code = "f" if self.dtype == "FloatStorage" else "d"
        return struct.pack("<%d%s" % (len(self.values), code), *self.values)


class Tensor:
    """A contiguous tensor: flat values and a shape."""

    def __init__(self, storage, shape):
        self.storage, self.shape = storage, tuple(shape)

    def __reduce_ex__(self, protocol):
        stride, step = [], 1
        for size in reversed(self.shape):
            stride.insert(0, step)
            step *= size
        return (_REBUILD, (self.storage, 0, self.shape, tuple(stride), False, collections.OrderedDict()))


class TensorPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", _STORAGE_TYPES[obj.dtype], obj.key, "cpu", len(obj.values))
        return None


class Archive:
    """Collects storages while tensors are made, then writes the zip."""

    def __init__(self):
        self.storages = []

    def tensor(self, values, shape, dtype="FloatStorage"):
        storage = Storage(str(len(self.storages)), list(values), dtype)
        self.storages.append(storage)
        return Tensor(storage, shape)

    def save(self, obj, path, prefix="archive"):
        buffer = io.BytesIO()
        TensorPickler(buffer, protocol=2).dump(obj)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
            archive.writestr(prefix + "/data.pkl", buffer.getvalue())
            archive.writestr(prefix + "/byteorder", "little")
            for storage in self.storages:
                archive.writestr(prefix + "/data/" + storage.key, storage.raw())
            archive.writestr(prefix + "/version", "3\n")


def read_safetensors(path):
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        tensors[name] = (list(struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])), info["shape"])
    return tensors


def published_dict(archive, layers, format_version, objective, layer_keys):
    """layers: per layer (rotation values, rotation shape, eigenvalues, eigenvalue shape)."""
    entries = {}
    for layer, (rotation, rotation_shape, eigen, eigen_shape) in enumerate(layers):
        entry = {"layer_id": layer, "rotation": archive.tensor(rotation, rotation_shape)}
        if eigen is not None:
            entry["eigenvalues"] = archive.tensor(eigen, eigen_shape, "DoubleStorage")
        entries[layer_keys(layer)] = entry
    return {"format_version": format_version, "objective": objective, "source_grouping": "per_kv_head"
            if format_version == 2 else "layer_mean", "layers": entries}


def convert(args):
    tensors = read_safetensors(args.rotations)
    layer_count = sum(1 for name in tensors if name.endswith(".key.rotation"))
    for kind, path, objective in (("key", args.key_out, "qqt"), ("value", args.value_out, "sst")):
        archive, layers = Archive(), []
        for layer in range(layer_count):
            rotation, shape = tensors["layers.%d.%s.rotation" % (layer, kind)]
            eigen, eigen_shape = tensors.get("layers.%d.%s.eigenvalues" % (layer, kind), (None, None))
            if args.format_version == 1:
                assert shape[0] == 1, "format_version 1 needs per-layer rotations"
                shape, eigen_shape = shape[1:], eigen_shape[1:] if eigen else None
            # Eigenvalues as eigh returns them (increasing): the reader sorts them.
            if eigen is not None:
                d = eigen_shape[-1]
                eigen = [v for h in range(len(eigen) // d) for v in sorted(eigen[h * d:(h + 1) * d])]
            layers.append((rotation, shape, eigen, eigen_shape))
        archive.save(published_dict(archive, layers, args.format_version, objective, int), path)


def hadamard(d):
    h = [[1.0]]
    while len(h) < d:
        h = [row + row for row in h] + [row + [-x for x in row] for row in h]
    return [x / math.sqrt(d) for row in h for x in row]


def fixture_rotation(d, seed):
    """A signed permutation of the normalised Hadamard matrix: orthogonal, exact in float32."""
    base = hadamard(d)
    rows = [(seed * 3 + i * 5) % d for i in range(d)]
    return [base[r * d + c] * (-1.0 if (r + seed) % 3 == 0 else 1.0) for r in rows for c in range(d)]


def fixture(args):
    """Two layers, two KV heads, head_dim 8, in both format versions, with int and str keys."""
    d, heads, layers = 8, 2, 2
    os.makedirs(args.out_dir, exist_ok=True)
    for version, keys in ((1, int), (2, str)):
        for kind, objective in (("k", "qqt"), ("v", "sst")):
            archive, entries = Archive(), []
            for layer in range(layers):
                count = heads if version == 2 else 1
                seeds = [layer * 4 + h + (0 if kind == "k" else 2) for h in range(count)]
                rotation = [x for s in seeds for x in fixture_rotation(d, s)]
                eigen = [float((s + 1) * (i + 1)) for s in seeds for i in range(d)]  # increasing
                shape = [count, d, d] if version == 2 else [d, d]
                entries.append((rotation, shape, eigen, shape[:-1]))
            name = "%s_rotation_v%d.pt" % (kind, version)
            archive.save(published_dict(archive, entries, version, objective, keys), os.path.join(args.out_dir, name))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    c = commands.add_parser("convert")
    c.add_argument("rotations")
    c.add_argument("key_out")
    c.add_argument("value_out")
    c.add_argument("--format-version", type=int, choices=(1, 2), default=2)
    f = commands.add_parser("fixture")
    f.add_argument("out_dir")
    args = parser.parse_args()
    convert(args) if args.command == "convert" else fixture(args)


if __name__ == "__main__":
    main()
