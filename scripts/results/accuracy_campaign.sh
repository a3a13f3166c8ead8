#!/usr/bin/env bash
# The accuracy campaign behind docs/results/README.md: perplexity of every KV method x group size
# 64/128 x with and without the bf16 sink/recent regions on the testbed's valid.xz, perplexity on
# text the testbed never saw, needle-in-a-haystack retrieval per method, per-layer attention error.
# Every result is one JSON file in OUT_DIR; a result already there is kept, so the campaign resumes
# where it stopped. scripts/results/make_report.py turns them into tables and figures.
#   usage: scripts/results/accuracy_campaign.sh [OUT_DIR] [OSCAR_BINARY]
#   environment: WINDOWS   perplexity windows of 4096 tokens (8)
#                DEVICE    cpu (the reference, default) or cuda
#                PARALLEL  jobs run at once (1); THREADS: CPU threads per job (0: all cores)
#                ONLY      an extended regular expression: run only the jobs whose names match
#                NIAH_PROMPTS  needle prompts per format and cell (3: 120 prompts per cache)
#                NIAH_SEEDS    more prompt seeds for NIAH (e.g. "$(seq 2 20)"; none by default): every
#                              cache's 120 prompts again per seed, in OUT_DIR/niah-seeds/
#                LIST=1    print the jobs instead of running them
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ ${1:-} != --job ]]; then export CAMPAIGN_OUT=${1:-docs/results/raw} CAMPAIGN_OSCAR=${2:-build/src/cli/oscar}; fi
export WINDOWS=${WINDOWS:-8} DEVICE=${DEVICE:-cpu} THREADS=${THREADS:-0} NIAH_PROMPTS=${NIAH_PROMPTS:-3}
out=$CAMPAIGN_OUT oscar=$CAMPAIGN_OSCAR
log() { echo "[$(date +%T)] $*" >&2; }

# One job: NAME KIND ARGS... (KIND: ppl, niah, niah-seed or attn-error); its result is
# $out/KIND-NAME.json, or $out/niah-seeds/NAME.json for niah-seed (no heat map).
if [[ ${1:-} == --job ]]; then
  name=$2 kind=$3; shift 3
  result=$out/$kind-$name.json
  [[ $kind == niah-seed ]] && mkdir -p "$out/niah-seeds" && result=$out/niah-seeds/$name.json
  [[ -s $result ]] && exit 0
  log "$kind $name"
  common=(--device "$DEVICE" --threads "$THREADS" --output "$result.partial")
  case $kind in
    ppl) "$oscar" eval ppl --windows "$WINDOWS" "${common[@]}" "$@" > /dev/null ;;
    niah) "$oscar" eval niah --prompts-per-cell "$NIAH_PROMPTS" --figure "$out/$kind-$name.svg" "${common[@]}" "$@" > /dev/null ;;
    niah-seed) "$oscar" eval niah --prompts-per-cell "$NIAH_PROMPTS" "${common[@]}" "$@" > /dev/null ;;
    attn-error) "$oscar" eval attn-error --figure "$out/$kind-$name.svg" "${common[@]}" "$@" > /dev/null ;;
  esac
  mv "$result.partial" "$result"  # only complete results count
  exit 0
fi

mkdir -p "$out"
rotations=$out/rotations.safetensors
rotations_seed1=$out/rotations-seed1.safetensors
# The same rotations in the published RotationZoo format (torch.save archives, format_version 2).
published_key=$out/k_rotation.pt published_value=$out/v_rotation.pt
published_files="--kv-rotations-k $published_key --kv-rotations-v $published_value"

# Text the testbed never saw: NVIDIA's CUDA runtime headers (English API documentation in C
# comments; the testbed was trained on Debian documentation and Linux sources).
unseen=$out/unseen.txt

# Flags of one method at one group size, with a 4-bit band of BAND tokens (0: none, the layout of
# the main table; OSCAR's default is 768); every INT2 method gets the same group parameters (q8)
# and clip ratios (OSCAR's defaults, 0.84 / 0.92), so the comparison is of the methods alone.
method_flags() {
  local method=$1 group=$2 band=${3:-0} file=${4:-$rotations}
  local flags="--kv-cache-dtype int2 --kv-method $method --kv-group-size $group --kv-scale-format q8 --kv-clip-k 0.84 --kv-clip-v 0.92"
  flags+=" --kv-band-tokens $band"
  [[ $method == oscar ]] && flags+=" --kv-rotations $file"
  echo "$flags"
}
no_regions="--kv-sink-tokens 0 --kv-recent-tokens 0"

