#!/usr/bin/env bash
# All three benchmarks on a CUDA GPU in one go (DEVICE=auto picks cuda:0, DTYPE=auto picks fp16).
#   bench/speed/gpu.sh ASR_MODEL ASSISTANT_MODEL [OUT_DIR]
# ASR_MODEL/ASSISTANT_MODEL: Hub ids (e.g. openai/whisper-large-v3 distil-whisper/distil-large-v3) or local
# directories (e.g. from ../shared/tools/get_real_whisper.sh plus bench/speed/derive_assistant.py).
set -euo pipefail
cd "$(dirname "$0")/.."
asr=$1 assistant=$2 out=${3:-bench-results-gpu}
python=${PYTHON:-.venv/bin/python}
mkdir -p "$out"
"$python" -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))" | tee "$out/device.txt"
"$python" bench/speed/latency.py --asr-model "$asr" --assistant-model "$assistant" --runs 5 | tee "$out/latency.md"
"$python" bench/speed/scaling.py --asr-model "$asr" | tee "$out/scaling.md"
VUS=${VUS:-4} ITERATIONS=${ITERATIONS:-20} bench/speed/load.sh "$asr" "$assistant" | tee "$out/load.txt"
