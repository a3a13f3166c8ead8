#!/usr/bin/env python3
"""A Hugging Face checkpoint directory of random bf16 weights at a models/hf-configs shape, with
the testbed's tokenizer and texts, for `oscar bench serve` at a real model's size.

The vocabulary is cut to the tokenizer's (the testbed's 8,192 ids), as `oscar bench prefill`
does; every other dimension is the named model's. Weights are normal with the config's
initializer_range (norm weights one), made on the GPU by transformers and saved as safetensors
shards.

    python3 bench/random_checkpoint.py --model qwen3-8b --out /tmp/qwen3-8b-random
"""
import argparse
import json
import pathlib
import shutil
import time

import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]
TEXT_FILES = ["calib.xz", "valid.xz"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a models/hf-configs name, e.g. qwen3-8b")
    parser.add_argument("--out", required=True, help="the checkpoint directory to write")
    parser.add_argument("--tokenizer-from", default=str(ROOT / "models" / "testbed"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    config_path = ROOT / "models" / "hf-configs" / f"{args.model}.json"
    if not config_path.is_file():
        raise SystemExit(f"{config_path}: no such models/hf-configs shape")
    source = pathlib.Path(args.tokenizer_from)
    with open(source / "config.json") as f:
        vocab = json.load(f)["vocab_size"]
    with open(config_path) as f:
        config_dict = json.load(f)
    config_dict["vocab_size"] = vocab
    with open(source / "config.json") as f:
        source_config = json.load(f)
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if key in source_config:
            config_dict[key] = source_config[key]
    config = transformers.AutoConfig.for_model(**config_dict)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    torch.manual_seed(args.seed)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.save_pretrained(out, max_shard_size="4GB")
    for name in TOKENIZER_FILES + TEXT_FILES:
        if (source / name).is_file():
            shutil.copy(source / name, out / name)
    params = sum(p.numel() for p in model.parameters())
    print(f"{out}: {args.model} with vocabulary {vocab}, {params / 1e9:.2f} B parameters, "
          f"written in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
