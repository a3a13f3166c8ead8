#!/usr/bin/env python3
"""The PyTorch peer of `oscar bench prefill`, on oscar's random weights, in the same run:

1. transformers' model of a models/hf-configs config (Qwen3ForCausalLM, LlamaForCausalLM) with sdpa
   attention in bf16: one forward pass over L random token ids with logits_to_keep=1 (its KV cache
   kept, as a server's prefill keeps it), the logits copied to the host. TTFT is the wall time of
   that pass, the median of --repeats after a warm-up pass; TFLOP/s by issue 40's count, as oscar
   counts it (src/cli/bench_prefill_rows.h): 2 params L for the linear layers (every layer's
   projections and the LM head) plus 2 L^2 head_dim q_heads layers for causal attention.
2. torch's scaled_dot_product_attention alone, causal, q [1, q_heads, L, D] and k, v
   [1, kv_heads, L, D] in bf16, GQA through enable_gqa (or k and v repeated per query head where a
   backend refuses it), with the flash and the cuDNN backend each forced: TFLOP/s of one layer's
   2 L^2 D q_heads.

oscar's random weights (make_random_model, src/model/model_weights.cpp) are regenerated on the GPU
rather than read from a file: element i of the t-th tensor in checkpoint order is
splitmix64(splitmix64(seed ^ splitmix64(t)) + i), mapped to a uniform value in float32 and rounded
to bf16, here in int64 arithmetic that wraps as oscar's uint64 does (logical right shifts are
masked arithmetic ones). TEST_VECTOR holds values oscar's generator gives
(tests/model/model_weights_test.cpp checks the same ones) and is checked at start-up; with
--oscar-checksums (written by `oscar bench prefill --weight-checksums FILE`) every tensor's checksum
must equal oscar's. oscar's tensor names are the checkpoints', which transformers' models use.

Writes {"device", "torch", "transformers", "rows": [...]} as JSON (--json)."""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

MASK64 = (1 << 64) - 1


def signed64(x):
    """A uint64 value as the int64 with the same bits."""
    x &= MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


GOLDEN, MIX1, MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def splitmix64_int(x):
    """oscar's splitmix64 on a Python integer (exact uint64 arithmetic)."""
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * MIX1) & MASK64
    x = ((x ^ (x >> 27)) * MIX2) & MASK64
    return x ^ (x >> 31)


def shift_right_logical(x, bits):
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def splitmix64_tensor(x):
    """The same on an int64 tensor: additions and products wrap modulo 2^64 as uint64 ones do."""
    x = x + signed64(GOLDEN)
    x = (x ^ shift_right_logical(x, 30)) * signed64(MIX1)
    x = (x ^ shift_right_logical(x, 27)) * signed64(MIX2)
    return x ^ shift_right_logical(x, 31)


def random_values(seed, tensor_index, indices, is_norm):
    """bf16 values of elements `indices` (int64 tensor) of oscar's tensor number `tensor_index`.
    Each float32 operation rounds once, as in oscar's uniform_value; a norm's 1 + noise is exact in
    double and rounded once to float32, as in oscar's norm_value."""
    stream = splitmix64_int(seed ^ splitmix64_int(tensor_index))
    bits = splitmix64_tensor(indices + signed64(stream))
    unit = shift_right_logical(bits, 40).to(torch.float32) * (1.0 / (1 << 24))
    noise = (2.0 * unit - 1.0) * (0.05 if is_norm else 0.02) * 1.7320508
    if is_norm:
        noise = (noise.to(torch.float64) + 1.0).to(torch.float32)
    return noise.to(torch.bfloat16)


# (tensor number in oscar's order, element indices, bf16 bit patterns) of seed 1 for a Qwen3
# layout: 1 the embedding, 2 the final norm, 3 the LM head, 4 layer 0's input norm, 5 its q
# projection, 25 layer 1's down projection.
TEST_VECTOR = [
    (1, False, [0, 1, 2, 1000], [0xBC34, 0xBB89, 0x3D09, 0xBCE8]),
    (2, True, [0, 1, 2, 20], [0x3F81, 0x3F86, 0x3F83, 0x3F80]),
    (3, False, [0, 1, 2, 1000], [0xBC3D, 0x3CBC, 0xBC80, 0x3B57]),
    (4, True, [0, 1, 2, 20], [0x3F70, 0x3F8B, 0x3F72, 0x3F6F]),
    (5, False, [0, 1, 2, 1000], [0x3C25, 0x3CEE, 0x3D02, 0xBA67]),
    (25, False, [0, 1, 2, 1000], [0xBCB0, 0x3CC7, 0x3B0F, 0x3C7B]),
]
SEED = 1  # oscar bench prefill's kWeightSeed


