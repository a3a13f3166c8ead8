#!/usr/bin/env python3
"""The PyTorch peer of `oscar bench decode-attention`: torch's scaled_dot_product_attention in bf16
on the same decode shapes (one query token per sequence, GQA with enable_gqa=True, contiguous
[batch, kv_heads, context, head_dim] keys and values), timed with CUDA events over calls back to back (median of five runs), with the
same byte count (K and V read once, queries read, outputs written) and the copy bandwidth measured
in the same process. Each shape is timed with PyTorch's own choice of backend and with each of its
fused backends forced (cuDNN, flash, memory-efficient; one that refuses the shape is skipped), and
the row holds the fastest ("backend", "time_us") with every backend's time. Writes {"device",
"copy_gbps", "rows": [...]} as JSON."""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# None: PyTorch's own dispatch. The math backend (scores materialized) is never the fastest here.
BACKENDS = {"default": None, "cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def copy_gbps():
    n = 1 << 31
    a = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    b = torch.empty_like(a)
    times = []
    for i in range(12):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); b.copy_(a); e.record(); e.synchronize()
        if i >= 2:
            times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return 2 * n / times[len(times) // 2] / 1e9


def measure(batch, context, heads, kv_heads, head_dim, iterations, backend):
    kv_bytes = 2 * batch * kv_heads * context * head_dim * 2
    q_bytes = batch * heads * head_dim * 2
    total = kv_bytes + 2 * q_bytes
    copies = max(1, min(16, (512 << 20) // total + 1))  # 512 MB between reuses: L2 never serves a repeat
    sets = []
    for _ in range(copies):
        q = torch.randn(batch, heads, 1, head_dim, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
        sets.append((q, k, v))
    def attention(q, k, v):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    for i in range(3):
        q, k, v = sets[i % copies]
        attention(q, k, v)
    # Calls back to back between two events, like oscar bench decode-attention: the GPU's time per
    # call, not Python's launch latency. Median over five such runs.
    times = []
    for run in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for i in range(iterations):
            q, k, v = sets[(run * iterations + i) % copies]
            attention(q, k, v)
        e.record(); e.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / iterations)
    del sets
    torch.cuda.empty_cache()
    times.sort()
    return times[len(times) // 2], total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="qwen3-8b")
    p.add_argument("--config", default="models/hf-configs/qwen3-8b.json")
    p.add_argument("--contexts", default="4096,8192,16384,32768,65536,131072")
    p.add_argument("--batches", default="1,8,16,32,64")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--json", default="")
    a = p.parse_args()
    config = json.load(open(a.config))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim", config["hidden_size"] // heads)
    bw = copy_gbps()
    print(f"{torch.cuda.get_device_name()} torch {torch.__version__}, copy bandwidth {bw:.0f} GB/s")
    rows = []
    free = torch.cuda.mem_get_info()[0]
    for context in map(int, a.contexts.split(",")):
        for batch in map(int, a.batches.split(",")):
            if 2 * batch * kv_heads * context * head_dim * 2 > 0.6 * free:
                print(f"sdpa {context:>8} {batch:>6}   skipped: does not fit")
                continue
            by_backend = {}
            for name, backend in BACKENDS.items():
                try:
                    by_backend[name], total = measure(batch, context, heads, kv_heads, head_dim, a.iterations, backend)
                except RuntimeError:  # the backend does not take this shape
                    torch.cuda.empty_cache()
            best = min(by_backend, key=by_backend.get)
            t = by_backend[best]
            gbps = total / (t * 1e-6) / 1e9
            others = " ".join(f"{name} {us:.1f}" for name, us in by_backend.items())
            print(f"sdpa {context:>8} {batch:>6} {t:>11.1f} {total:>12} {gbps:>8.0f} {100 * gbps / bw:>5.1f}%"
                  f"  {best:<9} ({others})")
            rows.append({"kernel": "sdpa_decode_attention", "kv": "bf16", "model": a.model, "context": context,
                         "batch": batch, "time_us": t, "bytes": total, "gbps": gbps, "bw_fraction": gbps / bw,
                         "backend": best, "time_us_by_backend": by_backend, "torch": torch.__version__})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "copy_gbps": bw, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
