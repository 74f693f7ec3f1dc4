#!/usr/bin/env bash
# Study 4 on backend-lite (studies/backend-lite-4/plan.md): does turn credit pay online? From nothing to its
# committed files. Resumable: rerun a stage after an interruption and what its store holds is skipped (an online run
# continues from its last checkpoint and stored dialogues). Each stage's start and stop go to times.log.
#
#   bash scripts/lite_study_4.sh start          # π0 and rft by the credit-signals study's recipe, their sha256 in
#                                               # times.log (rounds 1 and 2 restored from their files once saved)
#   bash scripts/lite_study_4.sh save           # round 1 (π0's dialogues rft trained on) and round 2 (rft's) into
#                                               # round1.jsonl and round2.jsonl, once round 2 is sampled
#   bash scripts/lite_study_4.sh arm ARM        # one arm from rft, read on lite-val (120 tasks x 4): rft-2 first
#                                               # (round 2, and rft's own read), then grpo, grpo+oracle, grpo+credit,
#                                               # grpo+infogain
#   bash scripts/lite_study_4.sh final [N]      # the fresh2 reads chosen.sh lists (its first N lines only): a line
#                                               # is an arm as `arm` names it, or rft, then --trainer-seed 1 or none
#   colbench study report studies/backend-lite-4 --curves studies/backend-lite-4/curves.png
#
# STORE (default: the credit-signals study's, whose rft every arm starts from) holds the store and checkpoints,
# never committed; the study's files go to studies/backend-lite-4.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:?usage: lite_study_4.sh start|save|arm ARM|final [N]}
# shellcheck source=scripts/study_env.sh
source "$here/scripts/study_env.sh" credit-signals backend-lite-4
# The credit-signals study's pinned kernels (its amendment 3): rft is rebuilt bit for bit under them on one machine
# (not on another: plan.md, amendment 3).
export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 DNNL_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2

# The plan's shared settings: round 2 = rft on lite-train tasks 101-200 x 4 (seed 0); every read of lite-val is its
# 120 tasks x 4 (seed 1); 256 tokens a turn at temperature 1; the built-in human; bwrap; full fine-tunes. rft itself
# is read only where a stage says so (--record-arm zero-shot=rft, a later flag winning): the others skip its read.
experiment() {
  local label=$1; shift
  timed "$label $*" "$colbench" experiment backend --tasks backend-lite --dir "$files" --label "$label" \
    --model "$(ckpt rft)" --train-offset 100 --train-tasks 100 -k 4 --test-tasks 120 --test-samples 4 \
    --max-new-tokens 256 --sandbox bwrap --device cpu --policy-full --record-arm zero-shot= --record-arm rft=rft-2 \
    --record-arm grpo=grpo --record-arm grpo-oracle=grpo+oracle "$@"
}
# The signal grpo+credit carries: the credit-signals study's choice by its plan's rule, from its committed values
# (`colbench study report studies/credit-signals`); plan.md names it in an amendment before the arm's first read.
carried() {
  "$colbench" study report "$here/studies/credit-signals" --json |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["carried"]["credit"] or "")'
}
# The online arms' one configuration (plan.md, "Arms"): 25 steps of 4 tasks x 4 dialogues (400 dialogues, round
# 2's size), lr 3e-6 in minibatches of 4 dialogues, clip 0.2, no KL term, truncated importance weights at 2 per token,
# token-mean loss, sampled by CTranslate2 on each step's weights; validation inside the run on lite-val's first 16
# tasks every 5 steps. No activation checkpointing: the same sums, faster, in memory to spare at 4 dialogues a pass.
online=(--policy-steps 25 --policy-tasks-per-step 4 --policy-group 4 --policy-lr 3e-6 --policy-batch-size 4
        --policy-clip 0.2 --policy-kl-beta 0 --policy-engine ct2 --policy-eval-every 5 --policy-eval-limit 16
        --policy-eval-samples 1 --policy-save-every 5 --no-policy-gradient-checkpointing)

