#!/usr/bin/env bash
# The credit-signals study (studies/credit-signals/plan.md), from nothing to its committed files. Resumable: rerun a
# stage after an interruption and what its store holds is skipped. Each stage's start and stop go to times.log.
#
#   bash scripts/credit_signals.sh base        # π0: study 3's demonstrations and warm start
#   bash scripts/credit_signals.sh rft         # round 1 (π0 on lite-train 1-100 x 4) and rejection fine-tuning
#   bash scripts/credit_signals.sh dialogues   # π0 and rft on every lite-val task x 2 (seed 1): the scored dialogues
#   bash scripts/credit_signals.sh candidates  # 4 candidates at every agent turn of them (seed 2), with their truth
#   bash scripts/credit_signals.sh critics     # the critic with and without c, on round 1's dialogues
#   bash scripts/credit_signals.sh score SIGNAL  # one signal's values into values.jsonl: controls, critics,
#                                                # infogain, ref-infogain, mc (last; per policy, on its subset)
#   bash scripts/credit_signals.sh save        # the scored dialogues (and candidates, once made) into files
#   bash scripts/credit_signals.sh restore     # them into a fresh store, first; then base and rft again
#   bash scripts/credit_signals.sh check [FILE [NAME...]]  # whether the rebuilt π0 and rft are the saved ones
#                                                # (sha256; FILE scorers.sha256: the scorers amendment 3 fixed;
#                                                # NAMEs: only those lines)
#   bash scripts/credit_signals.sh scorers     # the rebuilt policies' and critics' sha256 into scorers.sha256
#                                              # (amendment 3)
#   bash scripts/credit_signals.sh drift POLICY  # how far a rebuilt policy is from the one that sampled its candidates
#   bash scripts/credit_signals.sh cost        # every signal's seconds a turn, alone, on one subset, 3 times:
#                                              # cost.jsonl
#   colbench study report studies/credit-signals # every table, from values.jsonl alone
#
# STORE (default credit-signals) holds the store and checkpoints, never committed; the study's files go to
# studies/credit-signals (values.jsonl: every value beside its truth; times.log). A session's store is lost when it
# ends, so `save` writes what the scores are made on as committed files: dialogues-warm.jsonl and dialogues-rft.jsonl
# (each policy's scored dialogues, with every agent turn's prompt and every trajectory and turn id),
# checkpoints.sha256 (the weights that made them) and, once the candidates run is finished, candidates.jsonl. A later
# session runs `restore` on a fresh store before anything else (the dialogues take their own ids, and what is made
# after them takes the next ones, so no id collides and values.jsonl's rows, keyed by trajectory and turn id, stay
# valid; checkpoint ids 1 and 2 are π0's and rft's again, as a fresh store numbers them), then `base` and `rft`,
# then `check`: the same sha256 means the rebuilt policies are the ones that made the dialogues.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
stage=${1:?usage: credit_signals.sh base|rft|dialogues|candidates|critics|score SIGNAL|save|restore|scorers|check|drift|cost}
# shellcheck source=scripts/study_env.sh
source "$here/scripts/study_env.sh" credit-signals credit-signals
# PyTorch picks its CPU kernels by the instruction set it finds, and AVX-512's round otherwise than AVX2's (four
# training steps of the 135M model end on other bits under the two): a session on another machine rebuilt other
# weights from the same recipe (amendment 3). Every stage runs AVX2's kernels, which every x86 machine here has:
# PyTorch's own, MKL's and oneDNN's, and CTranslate2's (the sampler, which picked AVX2 on this machine anyway).
export ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 DNNL_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2

# The plan's shared settings: 256 tokens a turn at temperature 1, the built-in human, bwrap.
turns=(--max-new-tokens 256 --temperature 1 --sandbox bwrap)
critic=(--model ckpt:warm --split lite-train --full --lr 1e-5 --epochs 2 --batch-size 4 --grad-accum 2
        --no-gradient-checkpointing --device cpu)

# Whether the store holds a finished run of that name.
have() {
  "$colbench" runs show "$1" --json 2>/dev/null |
    python3 -c 'import json, sys; sys.exit(json.load(sys.stdin).get("status") != "done")' 2>/dev/null
}

