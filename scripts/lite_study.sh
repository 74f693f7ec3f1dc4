#!/usr/bin/env bash
# The backend-lite study of the README, from nothing to its committed files. Resumable: rerun
# it after an interruption and every finished stage is skipped (rollouts continue their runs; the
# warm start is found by its name; the experiment skips what its store holds). Each stage's start
# and stop go to studies/backend-lite/times.log.
#
#   bash scripts/lite_study.sh base        # demonstrations, warm start, zero-shot rollouts
#   bash scripts/lite_study.sh validate    # every configuration of the search, on lite-val
#   bash scripts/lite_study.sh validate c16      # ... only the configurations with that label
#   bash scripts/lite_study.sh final       # the chosen configurations, once, on the test sets
#   bash scripts/lite_study.sh final lite-test   # ... on one test set (lite-test, then lite-novel)
#
# STORE (default lite-study) holds the store and checkpoints, which are large and never
# committed; the study's own files (trajectories.jsonl, validation.jsonl, times.log) go to
# studies/backend-lite, from which `colbench study report studies/backend-lite` recomputes
# every table.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:?usage: lite_study.sh base|validate|final [test|lite-test|lite-novel]}
# shellcheck source=scripts/study_env.sh
source "$here/scripts/study_env.sh" lite-study backend-lite

# Every arm trains on the warm start's own dialogues on the first 100 lite-train tasks, 4
# samples each (tasks 201-360 are the demonstrations'; lite-val and the test sets are apart).
# Critics and policies are full fine-tunes of the warm start (a LoRA critic at 2e-5 stayed at
# ln 2 on the train pairs); 256 tokens per turn and 8 SWEET candidates, for 2 cores.
study() {
  local label=$1; shift
  [ -n "${only:-}" ] && [ "$label" != "$only" ] && return 0  # `validate LABEL`
  timed "$label $*" "$colbench" experiment backend --tasks backend-lite --model ckpt:warm --dir "$files" --label "$label" \
    --train-tasks 100 -k 4 --test-tasks 200 --test-samples 2 --max-new-tokens 256 --sandbox bwrap --device cpu \
    --critic-full --critic-lr 1e-5 --critic-epochs 2 --critic-batch-size 4 --critic-grad-accum 2 --no-critic-gradient-checkpointing \
    --policy-candidates 8 --policy-full "$@"
}

case "$stage" in
base)
  # 160 expert demonstrations (4 per template) from lite-train tasks 201 on.
  timed demos "$colbench" rollout --engine scripted:expert --tasks backend-lite:train --offset 200 --limit 160 --name demos
  # The warm start, as calibrated on validation (README: "Calibrating the warm start").
  "$colbench" runs show warm >/dev/null 2>&1 ||
    timed warm "$colbench" policy fit --algo sft --split lite-train --full --lr 1e-4 --epochs 3 --name warm
  ;;
validate)
  only=${2:-}
  # Every arm gets three configurations, chosen before any result: the paper's recipe at the
  # study's step (lr 1e-5, NLL 0.01), a larger NLL weight on the chosen side (RPO), and a smaller
  # step with it. Rejection fine-tuning has no NLL term: its three are learning rates. The
  # oracle-ranked control runs beside SWEET-RL in each, and goes first: until some actor
  # setting beats the warm start with a perfect ranking, no critic can help (the paper's
  # step lost 6.7 points on validation with the oracle's ranking: README, "The second backend-lite
  # study").
  study paper --policy-lr 1e-5 --arm sweet-oracle
  study nll1 --policy-lr 1e-5 --policy-nll-weight 1.0 --arm sweet-oracle --arm sweet
  study small --policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet-oracle --arm sweet
  # Then the rivals SWEET-RL must beat, at the NLL remedy that lifted it first and at the small
  # step the final read them at (trained then; only their validation is new), so that every
  # final comparison has a tuned rival as early as possible; then the rest of rejection
  # fine-tuning's learning rates, best-of-N, and the paper's step for the others last.
  study nll1 --policy-lr 1e-5 --policy-nll-weight 1.0 --arm mtdpo --arm sweet-no-c
  study small --policy-lr 3e-6 --policy-nll-weight 1.0 --arm mtdpo --arm sweet-no-c
  study rft-3e-6 --policy-lr 3e-6 --arm rft
  study paper --policy-lr 1e-5 --arm rft
  study rft-3e-5 --policy-lr 3e-5 --arm rft
  # The search's edges, one step further, added once the three were read: rejection fine-tuning
  # won at its largest rate, every DPO arm at its smallest step. Each arm has four in all.
  study tiny --policy-lr 1e-6 --policy-nll-weight 1.0 --arm sweet-oracle --arm sweet
  study rft-1e-4 --policy-lr 1e-4 --arm rft
  study tiny --policy-lr 1e-6 --policy-nll-weight 1.0 --arm mtdpo --arm sweet-no-c
  # The critic's ranking without the warm start's log-prob gain from c (--score critic), at
  # SWEET-RL's best setting: whether the paper's score, and not the critic, loses the signal.
  study small --policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet-critic
  # Best-of-N: the warm start with the critic picking each turn of 8 samples (the paper's N is 32):
  # the critic's ranking used at test time, with no actor update to lose it.
  study small --policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet --best-of 8
  # The paper's step for the rest runs on the rebuilt store (README, "The second backend-lite study"),
  # under its own label, with that store's zero-shot read (`paper` holds the first store's); one arm
  # a call, the rival first.
  study paper-rebuilt --policy-lr 1e-5 --arm mtdpo
  study paper-rebuilt --policy-lr 1e-5 --arm sweet-no-c
  study paper-rebuilt --policy-lr 1e-5 --arm sweet
  # Beyond the paper: a second, on-policy round of SWEET-RL on lite-train tasks 361-460, from
  # SWEET-RL at its best setting (small), which it retrains under its own label (with its own
  # zero-shot read) so that the round's figures never mix with another store's.
  study rounds --policy-lr 3e-6 --policy-nll-weight 1.0 --arm sweet --rounds 2 --rounds-offset 360
  # 16 candidates a turn instead of 8, at SWEET-RL's best setting, then its oracle control: the
  # one remedy left that might put more answers against each other (README, "Remedies not run").
  # One arm a call, so that SWEET-RL's figure lands first.
  study c16 --policy-lr 3e-6 --policy-nll-weight 1.0 --policy-candidates 16 --arm sweet
  study c16 --policy-lr 3e-6 --policy-nll-weight 1.0 --policy-candidates 16 --arm sweet-oracle
  ;;
final)
  # The configuration each arm won on validation (README: "The second backend-lite study"), each arm
  # once on all 160 lite-test tasks and 200 lite-novel tasks, 2 samples each.
  chosen="$files/chosen.sh"
  [ -f "$chosen" ] || { echo "no $chosen: choose each arm's configuration on validation first" >&2; exit 2; }
  # shellcheck source=/dev/null
  source "$chosen"  # defines final_arms: one line per arm, its experiment flags
  while read -r line; do
    [ -n "$line" ] && eval "study final --evaluate-on ${2:-test} $line"
  done <<< "$final_arms"
  ;;
*)
  echo "usage: lite_study.sh base|validate|final" >&2; exit 2 ;;
esac