# An arm's flags, the same for its lite-val read and its fresh2 reads, into $flags.
arm_flags() {
  case "$1" in
  rft) flags=(--arm rft --policy-lr 1e-5 --record-arm rft= --record-arm zero-shot=rft) ;;  # rft alone, rft-2 unread
  rft-2) flags=(--arm rft --policy-lr 1e-5) ;;
  grpo) flags=(--arm grpo "${online[@]}") ;;
  grpo+oracle) flags=(--arm grpo-oracle "${online[@]}") ;;
  grpo+credit)
    local credit
    credit=$(carried)
    case "$credit" in
    "") echo "the credit-signals study carries no signal online: grpo+credit is not run (plan.md)" >&2; exit 2 ;;
    # The critic online is the grpo-critic arm: a critic with c fitted on round 2's dialogues, as the study fits it.
    critic:*) flags=(--arm grpo-critic --record-arm grpo-critic=grpo+credit --critic-full --critic-lr 1e-5
                     --critic-epochs 2 --critic-batch-size 4 --critic-grad-accum 2 --no-critic-gradient-checkpointing
                     "${online[@]}") ;;
    *) flags=(--arm grpo-credit --turn-credit "$credit" --record-arm grpo-credit=grpo+credit "${online[@]}") ;;
    esac ;;
  grpo+infogain) flags=(--arm grpo-credit --turn-credit infogain --record-arm grpo-credit=grpo+infogain
                        "${online[@]}") ;;
  *) echo "unknown arm: $1 (rft-2, grpo, grpo+oracle, grpo+credit, grpo+infogain; rft on fresh2)" >&2; exit 2 ;;
  esac
}

case "$stage" in
start)
  # A session's store is lost when it ends: the rounds come back from their files (an hour of sampling less). Another
  # machine rebuilds other bits under the same kernels (plan.md, amendment 3), so the rebuilt π0's and rft's digests
  # are recorded for the account, not required to be the credit-signals study's.
  STORE=$store bash "$here/scripts/credit_signals.sh" base
  restore_dialogues "$files/round1.jsonl" "$(ckpt warm)" lite-train
  STORE=$store bash "$here/scripts/credit_signals.sh" rft
  for name in warm rft; do log rebuilt "$(digest "$name")"; done
  restore_dialogues "$files/round2.jsonl" "$(ckpt rft)" lite-train
  ;;
save)
  save_dialogues "$files/round1.jsonl" "$(ckpt warm)" lite-train
  save_dialogues "$files/round2.jsonl" "$(ckpt rft)" lite-train
  ;;
arm)
  arm=${2:?arm ARM: rft-2, grpo, grpo+oracle, grpo+credit or grpo+infogain}
  [ "$arm" != rft ] || { echo "arm: rft is read by rft-2's stage" >&2; exit 2; }
  arm_flags "$arm"
  # The first arm also reads rft itself on lite-val (the zero-shot of every arm here), recorded as rft.
  [ "$arm" != rft-2 ] || flags+=(--record-arm zero-shot=rft)
  experiment val "${flags[@]}"
  ;;
final)
  # The fresh2 reads in chosen.sh's order (all 412 tasks x 3 samples, label final): each line an arm and what else
  # its read takes (--trainer-seed 1 for the second training seed).
  chosen="$files/chosen.sh"
  [ -f "$chosen" ] || { echo "no $chosen: commit the validation choices first (plan.md)" >&2; exit 2; }
  # shellcheck source=/dev/null
  source "$chosen"  # defines final_reads
  reads=${2:-all}
  [[ $reads = all || $reads =~ ^[1-9][0-9]*$ ]] || { echo "final: a count of reads, not '$reads'" >&2; exit 2; }
  [ "$reads" = all ] || final_reads=$(grep -v '^$' <<< "$final_reads" | head -n "$reads")
  while read -r arm extra; do
    [ -z "$arm" ] && continue
    arm_flags "$arm"
    # shellcheck disable=SC2086  # the line's own flags, word by word
    # Through vLLM's CPU build, 2-3.5x CT2 here (plan.md, amendment 5); the arms still train as before.
    experiment final --evaluate-on fresh2 --test-tasks 412 --test-samples 3 --engine vllm-serve "${flags[@]}" $extra
  done <<< "$final_reads"
  ;;
*)
  echo "usage: lite_study_4.sh start|save|arm ARM|final [N]" >&2; exit 2 ;;
esac
