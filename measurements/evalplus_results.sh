#!/usr/bin/env bash
# EvalPlus's own results for every samples file of a study folder, for
# `measurements/rejudge_study.py FOLDER --results-from OUT` (which then compares them with
# corebench's verdicts and recomputes the study's comparisons). Run it where EvalPlus is
# importable, on this machine or another one with more CPUs:
#
#   MBPP_OVERRIDE_PATH=../shared/data/MbppPlus-v0.2.0.jsonl.gz \
#       bash measurements/evalplus_results.sh docs/studies/grpo-from-sft OUT [mbpp|humaneval]
#
# The data file comes from MBPP_OVERRIDE_PATH (or HUMANEVAL_OVERRIDE_PATH), EvalPlus's own
# setting; PARALLEL is its worker count (default: every CPU); PYTHON the interpreter with EvalPlus.
# Writes OUT/ROW.json.gz or OUT/ROW-seed-S.json.gz (EvalPlus's samples_eval_results.json) and
# prints each file's wall time (EvalPlus's, start-up included) and EvalPlus's last pass@1 line.
set -eu
folder=$1 out=$2 dataset=${3:-mbpp}
case "$dataset" in
  mbpp) : "${MBPP_OVERRIDE_PATH:?the MBPP+ data file}" ;;
  humaneval) : "${HUMANEVAL_OVERRIDE_PATH:?the HumanEval+ data file}" ;;
  *) echo "unknown dataset $dataset" >&2; exit 2 ;;
esac
python=${PYTHON:-python3}
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for f in "$folder"/*.jsonl "$folder"/*/seed-*.jsonl; do
  [ -e "$f" ] || continue
  case "$f" in *.results.jsonl) continue ;; esac
  rel=${f#"$folder"/}
  name=${rel%.jsonl}
  name=${name//\//-}
  mkdir "$scratch/$name"
  cp "$f" "$scratch/$name/samples.jsonl"
  start=$(date +%s)
  "$python" -m evalplus.evaluate --dataset "$dataset" --samples "$scratch/$name/samples.jsonl" \
    --parallel "${PARALLEL:-$(nproc)}" >"$scratch/$name/log.txt" 2>&1 || { tail -20 "$scratch/$name/log.txt"; exit 1; }
  gzip -c "$scratch/$name/samples_eval_results.json" >"$out/$name.json.gz"
  echo "$name: $(wc -l <"$f") samples, $(($(date +%s) - start)) s; EvalPlus: $(tail -1 "$scratch/$name/log.txt")"
done
