#!/usr/bin/env bash
# The backend-lite study of the README, from nothing to its table: demonstrations, the warm
# start, then every arm. Resumable: rerun it after an interruption and every finished stage is
# skipped (rollouts continue their runs; the warm start is found by its name; the experiment skips
# what its store holds). Each start and stop is appended to times.log, so the study's wall time is
# the sum of its segments.
#
#   bash scripts/lite_study.sh [FOLDER]      # default: lite-study
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "${1:-lite-study}")
mkdir -p "$dir"
colbench=${COLBENCH:-$here/.venv/bin/colbench}
export COLBENCH_DB="sqlite:///$dir/lite.db"

echo "start $(date -u +%FT%TZ)" >> "$dir/times.log"
trap 'echo "stop $(date -u +%FT%TZ)" >> "$dir/times.log"' EXIT

# 160 expert demonstrations (4 per template) from lite-train tasks 201 on: tasks 1-200 are never
# demonstrated, so the first 100 (the study's train tasks) measure the warm start on unseen tasks.
"$colbench" rollout --engine scripted:expert --tasks backend-lite:train --offset 200 --limit 160 --name demos

# The warm start, as calibrated on the validation tasks (README: "Calibrating the warm start").
"$colbench" runs show warm >/dev/null 2>&1 ||
  "$colbench" policy fit --algo sft --split lite-train --full --lr 1e-4 --epochs 3 --name warm

# Every arm. The critics and every policy are full fine-tunes of the warm start (as it was made)
# at one learning rate, 1e-5, chosen before any test result was seen (a LoRA critic at the default
# 2e-5 left its Bradley-Terry loss at ln 2 on the train pairs); 100 train tasks x 4 samples;
# 100 tasks x 2 samples on each test set (200 trajectories per arm and set).
"$colbench" experiment backend --tasks backend-lite --model ckpt:warm --dir "$dir/study" \
  --train-tasks 100 -k 4 --test-tasks 100 --test-samples 2 --max-new-tokens 256 --best-of 4 \
  --sandbox bwrap --device cpu \
  --critic-full --critic-lr 1e-5 --critic-epochs 2 --critic-batch-size 4 --critic-grad-accum 2 --no-critic-gradient-checkpointing \
  --policy-candidates 8 --policy-full --policy-lr 1e-5