jobs() {
  echo "bf16 ppl"
  for method in oscar quarot kivi naive; do echo "$method-g128 ppl $(method_flags $method 128)"; done
  for method in oscar quarot kivi naive; do echo "$method-g128 niah $(method_flags $method 128)"; done
  echo "bf16 niah"
  for method in oscar quarot kivi naive; do echo "$method-g64 ppl $(method_flags $method 64)"; done
  for group in 128 64; do
    for method in oscar quarot kivi naive; do
      echo "$method-g$group-noregions ppl $(method_flags $method $group) $no_regions"
    done
  done
  # OSCAR as published (f16 group parameters, fixed clip 0.96/0.92, rounded to nearest) and with
  # another calibration.
  for group in 128 64; do
    echo "oscar-g$group-published ppl --kv-cache-dtype int2 --kv-method oscar --kv-rotations $rotations" \
      "--kv-group-size $group --kv-scale-format f16 --kv-clip-k 0.96 --kv-clip-v 0.92" \
      "--no-kv-key-error-feedback --no-kv-value-error-feedback --kv-band-tokens 0"
  done
  # The published recipe exactly (--kv-preset oscar-published: row-quantile clipping 0.96/0.92, f32
  # group parameters, rounded to nearest, no band), with f16 parameters, and its Lloyd-Max codes
  # against error feedback under the same clipping and parameters; the preset again from the same
  # rotations written in the published torch.save format (the results must be identical).
  published="--kv-cache-dtype int2 --kv-method oscar --kv-rotations $rotations --kv-group-size 128"
  published+=" --kv-clip-mode row-quantile --kv-clip-k 0.96 --kv-clip-v 0.92 --kv-band-tokens 0"
  nearest="--no-kv-key-error-feedback --no-kv-value-error-feedback"
  echo "oscar-g128-published-rowquantile-f32 ppl --kv-preset oscar-published --kv-rotations $rotations"
  echo "oscar-g128-published-rowquantile-f32-pt ppl --kv-preset oscar-published $published_files"
  echo "oscar-g64-published-rowquantile-f16 ppl ${published/group-size 128/group-size 64} --kv-scale-format f16 $nearest"
  for text in "" "unseen-"; do
    file=""; [[ -n $text ]] && file="--text $unseen"
    [[ -n $text ]] && echo "${text}oscar-g128-published-rowquantile-f32 ppl $file --kv-preset oscar-published --kv-rotations $rotations"
    echo "${text}oscar-g128-published-rowquantile-f16 ppl $file $published --kv-scale-format f16 $nearest"
    echo "${text}oscar-g128-rowquantile-f32-lloydmax ppl $file $published --kv-scale-format f32 --kv-lloyd-max"
    echo "${text}oscar-g128-rowquantile-f32-feedback ppl $file $published --kv-scale-format f32"
  done
  echo "oscar-g128-published-rowquantile-f32 niah --kv-preset oscar-published --kv-rotations $rotations"
  echo "oscar-g128-rowquantile-f32-lloydmax niah $published --kv-scale-format f32 --kv-lloyd-max"
  echo "oscar-g128-rowquantile-f32-feedback niah $published --kv-scale-format f32"
  echo "oscar-g128-seed1 ppl $(method_flags oscar 128 0 "$rotations_seed1")"
  echo "int4-quarot-g128 ppl --kv-cache-dtype int4 --kv-method quarot --kv-group-size 128"
  echo "unseen-bf16 ppl --text $unseen"
  for method in oscar quarot kivi naive; do echo "unseen-$method-g128 ppl --text $unseen $(method_flags $method 128)"; done
  # Every method with the per-group clip search (least squared error) instead of fixed ratios: the
  # campaign's setting until 2026-11-24, kept for the comparison (docs/results/notes/2026-11-25-accuracy-experiments.md).
  for method in oscar quarot kivi naive; do
    echo "$method-g128-clipsearch ppl $(method_flags $method 128) --kv-clip-search"
    echo "unseen-$method-g128-clipsearch ppl --text $unseen $(method_flags $method 128) --kv-clip-search"
  done
  echo "all attn-error --kv-rotations $rotations"
  # A 4-bit band of 768 tokens behind the bf16 window (--kv-band-tokens; KIVI has none): the
  # methods that can have it, on both texts, and OSCAR's needles with it.
  for method in oscar quarot naive; do
    echo "$method-g128-band768 ppl $(method_flags $method 128 768)"
    echo "unseen-$method-g128-band768 ppl --text $unseen $(method_flags $method 128 768)"
  done
  echo "oscar-g128-band768 niah $(method_flags oscar 128 768)"
  # The needle prompts again with other seeds (the niah jobs above use seed 1): the run-to-run
  # spread of a 120-prompt result, and the gap to bf16 measured on more prompts.
  for seed in ${NIAH_SEEDS:-}; do
    echo "bf16-seed$seed niah-seed --seed $seed"
    for method in oscar quarot kivi naive; do
      echo "$method-g128-seed$seed niah-seed --seed $seed $(method_flags $method 128)"
    done
    echo "oscar-g128-band768-seed$seed niah-seed --seed $seed $(method_flags oscar 128 768)"
  done
}

if [[ ${LIST:-0} == 1 ]]; then jobs | grep -E "^(${ONLY:-.*}) "; exit 0; fi

selected=$(jobs | grep -E "^(${ONLY:-.*}) " || true)
calibrate() {  # file, seed
  [[ -f $1 ]] || ! grep -q "$1" <<< "$selected" && return
  log "calibrate seed $2"
  "$oscar" calibrate --data models/testbed/calib.xz --device "$DEVICE" --seed "$2" --out "$1" \
    > "$out/$(basename "$1" .safetensors).txt"
}
calibrate "$rotations" 0
calibrate "$rotations_seed1" 1
if grep -q "$published_key" <<< "$selected" && [[ ! -f $published_key ]]; then
  python3 tools/torch_save_rotations.py convert "$rotations" "$published_key" "$published_value"
fi
[[ -f $unseen ]] || cat /usr/local/cuda/include/cuda_runtime_api.h /usr/local/cuda/include/driver_types.h \
  /usr/local/cuda/include/cuda.h > "$unseen"

echo -n "$selected" | xargs -P "${PARALLEL:-1}" -L 1 bash "$0" --job
log done