def bf16_bits(values):
    return (values.view(torch.int16).to(torch.int64) & 0xFFFF).tolist()


def check_test_vector(device):
    for tensor_index, is_norm, indices, expected in TEST_VECTOR:
        got = bf16_bits(random_values(SEED, tensor_index, torch.tensor(indices, device=device), is_norm))
        if got != expected:
            sys.exit(f"the weight generator differs from oscar's: tensor {tensor_index} elements {indices} gave "
                     f"{[hex(b) for b in got]}, oscar {[hex(b) for b in expected]}")


def oscar_tensors(config):
    """(name, shape) of every tensor oscar's make_random_model fills, in its order (tensor_specs)."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    qk_norm = config["architectures"][0] == "Qwen3ForCausalLM"
    tensors = [("model.embed_tokens.weight", (vocab, hidden)), ("model.norm.weight", (hidden,))]
    if not config.get("tie_word_embeddings", False):
        tensors.append(("lm_head.weight", (vocab, hidden)))
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors += [(p + "input_layernorm.weight", (hidden,)),
                    (p + "self_attn.q_proj.weight", (heads * head_dim, hidden)),
                    (p + "self_attn.k_proj.weight", (kv_heads * head_dim, hidden)),
                    (p + "self_attn.v_proj.weight", (kv_heads * head_dim, hidden)),
                    (p + "self_attn.o_proj.weight", (hidden, heads * head_dim))]
        if qk_norm:
            tensors += [(p + "self_attn.q_norm.weight", (head_dim,)), (p + "self_attn.k_norm.weight", (head_dim,))]
        tensors += [(p + "post_attention_layernorm.weight", (hidden,)),
                    (p + "mlp.gate_proj.weight", (inter, hidden)),
                    (p + "mlp.up_proj.weight", (inter, hidden)),
                    (p + "mlp.down_proj.weight", (hidden, inter))]
    return tensors


CHUNK = 1 << 25  # elements generated or summed at once (a few 256 MB int64 temporaries)


def fill_oscar_tensor(out, tensor_index):
    """Fills the bf16 tensor `out` with oscar's values of its tensor number `tensor_index`."""
    flat = out.view(-1)
    is_norm = out.dim() == 1
    for start in range(0, flat.numel(), CHUNK):
        end = min(flat.numel(), start + CHUNK)
        indices = torch.arange(start, end, dtype=torch.int64, device=out.device)
        flat[start:end] = random_values(SEED, tensor_index, indices, is_norm)


def checksum(tensor):
    """oscar's weight checksum (src/cli/bench_weight_checksums.h): of the bf16 bit patterns b_i,
    sum b_i and sum b_i (i mod 1021), both exact in int64."""
    flat = tensor.view(-1).view(torch.int16)
    total, weighted = 0, 0
    for start in range(0, flat.numel(), CHUNK):
        end = min(flat.numel(), start + CHUNK)
        bits = flat[start:end].to(torch.int64) & 0xFFFF
        positions = torch.arange(start, end, dtype=torch.int64, device=tensor.device) % 1021
        total += int(bits.sum().item())
        weighted += int((bits * positions).sum().item())
    return [total, weighted]


def compare_checksums(tensors, path):
    """Exits unless every tensor's checksum equals the one oscar wrote to `path`."""
    with open(path) as f:
        oscar = json.load(f)
    if oscar.get("seed") != SEED:
        sys.exit(f"{path}: seed {oscar.get('seed')}, this script regenerates seed {SEED}")
    expected = oscar["tensors"]
    if sorted(expected) != sorted(tensors):
        sys.exit(f"{path}: the tensors differ: oscar only {sorted(set(expected) - set(tensors))[:5]}, "
                 f"here only {sorted(set(tensors) - set(expected))[:5]}")
    wrong = [name for name, tensor in tensors.items() if checksum(tensor) != expected[name]]
    if wrong:
        sys.exit(f"{path}: {len(wrong)} tensors differ from oscar's weights, first {wrong[:5]}")
    print(f"weights: all {len(tensors)} tensors' checksums equal oscar's ({path})")


