#!/usr/bin/env bash
# Regenerate docs/leaderboard/ from real runs with the embedded model, as the README's "Results"
# describes: six systems on the first 20 MBPP+ tasks (MapCoder 10), three on the first 20
# HumanEval+ tasks, greedy, and two systems through `corebench serve` (the OpenAI-compatible
# backend, 5 MBPP+ tasks). Re-running resumes every run; about an hour on 2 cores.
#
#   bash scripts/leaderboard.sh [DATA_DIR]      # default ../shared/data
set -euo pipefail
cd "$(dirname "$0")/.."
DATA="${1:-../shared/data}"
RUNS=runs/leaderboard
CB=.venv/bin/corebench
PORT=8765
mkdir -p "$RUNS"

row() {  # BENCH SYSTEM LIMIT [run options...]
  local bench=$1 system=$2 limit=$3
  shift 3
  "$CB" run --system "$system" --bench "$bench" --limit "$limit" --data-dir "$DATA" \
    --no-progress "$@"
}

for system in direct cot self-debug corecode helper-main; do
  row mbpp "$system" 20 --out "$RUNS/emb-mbpp-$system"
done
row mbpp mapcoder 10 --out "$RUNS/emb-mbpp-mapcoder"
for system in direct corecode helper-main; do
  row humaneval "$system" 20 --out "$RUNS/emb-humaneval-$system"
done

"$CB" serve --model embedded --port "$PORT" &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" >/dev/null && break
  sleep 1
done
for system in direct corecode; do
  row mbpp "$system" 5 --model "openai:embedded@http://127.0.0.1:$PORT/v1" \
    --out "$RUNS/srv-mbpp-$system"
done
"$CB" leaderboard "$RUNS" --csv docs/leaderboard/leaderboard.csv --html docs/leaderboard/index.html
