#!/usr/bin/env bash
# Runs on the GPU machine (the device tool): builds the CUDA backend, runs the GPU tests with
# compute-sanitizer on a subset, and the GPU benchmarks, writing logs and JSON under $OUT.
# Usage: bench/cuda_suite.sh [tests] [sanitize] [kernels] [bench (ours + sdpa)] [ours] [sdpa] [step] [linear]
#                            [accuracy] [accuracy-cpu] [calibrate] [serve] [serve-32k] [prefill]
#                            [base-prefill] [chunk-ab] [prefill-attention] [profile-prefill]
#                            [profile-kv-kernels]
#   tests:        the GPU tests; their failures and the summary are printed, the whole log is in logs.tgz
#                 and scripts/device/check_prefill_overlap.py on the prefill kernel's machine code
#   accuracy:     the accuracy campaign (scripts/results/accuracy_campaign.sh) on the GPU, with the
#                 CPU campaign's rotations file, results in logs.tgz under accuracy-cuda/
#   accuracy-cpu: the CPU reference campaign on this machine's cores, resuming from the results in
#                 docs/results/raw (ONLY selects jobs), results in logs.tgz under accuracy-cpu/
#   serve:        oscar bench serve on the testbed, bf16 vs INT2 OSCAR cache in the same pool
#   prefill:      oscar bench prefill and bench/prefill_peer.py (transformers, torch SDPA) on the same
#                 random weights, their checksums compared first: PREFILL_MODEL (qwen3-8b) at
#                 PREFILL_LENS (4K-128K), PREFILL_KV (bf16,int2), PREFILL_REPEATS (3) and, when set,
#                 PREFILL_CHUNK (--chunk-tokens; default the engine's GPU chunk); prefill_clocks.csv:
#                 the clocks and power every 100 ms (sample_clocks), against the time-stamped lines
#   base-prefill: a before/after in one call: the commit staged here by scripts/device/stage-base.sh
#                 (carry .device) built as this tree with its files put back, then oscar bench prefill
#                 of it and of this tree in turn, twice (PREFILL_MODEL, PREFILL_KV, PREFILL_REPEATS as
#                 above; PREFILL_LENS default 4096,8192,32768), JSON prefill-{base,new}-{1,2}.json;
#                 with AB_ATTENTION_LENS also bench prefill-attention of each build after its
#                 prefill, at those lengths (PREFILL_KV's dtypes), its JSON in logs.tgz as
#                 prefill-attention-{base,new}-{1,2}.json
#   chunk-ab:     oscar bench prefill with the default chunk (8448, whole waves of attention blocks)
#                 and with CHUNK_AB (default 8192, the default before it) in turn, twice,
#                 PREFILL_LENS (default 32768,100000), PREFILL_KV as above, one timed run each,
#                 JSON prefill-chunk-{default,CHUNK_AB}-{1,2}.json
#   prefill-attention: oscar bench prefill-attention at ATTENTION_LENS (8K, 32K, 128K), bf16 and
#                 INT2, prefill_attention.json, and the clocks as for prefill
#   profile-prefill: Nsight Compute on the prefill attention kernel's last chunk of a
#                 PROFILE_TOKENS-token prompt (default 32768) in chunks of PROFILE_CHUNK (8448),
#                 bf16 and INT2 (bench prefill-attention), the sections that say what bounds it, as
#                 CSV: prefill_attention_ncu_{bf16,int2}.csv, and every metric collected (the stall
#                 reasons among them) in prefill_attention_ncu_raw_{bf16,int2}.csv
#   profile-kv-kernels: what the INT2 cache adds, kernel by kernel: Nsight Compute's time of each of
#                 the first PROFILE_LAUNCHES (240) kernels of an INT2 prefill of PROFILE_TOKENS (4096),
#                 kv_kernels_ncu.csv; the sections of the error-feedback kernel's fourth launch,
#                 feedback_ncu_raw.csv; the machine code of kv_migrate.cu and prefill_attention.cu,
#                 kv_kernels_sass.tar.xz (cuobjdump -sass), to read without a GPU machine
#   serve-32k:    oscar bench serve, 32 prompts of 32K tokens, 512 out, bf16 against INT2 OSCAR, on a
#                 random Qwen3-8B checkpoint written by bench/random_checkpoint.py and calibrated here
set -uo pipefail
cd "$(dirname "$0")/.."
# JSON results go to $OUT (at most 8 files come back); logs stay in $logs.
out=${OUT:-/tmp/oscar-cuda-suite}
logs=/tmp/oscar-cuda-logs
mkdir -p "$out" "$logs"
bash scripts/device/configure.sh build-gpu -DOSCAR_BENCHMARKS=OFF >"$logs/configure.log" 2>&1 || { tail -20 "$logs/configure.log"; exit 1; }
if [[ " $* " =~ \ (tests|sanitize|kernels)\  ]]; then
  cmake --build build-gpu -j16 --target backend_tests >"$logs/build.log" 2>&1 || { grep -B2 -A8 error "$logs/build.log" | head -60; exit 1; }
