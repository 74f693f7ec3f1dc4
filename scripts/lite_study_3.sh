#!/usr/bin/env bash
# Study 3 on backend-lite (studies/backend-lite-3/plan.md), from nothing to its committed files. Resumable: rerun a
# stage after an interruption and what its store holds is skipped. Each stage's start and stop go to times.log.
#
#   bash scripts/lite_study_3.sh base           # demonstrations and the warm start
#   bash scripts/lite_study_3.sh rft            # rejection fine-tuning of the warm start (and the warm start's read)
#   bash scripts/lite_study_3.sh round2 LABEL   # one configuration of the arms that start from rft (LABEL below)
#   bash scripts/lite_study_3.sh round2 sweet-c 3e-6   # configuration (c): question turns, at (a)'s or (b)'s step
#   bash scripts/lite_study_3.sh final                 # the fresh split, once per read that chosen.sh lists
#   bash scripts/lite_study_3.sh final 5               # chosen.sh's first 5 lines only (the rest past the budget)
#   bash scripts/lite_study_3.sh novel 5               # the same arms (seed 0) on lite-novel: facts and asking only
#   bash scripts/lite_study_3.sh online grpo 1e-6      # an online arm from rft: grpo, grpo-critic or grpo-oracle, LR
#   bash scripts/lite_study_3.sh rebuilt round2 sweet-a  # a stage retrained after its store was lost (below)
#
# STORE (default lite-study-3) holds the store and checkpoints, never committed; the study's files go to
# studies/backend-lite-3, from which `colbench study report studies/backend-lite-3` recomputes every table.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:?usage: lite_study_3.sh [rebuilt] base|rft|round2 LABEL|final [N]|novel [N]|online ARM LR}
# `rebuilt STAGE ...`: the stage after its store was lost (plan.md, stopping rules), retrained where the store lacks
# it; its reads are recorded under LABEL-rebuilt (colbench/study.py's REBUILT), beside the original reads that the
# committed choices rest on. The final reads happen once, on whatever build the store holds: never `rebuilt final`.
suffix=""
if [ "$stage" = rebuilt ]; then
  suffix=-rebuilt
  shift
  stage=${1:?usage: lite_study_3.sh rebuilt rft|round2 LABEL}
  case "$stage" in rft | round2) ;; *) echo "rebuilt: only rft or round2 stages record validation reads" >&2; exit 2 ;; esac
fi
# shellcheck source=scripts/study_env.sh
source "$here/scripts/study_env.sh" lite-study-3 backend-lite-3

# The plan's shared settings: 100 train tasks x 4 samples a round, every lite-val task x 4 samples, 256 tokens a
# turn, full fine-tunes, the second study's critic, 8 SWEET candidates a turn.
experiment() {
  local label=$1$suffix; shift
  timed "$label $*" "$colbench" experiment backend --tasks backend-lite --dir "$files" --label "$label" \
    --train-tasks 100 -k 4 --test-tasks 200 --test-samples 4 --max-new-tokens 256 --sandbox bwrap --device cpu \
    --critic-full --critic-lr 1e-5 --critic-epochs 2 --critic-batch-size 4 --critic-grad-accum 2 \
    --no-critic-gradient-checkpointing --policy-candidates 8 --policy-full "$@"
}

# The checkpoint an arm's validation line names (validation.jsonl), e.g. rft's, which round 2 starts from.
model_of() {
  python3 -c 'import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(next(r["model"] for r in rows if r["arm"] == sys.argv[2] and r["label"] == sys.argv[3]))' \
    "$files/validation.jsonl" "$1" "$2"
}

# Round 2: from rft, on lite-train tasks 101-200; critics refit on both rounds' dialogues. The zero-shot read of
# rft is rft's own (label rft): not recorded again.
round2() {
  local label=$1; shift
  experiment "$label" --model "$(model_of rft "rft$suffix")" --train-offset 100 --critic-policy ckpt:warm \
    --record-arm zero-shot= --record-arm rft=rft-2 --record-arm sweet=rft+sweet \
    --record-arm sweet-oracle=rft+sweet-oracle "$@"
}

case "$stage" in
base)
  timed demos "$colbench" rollout --engine scripted:expert --tasks backend-lite:train --offset 200 --limit 160 \
    --name demos
  "$colbench" runs show warm >/dev/null 2>&1 ||
    timed warm "$colbench" policy fit --algo sft --split lite-train --full --lr 1e-4 --epochs 3 --name warm
  ;;
rft)
  experiment rft --model ckpt:warm --arm rft --policy-lr 3e-5
  ;;