# Where every signal is scored: lite-val's dialogues and the candidates' same-state pairs, answers graded in bwrap.
scoring=(--tasks backend-lite:val --pairs-from val-candidates --sandbox bwrap --device cpu)
# A scored signal's `credit eval` flags: π0 the model signals' scorer, the critics by their specs (amendment 1), mc
# played by a policy (the dialogue's own; π0 for `cost`) with the plan's K, tokens, temperature and seed.
credit_flags() {
  case "$1" in
  oracle | random) echo "--credit $1" ;;
  critic | critic-noc) echo "--credit critic:ckpt:$1" ;;
  infogain | ref-infogain) echo "--credit $1 --model ckpt:warm" ;;
  mc) echo "--credit mc --model ckpt:${2:-warm} --mc-samples 4 --mc-max-new-tokens 256 --mc-temperature 1 --seed 0" ;;
  esac
}

case "$stage" in
base)
  timed demos "$colbench" rollout --engine scripted:expert --tasks backend-lite:train --offset 200 --limit 160 \
    --name demos
  have warm || timed warm "$colbench" policy fit --algo sft --split lite-train --full --lr 1e-4 --epochs 3 --name warm
  ;;
rft)
  timed round1 "$colbench" rollout --model ckpt:warm --tasks backend-lite:train --limit 100 -k 4 "${turns[@]}" \
    --name round1
  # Activation checkpointing, as study 3's rft had (its study_policy()): the same sums, in less memory; without it
  # rft's batches of 32 dialogues took more than this machine's 24 GB (2026-12-06, under the pinned kernels).
  have rft || timed rft "$colbench" policy fit --algo rft --model ckpt:warm --split lite-train \
    --policies "$(ckpt warm)" --full --lr 3e-5 --epochs 4 --gradient-checkpointing --device cpu --name rft
  ;;
dialogues)
  for policy in warm rft; do
    timed "dialogues-$policy" "$colbench" rollout --model ckpt:"$policy" --tasks backend-lite:val -k 2 --seed 1 \
      "${turns[@]}" --name "val-$policy"
  done
  ;;
candidates)
  timed candidates "$colbench" credit sample --tasks backend-lite:val --policies "$(ckpt warm),$(ckpt rft)" \
    --candidates 4 --seed 2 --max-new-tokens 256 --temperature 1 --sandbox bwrap --name val-candidates
  ;;
critics)
  have critic || timed critic "$colbench" critic fit "${critic[@]}" --policies "$(ckpt warm)" --training-info \
    --name critic
  have critic-noc || timed critic-noc "$colbench" critic fit "${critic[@]}" --policies "$(ckpt warm)" \
    --no-training-info --name critic-noc
  ;;
score)
  # Each signal on the scored dialogues and the candidates' same-state pairs, π0 its model (the plan's scorer).
  scored=("${scoring[@]}" --values-out "$files/values.jsonl" --json)
  # Only the scored dialogues: the store also holds other lite-val dialogues (an online run's validation).
  studied=(--policies "$(cut -d' ' -f2 "$files/checkpoints.sha256" | paste -sd,)")
  signal=${2:?score SIGNAL: controls, critics, infogain, ref-infogain or mc}
  case "$signal" in
  controls) timed score-controls "$colbench" credit eval $(credit_flags oracle) $(credit_flags random) \
    "${studied[@]}" "${scored[@]}" ;;
  critics) timed score-critics "$colbench" credit eval $(credit_flags critic) $(credit_flags critic-noc) \
    "${studied[@]}" "${scored[@]}" ;;
  infogain | ref-infogain) timed "score-$signal" "$colbench" credit eval $(credit_flags "$signal") \
    "${studied[@]}" "${scored[@]}" ;;
  mc)  # the dialogue's own policy plays the continuations: one command per policy, on the first 25 tasks' dialogues
    for policy in warm rft; do
      timed "score-mc-$policy" "$colbench" credit eval $(credit_flags mc "$policy") \
        --policies "$(ckpt "$policy")" --task-limit 25 "${scored[@]}"
    done ;;
  *) echo "unknown signal: $signal (controls, critics, infogain, ref-infogain, mc)" >&2; exit 2 ;;
  esac
  ;;
