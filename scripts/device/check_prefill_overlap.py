#!/usr/bin/env python3
"""Runs on the GPU machine (cuobjdump): checks that the prefill attention kernel's softmax runs
while the tensor cores compute the previous tile's P V.

In the kernel's main loop a consumer issues S = Q K^T and the previous tile's P V, waits for S
(`WARPGROUP.DEPBAR.LE gsb0, 0x1`), computes the softmax (its 2^x as MUFU.EX2), then waits for
P V (`WARPGROUP.DEPBAR.LE gsb0, 0x0`). ptxas may hoist the second wait above the softmax
(wgmma::wait_after exists to stop it), which costs nothing in correctness and the whole overlap
in speed, so only the machine code shows it. Every instance of the kernel must have at least a
tile's 2^x per thread (64) between the two waits.
Usage: check_prefill_overlap.py OBJECT (the compiled prefill_attention.cu)
"""
import re
import subprocess
import sys

WEIGHTS_PER_THREAD = 64  # a 64-row warpgroup's 64 x 128 scores over 128 threads


def functions(sass):
    name, body = None, []
    for line in sass.splitlines():
        match = re.match(r"\s*Function : (\S+)", line)
        if match:
            if name:
                yield name, body
            name, body = match.group(1), []
        elif name:
            body.append(line)
    if name:
        yield name, body


def softmax_exponentials(body):
    """The MUFU.EX2 count between the main loop's wait for S and its next wait for P V."""
    waits_for_scores = [i for i, line in enumerate(body) if "WARPGROUP.DEPBAR.LE gsb0, 0x1" in line]
    if not waits_for_scores:
        return None
    start = waits_for_scores[0]
    end = next((i for i in range(start + 1, len(body))
                if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in body[i]), len(body))
    return sum(1 for line in body[start:end] if "MUFU.EX2" in line)


def main():
    sass = subprocess.run(["cuobjdump", "-sass", sys.argv[1]], check=True, capture_output=True,
                          text=True).stdout
    kernels = [(name, softmax_exponentials(body)) for name, body in functions(sass)
               if "prefill_attention_kernel" in name]
    if not kernels:
        sys.exit(f"{sys.argv[1]}: no prefill_attention_kernel in cuobjdump -sass")
    failed = False
    for name, count in kernels:
        ok = count is not None and count >= WEIGHTS_PER_THREAD
        failed |= not ok
        print(f"{'ok' if ok else 'FAILED'}: {name[-60:]}: {count} MUFU.EX2 between the waits for S "
              f"and for P V (at least {WEIGHTS_PER_THREAD})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