def matrix_params(config):
    """Elements of the matrices the linear layers multiply by, as oscar counts them."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or hidden // heads
    per_layer = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden + 3 * hidden * inter
    return config["num_hidden_layers"] * per_layer + vocab * hidden


def attention_flops(config, tokens, layers):
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2.0 * tokens * tokens * head_dim * heads * layers


def prefill_flops(config, tokens):
    return 2.0 * matrix_params(config) * tokens + attention_flops(config, tokens, config["num_hidden_layers"])


def build_model(config, config_path):
    """transformers' model of `config` with sdpa attention, bf16 on the GPU, oscar's weights in it."""
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    with tempfile.TemporaryDirectory() as directory:
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(config, f)
        hf_config = AutoConfig.from_pretrained(directory)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(hf_config, attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(default_dtype)
    model = model.to("cuda").eval()
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.bfloat16}:
        sys.exit(f"{config_path}: transformers made parameters of {dtypes}, not bf16 only")
    print(f"transformers {transformers.__version__}: {type(model).__name__}, attention "
          f"{getattr(model.config, '_attn_implementation', '?')}")
    parameters = dict(model.named_parameters())
    names = oscar_tensors(config)
    if {name for name, _ in names} != set(parameters):
        sys.exit(f"{config_path}: transformers' parameters differ from oscar's tensors: only transformers' "
                 f"{sorted(set(parameters) - {n for n, _ in names})[:5]}, only oscar's "
                 f"{sorted({n for n, _ in names} - set(parameters))[:5]}")
    with torch.no_grad():
        for index, (name, shape) in enumerate(names, start=1):
            if tuple(parameters[name].shape) != shape:
                sys.exit(f"{name}: transformers' shape {tuple(parameters[name].shape)}, oscar's {shape}")
            fill_oscar_tensor(parameters[name].data, index)
    if config.get("tie_word_embeddings", False) and \
            model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr():
        sys.exit(f"{config_path}: tie_word_embeddings, but transformers' LM head is not the embedding")
    return model, {name: parameters[name].data for name, _ in names}


def forward_seconds(model, ids):
    """One forward pass over `ids`, the last position's logits copied to the host: wall seconds."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.inference_mode():
        output = model(input_ids=ids, logits_to_keep=1, use_cache=True)
        logits = output.logits.float().cpu()
    seconds = time.perf_counter() - start
    del output
    if logits.shape[1] != 1 or not torch.isfinite(logits).all():
        sys.exit(f"transformers returned logits of shape {tuple(logits.shape)} or non-finite ones")
    return seconds


def time_transformers(model, config, name, lengths, repeats):
    rows = []
    for tokens in lengths:
        generator = torch.Generator(device="cuda").manual_seed(tokens)
        ids = torch.randint(0, config["vocab_size"], (1, tokens), generator=generator, device="cuda")
        try:
            forward_seconds(model, ids)  # warm-up
            ttft = statistics.median_high([forward_seconds(model, ids) for _ in range(repeats)])
        except torch.cuda.OutOfMemoryError:
            print(f"transformers {tokens:>7}   skipped: out of GPU memory")
            continue
        finally:
            torch.cuda.empty_cache()
        flops = prefill_flops(config, tokens)
        print(f"transformers {tokens:>7} {ttft:>9.3f} s {tokens / ttft:>9.0f} tokens/s {flops / ttft / 1e12:>7.1f} TFLOP/s")
        rows.append({"kernel": "transformers_prefill", "model": name, "attn_implementation": "sdpa",
                     "prompt_tokens": tokens, "repeats": repeats, "ttft_s": ttft, "tokens_per_s": tokens / ttft,
                     "flops": flops, "tflops": flops / ttft / 1e12})
    return rows


