#!/usr/bin/env bash
# The GPU table (../shared/GPU.md) in one command on a machine with JAX and a
# GPU but no TensorFlow and no package index: unpacks the carried wheels
# (.gpu_wheels/: keras, namex, optree, google-crc32c, packaging,
# typing_extensions for its Python), checks that the model core imports
# without TensorFlow, then runs bench/pretraining.py --backend=jax and the
# PyTorch peer (bench/gpu_hf_peer.py), each part under its own time limit
# (under 10 minutes in all), writing JSON and logs to $OUT.
#   OUT=/tmp/gpu_out bash bench/gpu_jax.sh
# PART=profile instead checks the flash-attention kernels on the GPU, traces
# the headline mode (bench/jax_profile.py) and
# times its variants (VARIANTS), each mode of PROFILE_MODES in turn, with the
# PyTorch peer in the same call if HF_PEER=1:
#   PART=profile PROFILE_MODES="mixed_bfloat16:128:256" HF_PEER=1 bash bench/gpu_jax.sh
# PART=xla: only the XLA_VARIANTS timings (below).
# PART=large: BERT-large's shapes (JAX_LARGE modes).
# PART=finetune: the MiniLM MRPC fine-tuning of bench/finetune_features.py
# (run its prepare step first, here).
set -uo pipefail
OUT="${OUT:-/tmp/gpu_out}"
mkdir -p "$OUT" /tmp/site
python3 - <<'PY'
import glob, zipfile
for wheel in glob.glob(".gpu_wheels/*.whl"):
    zipfile.ZipFile(wheel).extractall("/tmp/site")
PY
export PYTHONPATH="/tmp/site:$PWD" KERAS_BACKEND=jax PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, keras, sys; import modeling.models, modeling.training.jax_steps; print(jax.__version__, jax.devices(), keras.__version__, 'tensorflow imported:', 'tensorflow' in sys.modules)" 2>&1 | tail -3 | tee -a "$OUT/gpu.txt"

if [ "${PART:-table}" = finetune ]; then
  # MiniLM on MRPC from the features bench/finetune_features.py prepared
  # (carried in .gpu_data/: no TensorFlow here for run_classifier.py).
  timeout "${FINETUNE_SECONDS:-300}" python3 bench/finetune_features.py train \
    --data="${FINETUNE_DATA:-.gpu_data/mrpc}" --precisions="${FINETUNE_PRECISIONS:-mixed_bfloat16,float32}" \
    --seeds="${FINETUNE_SEEDS:-1,2,3}" --out="$OUT/finetune_mrpc.json" \
    2> /tmp/finetune.stderr
  echo "finetune exit $?"; tail -c 600 /tmp/finetune.stderr
  exit 0
fi

# XLA_VARIANTS: XLA_FLAGS values (one per word; "-" for none), each timed on
# the first of PROFILE_MODES in a process of its own.
xla_variants() {
  local i=0 flags
  for flags in ${XLA_VARIANTS:-}; do
    i=$((i + 1))
    [ "$flags" = - ] && flags=""
    XLA_FLAGS="$flags" timeout "${XLA_SECONDS:-90}" python3 bench/pretraining.py \
      --backend=jax --jax_modes="${PROFILE_MODES%% *}" --steps=20 \
      --warmup=2 --matmul_n=4096 --budget=60 --out="$OUT/xla_$i.json" \
      > /dev/null 2> /tmp/xla_$i.stderr
    echo "${flags:-(none)} exit $?: $(grep -o '"step_seconds": [0-9.]*' "$OUT/xla_$i.json")"
    tail -c 200 /tmp/xla_$i.stderr
  done
}
PROFILE_MODES="${PROFILE_MODES:-mixed_bfloat16:128:256}"
if [ "${PART:-table}" = xla ]; then
  xla_variants
  exit 0
fi

if [ "${PART:-table}" = profile ]; then
  # First the flash-attention kernels' numbers on this GPU (Triton) against
  # XLA ops: the CPU test's job (tests/jax_worker.py), run here.
  timeout 180 python3 tests/jax_worker.py "$OUT" "" flash_attention > /dev/null 2> /tmp/flash.stderr
  echo "flash check exit $?"; tail -c 300 /tmp/flash.stderr
  python3 - "$OUT/flash_attention.npz" <<'PY'
