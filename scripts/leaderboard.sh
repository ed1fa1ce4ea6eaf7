#!/usr/bin/env bash
# Regenerate docs/leaderboard/ from real runs with the embedded model, as the README's "Results"
# describes: every system on the first 20 MBPP+ and HumanEval+ tasks (MapCoder 10), greedy, and
# four systems through `corebench serve` (the OpenAI-compatible backend, 5 MBPP+ tasks).
# Re-running resumes every run; about an hour on 2 cores.
#
#   bash scripts/leaderboard.sh [DATA_DIR]      # default ../shared/data
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-../shared/data}"
RUNS=runs/leaderboard
CB=.venv/bin/corebench
PORT=8765
mkdir -p "$RUNS"

for bench in mbpp humaneval; do
  for system in direct cot self-debug corecode helper-main mapcoder; do
    limit=20
    [ "$system" = mapcoder ] && limit=10
    "$CB" run --system "$system" --bench "$bench" --limit "$limit" --data-dir "$DATA" \
      --no-progress --out "$RUNS/emb-$bench-$system"
  done
done

"$CB" serve --model embedded --port "$PORT" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  sleep 1
done
for system in direct cot corecode helper-main; do
  "$CB" run --system "$system" --bench mbpp --limit 5 --data-dir "$DATA" --no-progress \
    --model "openai:embedded@http://127.0.0.1:$PORT/v1" --out "$RUNS/srv-mbpp-$system"
done

"$CB" leaderboard "$RUNS" --csv docs/leaderboard/leaderboard.csv --html docs/leaderboard/index.html