fi
cmake --build build-gpu -j16 --target oscar >"$logs/build-oscar.log" 2>&1 || { echo "oscar did not build:"; grep -A3 error "$logs/build-oscar.log" | head -20; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"
# Each line prefixed with the wall-clock time, as nvidia-smi's samples are.
stamp_lines() {
  while IFS= read -r line; do printf '%s %s\n' "$(date '+%Y/%m/%d %H:%M:%S.%3N')" "$line"; done
}
# The SM and memory clocks, power and temperature every 100 ms into FILE, in the background until
# `kill "$sampler"`; read against lines stamped by stamp_lines.
sample_clocks() {
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu \
    --format=csv,nounits -lms 100 >"$1" 2>/dev/null &
  sampler=$!
}
for stage in "$@"; do
  case $stage in
    tests)
      # The log is written whole before it is filtered: a pipe that stops reading early (head)
      # would kill the tests with SIGPIPE.
      OMP_NUM_THREADS=16 ./build-gpu/tests/backend_tests --gtest_filter='*Cuda*' >"$logs/tests.log" 2>&1
      echo "backend_tests exit $?"
      grep -E "FAIL|Failure|Expected|Which|actual" "$logs/tests.log" | head -100
      grep -E "^\[==========\]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|^\[  FAILED  \] [0-9]" "$logs/tests.log"
      # The machine code keeps the prefill softmax under the tensor cores' P V (ptxas may not).
      python3 scripts/device/check_prefill_overlap.py \
        build-gpu/src/backend/cuda/CMakeFiles/oscar_cuda.dir/prefill_attention.cu.o ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 9 ./build-gpu/tests/backend_tests \
          --gtest_filter='CudaKernels.*:Formats/CudaKvMigrate.*:Formats/CudaDecodeAttention.*int2_g128*:Formats/CudaDecodeAttention.*bf16_gqa4*:Formats/CudaPrefillAttention.RotatedQueries*/bf16_gqa4:Formats/CudaPrefillAttention.RotatedQueries*/int2_g128_q8_gqa4_band768' >"$logs/sanitizer-$tool.log" 2>&1
        echo "compute-sanitizer $tool exit $? : $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer-$tool.log" | tail -1)"
      done ;;
    bench)
      stdbuf -oL ./build-gpu/src/cli/oscar bench decode-attention --json "$out/decode_attention.json" 2>&1 | tee "$logs/decode_attention.log"
      ;&
    sdpa)
      PYTHONUNBUFFERED=1 python3 bench/sdpa_decode_attention.py --json "$out/sdpa_decode_attention.json" 2>&1 | tee "$logs/sdpa.log" ;;
    step)
      stdbuf -oL ./build-gpu/src/cli/oscar bench decode-step --max-batch-context 100000 --json "$out/decode_step.json" 2>&1 | tee "$logs/decode_step.log" ;;
    linear)
      stdbuf -oL ./build-gpu/src/cli/oscar bench linear --json "$out/linear.json" 2>&1 | tee "$logs/linear.log" ;;
    ours)
      stdbuf -oL ./build-gpu/src/cli/oscar bench decode-attention --iterations 10 --json "$out/decode_attention.json" 2>&1 | tee "$logs/decode_attention.log" ;;
    accuracy)
      mkdir -p "$logs/accuracy-cuda"
      cp docs/results/raw/rotations.safetensors "$logs/accuracy-cuda/"  # unseen.txt: from this CUDA install
      DEVICE=cuda scripts/results/accuracy_campaign.sh "$logs/accuracy-cuda" build-gpu/src/cli/oscar 2>&1 | tee "$logs/accuracy.log"
      rm -f "$logs"/accuracy-cuda/*.safetensors "$logs/accuracy-cuda/unseen.txt" ;;
    accuracy-cpu)
      mkdir -p "$logs/accuracy-cpu"
      cp docs/results/raw/* "$logs/accuracy-cpu/"
      PARALLEL=${PARALLEL:-5} THREADS=${THREADS:-3} scripts/results/accuracy_campaign.sh "$logs/accuracy-cpu" build-gpu/src/cli/oscar 2>&1 | tee "$logs/accuracy-cpu.log"
      rm -f "$logs"/accuracy-cpu/*.safetensors "$logs/accuracy-cpu/unseen.txt" ;;
    serve)
      # Long prompts, long answers, one pool of 1 GiB: in bf16 it holds 18 of these 7024-token
      # sequences (8 KiB per token); at INT2 (bf16 sink and recent window of each running
      # sequence and the step's prefill chunk, the rest at about 2.2 bits) all 64 fit.
      for kv in bf16 int2; do
        flags=()
        [[ $kv == int2 ]] && flags=(--kv-cache-dtype int2 --kv-method oscar --kv-rotations docs/results/raw/rotations.safetensors)
        stdbuf -oL ./build-gpu/src/cli/oscar bench serve --device cuda "${flags[@]}" --kv-pool-gb 1 --max-num-seqs 64 \
          --num-requests 64 --concurrency 64 --input-len 6000 --output-len 1024 \
          --json "$out/serve-$kv.json" 2>&1 | tee "$logs/serve-$kv.log"
      done ;;
    prefill)
      model=${PREFILL_MODEL:-qwen3-8b}
      lens=${PREFILL_LENS:-4096,8192,16384,32768,65536,100000,131072}
      repeats=${PREFILL_REPEATS:-3}
      ./build-gpu/src/cli/oscar bench prefill --model "$model" --weight-checksums "$logs/prefill-weights-$model.json" \
        >"$logs/prefill-weights.log" 2>&1 || tail -5 "$logs/prefill-weights.log"
      # Whether a phase ran slower inside the whole prompt than alone because the clocks dropped.
      sample_clocks "$out/prefill_clocks.csv"
      stdbuf -oL ./build-gpu/src/cli/oscar bench prefill --model "$model" --prompt-lens "$lens" \
        --kv-dtypes "${PREFILL_KV:-bf16,int2}" --repeats "$repeats" ${PREFILL_CHUNK:+--chunk-tokens "$PREFILL_CHUNK"} \
        --json "$out/prefill-$model.json" 2>&1 | stamp_lines | tee "$logs/prefill.log"
      PYTHONUNBUFFERED=1 python3 bench/prefill_peer.py --model "$model" --prompt-lens "$lens" --repeats "$repeats" \
        --oscar-checksums "$logs/prefill-weights-$model.json" --json "$out/prefill_peer-$model.json" 2>&1 \
        | stamp_lines | tee "$logs/prefill_peer.log"
      kill "$sampler" ;;
    base-prefill)
      if [[ ! -f .device/base/source-version.txt ]]; then
        echo "base-prefill: no .device/base: run scripts/device/stage-base.sh BASE here and carry .device"
        continue
      fi
      base_tree=/tmp/oscar-base
      rm -rf "$base_tree" && mkdir -p "$base_tree"
      tar cf - --exclude=./build-gpu --exclude=./.device . | tar xf - -C "$base_tree"
      cp -r .device/base/files/. "$base_tree"/
      mkdir -p "$base_tree/.device" && cp .device/base/source-version.txt "$base_tree/.device/"
      (cd "$base_tree" && xargs -r -d '\n' rm -rf -- <"$OLDPWD/.device/base/removed.txt")
      echo "base: $(cat .device/base/source-version.txt)"
      if ! (bash "$base_tree/scripts/device/configure.sh" build-base -DOSCAR_BENCHMARKS=OFF -DOSCAR_TESTS=OFF &&
            cmake --build "$base_tree/build-base" -j16 --target oscar) >"$logs/build-base.log" 2>&1; then
        echo "base-prefill: the base did not build:"; grep -A3 error "$logs/build-base.log" | head -20
        continue
      fi
      for round in 1 2; do
        for side in base new; do
          binary=./build-gpu/src/cli/oscar
          [[ $side == base ]] && binary=$base_tree/build-base/src/cli/oscar
          echo "round $round, $side"
          stdbuf -oL "$binary" bench prefill --model "${PREFILL_MODEL:-qwen3-8b}" \
            --prompt-lens "${PREFILL_LENS:-4096,8192,32768}" --kv-dtypes "${PREFILL_KV:-bf16,int2}" \
            --repeats "${PREFILL_REPEATS:-3}" --json "$out/prefill-$side-$round.json" 2>&1 \
            | tee "$logs/prefill-$side-$round.log"
          if [[ -n ${AB_ATTENTION_LENS:-} ]]; then
            stdbuf -oL "$binary" bench prefill-attention --prompt-lens "$AB_ATTENTION_LENS" \
              --kv-dtypes "${PREFILL_KV:-bf16,int2}" --iterations 2 \
              --json "$logs/prefill-attention-$side-$round.json" 2>&1 \
              | tee "$logs/prefill-attention-$side-$round.log"
          fi
        done
      done ;;
    chunk-ab)
      for round in 1 2; do
        for chunk in default "${CHUNK_AB:-8192}"; do
          echo "round $round, chunk $chunk"
          flags=()
          [[ $chunk != default ]] && flags=(--chunk-tokens "$chunk")
          stdbuf -oL ./build-gpu/src/cli/oscar bench prefill --model "${PREFILL_MODEL:-qwen3-8b}" \
            --prompt-lens "${PREFILL_LENS:-32768,100000}" --kv-dtypes "${PREFILL_KV:-bf16,int2}" \
            --repeats 1 "${flags[@]}" --json "$out/prefill-chunk-$chunk-$round.json" 2>&1 \
            | tee "$logs/prefill-chunk-$chunk-$round.log"
        done
      done ;;
    serve-32k)
      # The serving record of docs/bench/prefill.md: a checkpoint of transformers' own writing, its
      # rotations calibrated on the GPU, an in-process server with 75% of the free memory as pool.
      checkpoint=/tmp/qwen3-8b-random
      python3 bench/random_checkpoint.py --model qwen3-8b --out "$checkpoint" >"$logs/checkpoint.log" 2>&1 &&
        ./build-gpu/src/cli/oscar calibrate --model "$checkpoint" --device cuda --tokens 8192 \
          >"$logs/calibrate-32k.log" 2>&1 || { tail -5 "$logs/checkpoint.log" "$logs/calibrate-32k.log"; continue; }
      for kv in bf16 int2; do
        stdbuf -oL ./build-gpu/src/cli/oscar bench serve --model "$checkpoint" --device cuda --kv-cache-dtype "$kv" \
          --kv-pool-fraction 0.75 --num-requests 32 --input-len 32768 --output-len 512 --len-jitter 0 \
          --json "$out/serve_32k_$kv.json" 2>&1 | tee "$logs/serve-32k-$kv.log"
      done ;;
    prefill-attention)
      sample_clocks "$out/prefill_attention_clocks.csv"
      stdbuf -oL ./build-gpu/src/cli/oscar bench prefill-attention \
        --prompt-lens "${ATTENTION_LENS:-8192,32768,131072}" --iterations 2 \
        --json "$out/prefill_attention.json" 2>&1 | stamp_lines | tee "$logs/prefill_attention.log"
      kill "$sampler" ;;
    profile-prefill)
      tokens=${PROFILE_TOKENS:-32768}
      chunk=${PROFILE_CHUNK:-8448}
      for kv in bf16 int2; do
        # The first pass's last chunk: the launch after the prompt's other chunks.
        ncu --clock-control none --kernel-name regex:prefill_attention_kernel \
          --launch-skip $(((tokens + chunk - 1) / chunk - 1)) --launch-count 1 \
          --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
          --section SchedulerStats --section WarpStateStats --section Occupancy -f -o "$logs/ncu-$kv" \
          ./build-gpu/src/cli/oscar bench prefill-attention --prompt-lens "$tokens" --chunk-tokens "$chunk" \
          --kv-dtypes "$kv" --iterations 1 >"$logs/ncu-$kv.log" 2>&1
        echo "ncu $kv exit $?"
        ncu --import "$logs/ncu-$kv.ncu-rep" --csv --page details >"$out/prefill_attention_ncu_$kv.csv" ||
          tail -5 "$logs/ncu-$kv.log"
        # Every metric collected, among them the warp stall reasons the details page only summarizes.
        ncu --import "$logs/ncu-$kv.ncu-rep" --csv --page raw >"$out/prefill_attention_ncu_raw_$kv.csv"
      done ;;
    profile-kv-kernels)
      objects=build-gpu/src/backend/cuda/CMakeFiles/oscar_cuda.dir
      for source in kv_migrate prefill_attention kv_dequantize kv_write; do
        cuobjdump -sass "$objects/$source.cu.o" >"$logs/$source.sass"
      done
      tar cJf "$out/kv_kernels_sass.tar.xz" -C "$logs" kv_migrate.sass prefill_attention.sass \
        kv_dequantize.sass kv_write.sass
      prefill=(./build-gpu/src/cli/oscar bench prefill --model qwen3-8b --kv-dtypes int2 --repeats 1
               --prompt-lens "${PROFILE_TOKENS:-4096}")
      ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread \
        --launch-count "${PROFILE_LAUNCHES:-240}" -f -o "$logs/ncu-kv" "${prefill[@]}" >"$logs/ncu-kv.log" 2>&1
      echo "ncu kernels exit $?"
      ncu --import "$logs/ncu-kv.ncu-rep" --csv --page raw >"$out/kv_kernels_ncu.csv" || tail -5 "$logs/ncu-kv.log"
      ncu --clock-control none --kernel-name regex:fed_back_thread_rows --launch-skip 3 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
        --section SchedulerStats --section WarpStateStats --section Occupancy --section InstructionStats \
        -f -o "$logs/ncu-feedback" "${prefill[@]}" >"$logs/ncu-feedback.log" 2>&1
      echo "ncu feedback exit $?"
      ncu --import "$logs/ncu-feedback.ncu-rep" --csv --page raw >"$out/feedback_ncu_raw.csv" ||
        tail -5 "$logs/ncu-feedback.log" ;;
    calibrate)
      stdbuf -oL ./build-gpu/src/cli/oscar bench calibrate --model qwen3-8b --device cuda --json "$out/calibrate.json" 2>&1 | tee "$logs/calibrate.log" ;;
    kernels)
      ./build-gpu/tests/backend_tests --gtest_filter='CudaKernels.*:Formats/CudaDecodeAttention.*' 2>&1 | tee "$logs/kernels.log" | grep -E "relative|OK|FAIL" ;;
  esac
done
tar czf "$out/logs.tgz" -C "$logs" .