import sys, numpy as np
d = np.load(sys.argv[1])
for key in sorted(k for k in d.files if k.startswith("kernel_")):
    want = d[key.replace("kernel_", "reference_")]
    diff = np.abs(d[key][:2] - want[:2]).max() / np.abs(want).max()
    print(key, "max |diff| / max |reference|:", float(diff))
PY
  # Where a mode's step goes: its kernels, the compiled program if HLO=1
  # (to read the fusions' names), and the variants' step times; then the
  # PyTorch peer if HF_PEER=1, in the same call.
  for mode in $PROFILE_MODES; do
    name=profile_${mode//:/_}
    timeout "${PROFILE_SECONDS:-200}" python3 bench/jax_profile.py \
      --mode="$mode" --top=60 --steps="${TRACE_STEPS:-3}" \
      --variants="${VARIANTS:-baseline,flash_attention,flash_attention_w8,flash_attention_b128_w8,keras_dropout}" \
      $([ "${HLO:-0}" = 1 ] && echo --hlo_out="$OUT/hlo.txt.gz") \
      --out="$OUT/$name.json" > /dev/null 2> "/tmp/$name.stderr"
    echo "$mode exit $?"; tail -c 300 "/tmp/$name.stderr"
    grep '"step_seconds"' "$OUT/$name.json"; grep -A16 '"variants"' "$OUT/$name.json"
    if [ "${HF_PEER:-0}" = 1 ]; then
      HF_PEER=0
      timeout 160 python3 bench/gpu_hf_peer.py --precisions=bf16 \
        --budget=110 --deadline=150 --out="$OUT/hf_peer.json" > /tmp/hf.log 2>&1
      echo "hf peer exit $?"; tail -12 /tmp/hf.log
    fi
  done
  xla_variants
  exit 0
fi

jax_bench() {  # name seconds modes [extra flags]
  local name=$1 seconds=$2 modes=$3; shift 3
  timeout "$seconds" python3 bench/pretraining.py --backend=jax \
    --jax_modes="$modes" --steps=20 --warmup=2 \
    --matmul_n="${MATMUL_N:-8192}" --budget=$((seconds - 70)) \
    --out="$OUT/$name.json" "$@" > "$OUT/$name.stdout" 2> "$OUT/$name.stderr"
  echo "$name exit $?"
  python3 - "$OUT/$name.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print({k: r.get(k) for k in ("mode", "sequences_per_sec", "mfu_datasheet", "mfu_measured", "matmul_measured_tflops", "peak_device_gib", "compile_and_warmup_seconds", "loss", "skipped")}, str(r.get("error", ""))[-300:])
PY
}
if [ "${PART:-table}" = large ]; then
  # BERT-large's shapes (24 layers, 1024 wide, 16 heads).
  jax_bench jax_large "${LARGE_SECONDS:-400}" \
    "${JAX_LARGE:-mixed_bfloat16:128:128,mixed_bfloat16:512:32,float32:128:64}" \
    --model=large
  exit 0
fi
overrides="${CONFIG_OVERRIDES:-}"
jax_bench jax_first "${FIRST_SECONDS:-150}" \
  "${JAX_FIRST:-mixed_bfloat16:128:256,mixed_bfloat16:512:64}" \
  --config_overrides="$overrides"
if [ "${HF_PEER:-1}" = 1 ]; then
  timeout 170 python3 bench/gpu_hf_peer.py --precisions=bf16 \
    --budget=120 --deadline=160 --out="$OUT/hf_peer.json" > "$OUT/hf_peer.stdout" 2>&1
  echo "hf peer exit $?"; tail -c 1200 "$OUT/hf_peer.stdout"
fi
jax_bench jax_rest "${REST_SECONDS:-170}" \
  "${JAX_REST:-float32:128:256,mixed_bfloat16:128:512,float32:512:64}" \
  --config_overrides="$overrides"
# Diagnosis: the headline mode without dropout (its random bits' cost).
if [ -z "$overrides" ]; then
  jax_bench jax_no_dropout 75 mixed_bfloat16:128:256 \
    --config_overrides='{"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}'
fi