round2)
  label=${2:?round2 LABEL: rft2-1e-5, rft2-3e-5, oracle-a, oracle-b, sweet-a, sweet-b, oracle-c LR, sweet-c LR}
  case "$label" in
  rft2-1e-5) round2 "$label" --arm rft --policy-lr 1e-5 ;;
  rft2-3e-5) round2 "$label" --arm rft --policy-lr 3e-5 ;;
  oracle-a) round2 "$label" --arm sweet-oracle --policy-lr 3e-6 --policy-nll-weight 1.0 ;;
  oracle-b) round2 "$label" --arm sweet-oracle --policy-lr 1e-5 --policy-nll-weight 1.0 ;;
  sweet-a) round2 "$label" --arm sweet --policy-lr 3e-6 --policy-nll-weight 1.0 ;;
  sweet-b) round2 "$label" --arm sweet --policy-lr 1e-5 --policy-nll-weight 1.0 ;;
  # (c): the better step of (a) and (b) on validation (the plan's rule), on question turns only.
  oracle-c) round2 "$label" --arm sweet-oracle --policy-lr "${3:?oracle-c LR: oracle-a's or oracle-b's step}" \
    --policy-nll-weight 1.0 --policy-turns questions ;;
  sweet-c) round2 "$label" --arm sweet --policy-lr "${3:?sweet-c LR: sweet-a's or sweet-b's step}" \
    --policy-nll-weight 1.0 --policy-turns questions ;;
  *) echo "unknown round2 label: $label" >&2; exit 2 ;;
  esac
  ;;
final | novel)
  # The final reads in the order chosen.sh lists them (plan.md, "The final reads"): each line is `rft FLAGS` (the
  # experiment from the warm start: it reads the warm start and rft) or `round2 FLAGS` (from rft), with
  # --trainer-seed 1 for a second training seed. `final`: lite-fresh, all 416 tasks x 3 samples, label final.
  # `novel`: lite-novel, its 250 tasks x 1, the seed-0 lines only, label novel (plan.md, "lite-novel").
  # A count N runs only the first N lines: the plan reads the later ones only within its 6 h budget.
  chosen="$files/chosen.sh"
  [ -f "$chosen" ] || { echo "no $chosen: commit the validation choices first (plan.md, rule 4)" >&2; exit 2; }
  # shellcheck source=/dev/null
  source "$chosen"  # defines final_reads
  reads=${2:-all}
  [[ $reads = all || $reads =~ ^[1-9][0-9]*$ ]] || { echo "$stage: a count of reads, not '$reads'" >&2; exit 2; }
  [ "$reads" = all ] || final_reads=$(grep -v '^$' <<< "$final_reads" | head -n "$reads")
  split=(--evaluate-on fresh --test-tasks 416 --test-samples 3)
  [ "$stage" = final ] || split=(--evaluate-on lite-novel --test-tasks 250 --test-samples 1)
  while read -r kind flags; do
    [[ $stage = novel && $flags = *--trainer-seed* ]] && continue
    case "$kind" in
    "") ;;
    rft) eval "experiment $stage --model ckpt:warm ${split[*]} $flags" ;;
    round2) eval "round2 $stage ${split[*]} $flags" ;;
    *) echo "chosen.sh: a final read is 'rft FLAGS' or 'round2 FLAGS', not '$kind'" >&2; exit 2 ;;
    esac
  done <<< "$final_reads"
  ;;
online)
  # The plan's online arms from rft: 25 steps of 8 tasks x 4 dialogues, clip 0.2, at 1e-6 or 3e-6 (the plan's two),
  # rolled out by CTranslate2 on each step's weights. Not run in this study (plan.md, amendment 1).
  arm=${2:?online ARM LR: grpo, grpo-critic or grpo-oracle}
  lr=${3:?online ARM LR: 1e-6 or 3e-6}
  case "$arm" in grpo | grpo-critic | grpo-oracle) ;; *) echo "unknown online arm: $arm" >&2; exit 2 ;; esac
  round2 "$arm-$lr" --arm "$arm" --policy-lr "$lr" --policy-steps 25 --policy-tasks-per-step 8 --policy-group 4 \
    --policy-clip 0.2 --policy-engine ct2 \
    --record-arm grpo=grpo --record-arm grpo-critic=grpo+critic --record-arm grpo-oracle=grpo+oracle
  ;;
*)
  echo "usage: lite_study_3.sh base|rft|round2 LABEL|final [N]|novel [N]|online ARM LR" >&2; exit 2 ;;
esac
