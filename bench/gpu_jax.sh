#!/usr/bin/env bash
# The GPU table (../shared/GPU.md) in one command on a machine with JAX and a
# GPU but no TensorFlow and no package index: unpacks the carried wheels
# (.gpu_wheels/: keras, namex, optree, google-crc32c, packaging,
# typing_extensions for its Python), checks that the model core imports
# without TensorFlow, then runs bench/pretraining.py --backend=jax and the
# PyTorch peer (bench/gpu_hf_peer.py), each part under its own time limit
# (under 10 minutes in all), writing JSON and logs to $OUT.
#   OUT=/tmp/gpu_out bash bench/gpu_jax.sh
set -uo pipefail
OUT="${OUT:-/tmp/gpu_out}"
mkdir -p "$OUT" /tmp/site
python3 - <<'PY'
import glob, zipfile
for wheel in glob.glob(".gpu_wheels/*.whl"):
    zipfile.ZipFile(wheel).extractall("/tmp/site")
PY
export PYTHONPATH=/tmp/site KERAS_BACKEND=jax PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,power.limit --format=csv | tee "$OUT/gpu.txt"
python3 -c "import jax, keras, sys; import modeling.models, modeling.training.jax_steps; print(jax.__version__, jax.devices(), keras.__version__, 'tensorflow imported:', 'tensorflow' in sys.modules)" 2>&1 | tail -3 | tee -a "$OUT/gpu.txt"

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