cost)
  # The scoring runs' seconds count whatever else shared the 2 cores in their session (amendment 6), so the cost
  # figures are measured apart: every signal recomputed on one subset (π0's dialogues of the first 3 lite-val tasks
  # and 12 of their states' candidates) in a copy of the store holding no value, one signal at a time. Run it with
  # nothing else running. Three repeats (amendment 8), each signal's runs interleaved with the others', so the cost
  # has a range: their rows go to cost.jsonl tagged with their repeat, whose seconds `study report` reads as the cost.
  # A repeat already in cost.jsonl is skipped (the stage resumes by repeat).
  for repeat in 1 2 3; do
    if [ -f "$files/cost.jsonl" ] && grep -q "\"repeat\": $repeat}" "$files/cost.jsonl"; then continue; fi
    probe=$(mktemp -d)
    "$here/.venv/bin/python" - "$store/lite.db" "$probe/lite.db" <<'PY'
import sqlite3, sys
source, target = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True), sqlite3.connect(sys.argv[2])
source.backup(target)
target.execute("delete from credit_value")  # nothing reused: every value is made again
target.commit()
PY
    for signal in oracle random ref-infogain critic critic-noc infogain mc; do
      COLBENCH_DB="sqlite:///$probe/lite.db" timed "cost-$signal-$repeat" "$colbench" credit eval \
        $(credit_flags "$signal") --policies "$(ckpt warm)" --task-limit 3 --pair-turns 12 "${scoring[@]}" \
        --values-out "$probe/values.jsonl" --json > /dev/null
    done
    "$here/.venv/bin/python" - "$probe/values.jsonl" "$repeat" >> "$files/cost.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    print(json.dumps(json.loads(line) | {"repeat": int(sys.argv[2])}))
PY
    rm -r "$probe"
  done
  ;;
save)
  for policy in warm rft; do  # the export writes the split's tasks beside them: the lite tier rebuilds those itself
    out=$(mktemp -d)
    "$colbench" export --split lite-val --policy "$(ckpt "$policy")" --ids --out "$out" --json >/dev/null
    mv "$out/trajectories.jsonl" "$files/dialogues-$policy.jsonl"
    rm -r "$out"
  done
  for policy in warm rft; do
    digest "$policy"
  done > "$files/checkpoints.sha256"
  if have val-candidates; then "$colbench" credit export val-candidates --out "$files/candidates.jsonl"; fi
  ;;
restore)
  # A fresh store: the saved dialogues first, under the refs their policies had (π0 ckpt:1, rft ckpt:2).
  while read -r policy ref _; do
    timed "restore-$policy" "$colbench" trajectories import "$files/dialogues-$policy.jsonl" --policy "$ref" \
      --split lite-val --keep-ids
  done < "$files/checkpoints.sha256"
  if [ -f "$files/candidates.jsonl" ]; then
    timed restore-candidates "$colbench" credit import "$files/candidates.jsonl"
  fi
  ;;
scorers)
  for policy in warm rft critic critic-noc; do
    if have "$policy"; then digest "$policy"; fi
  done > "$files/scorers.sha256"
  ;;
check)
  only=" ${*:3} "  # `check FILE NAME...`: those lines of FILE alone (e.g. warm rft, where no critic was fitted)
  while read -r policy ref saved; do
    [ "$only" = "  " ] || [[ $only = *" $policy "* ]] || continue
    found=$(digest "$policy")
    [ "$found" = "$policy $ref $saved" ] && echo "$policy: $ref, the saved weights" ||
      { echo "$found, not the saved $ref $saved" >&2; exit 1; }
  done < "$files/${2:-checkpoints.sha256}"
  ;;
drift)
  # A rebuilt policy's mean log-prob per token of the saved candidates its namesake sampled, against the sampler's.
  policy=${2:?drift POLICY: warm or rft}
  "$here/.venv/bin/python" "$here/scripts/credit_drift.py" "$COLBENCH_DB" val-candidates "$(ckpt "$policy")" \
    --states "${DRIFT_STATES:-40}"
  ;;
*)
  echo "usage: credit_signals.sh base|rft|dialogues|candidates|critics|score SIGNAL|save|restore|scorers|check|drift|cost" >&2
  exit 2 ;;
esac