def sdpa_seconds(q, k, v, backend, enable_gqa, iterations):
    """Seconds of one causal attention call: calls back to back between two CUDA events, the median
    of three such runs after two warm-up calls."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def call():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=enable_gqa)

    for _ in range(2):
        call()
    times = []
    for _ in range(3):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / iterations)
    return statistics.median(times)


def time_sdpa(config, name, lengths):
    from torch.nn.attention import SDPBackend
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    rows = []
    for tokens in lengths:
        flops = attention_flops(config, tokens, 1)
        iterations = max(3, min(50, round(5e13 / flops)))
        q = torch.randn(1, heads, tokens, head_dim, dtype=torch.bfloat16, device="cuda")
        k = torch.randn(1, kv_heads, tokens, head_dim, dtype=torch.bfloat16, device="cuda")
        v = torch.randn(1, kv_heads, tokens, head_dim, dtype=torch.bfloat16, device="cuda")
        for backend_name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                seconds, gqa = sdpa_seconds(q, k, v, backend, True, iterations), "enable_gqa"
            except RuntimeError:  # the backend refuses enable_gqa: the heads repeated instead
                repeated_k = k.repeat_interleave(heads // kv_heads, dim=1)
                repeated_v = v.repeat_interleave(heads // kv_heads, dim=1)
                try:
                    seconds, gqa = sdpa_seconds(q, repeated_k, repeated_v, backend, False, iterations), "repeat"
                except RuntimeError as error:
                    print(f"sdpa {backend_name:<6} {tokens:>7}   refused: {str(error).splitlines()[0][:100]}")
                    continue
                finally:
                    del repeated_k, repeated_v
            print(f"sdpa {backend_name:<6} {tokens:>7} {seconds * 1e3:>9.2f} ms {flops / seconds / 1e12:>7.1f} TFLOP/s"
                  f" ({gqa})")
            rows.append({"kernel": "sdpa_prefill_attention", "model": name, "backend": backend_name, "gqa": gqa,
                         "prompt_tokens": tokens, "time_s": seconds, "flops": flops,
                         "tflops": flops / seconds / 1e12})
        del q, k, v
        torch.cuda.empty_cache()
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="qwen3-8b", help="a models/hf-configs name")
    p.add_argument("--prompt-lens", default="4096,8192,16384,32768,65536,100000,131072")
    p.add_argument("--repeats", type=int, default=3, help="timed passes per length after a warm-up, median taken")
    p.add_argument("--oscar-checksums", default="", help="`oscar bench prefill --weight-checksums` output to compare")
    p.add_argument("--check-weights-only", action="store_true",
                   help="regenerate the weights as plain tensors, compare the checksums and stop (no transformers)")
    p.add_argument("--device", default="cuda", help="with --check-weights-only: where to regenerate them")
    p.add_argument("--json", default="")
    a = p.parse_args()
    config_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "hf-configs",
                               a.model + ".json")
    with open(config_path) as f:
        config = json.load(f)
    lengths = [int(n) for n in a.prompt_lens.split(",")]
    device = a.device if a.check_weights_only else "cuda"
    check_test_vector(device)
    if a.check_weights_only:
        tensors = {}
        for index, (name, shape) in enumerate(oscar_tensors(config), start=1):
            tensors[name] = torch.empty(shape, dtype=torch.bfloat16, device=device)
            fill_oscar_tensor(tensors[name], index)
        if not a.oscar_checksums:
            sys.exit("--check-weights-only needs --oscar-checksums")
        compare_checksums(tensors, a.oscar_checksums)
        return
    device_name = torch.cuda.get_device_name()
    print(f"{device_name}, torch {torch.__version__}; {a.model}: {config['num_hidden_layers']} layers, "
          f"{matrix_params(config) / 1e9:.2f} B matrix parameters")
    model, tensors = build_model(config, config_path)
    if a.oscar_checksums:
        compare_checksums(tensors, a.oscar_checksums)
    rows = time_transformers(model, config, a.model, lengths, a.repeats)
    del model, tensors
    torch.cuda.empty_cache()
    rows += time_sdpa(config, a.model, lengths)
    if a.json:
        import transformers
        with open(a.json, "w") as f:
            json.dump({"device": device_name, "torch": torch.__version__, "transformers": transformers.__version__,
                       "weights_checked": bool(a.oscar_checksums), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
