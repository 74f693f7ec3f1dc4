# Sourced by a study's script (scripts/lite_study*.sh) as `source scripts/study_env.sh STORE_DEFAULT FOLDER`:
# $store (STORE, else the default) holds the store and checkpoints, never committed; $files is studies/FOLDER,
# the study's committed files; $colbench the command (COLBENCH, else the checkout's .venv); COLBENCH_DB the store;
# `timed NAME CMD...` runs CMD between a start and a stop line in $files/times.log.
store=$(realpath -m "${STORE:-$1}")
files="$here/studies/$2"
mkdir -p "$store" "$files"
colbench=${COLBENCH:-$here/.venv/bin/colbench}
export COLBENCH_DB="sqlite:///$store/lite.db"

log() { echo "$1 $2 $(date -u +%FT%TZ)" >> "$files/times.log"; }
# The checkpoint a named training run made, as a policy is stored (ckpt:<id>).
ckpt() {
  "$colbench" runs show "$1" --json | python3 -c 'import json, sys
last = json.load(sys.stdin)["checkpoints"][-1]
print(last if isinstance(last, str) else "ckpt:%s" % last["id"])'
}
# The weights file of a named training run's checkpoint.
weights() {
  "$here/.venv/bin/python" -c 'import sys
from colbench.model_refs import get_checkpoint
from colbench.store.db import Database
row, _ = get_checkpoint(Database(sys.argv[1]), sys.argv[2])
print(row.path + "/model.safetensors")' "$COLBENCH_DB" "$(ckpt "$1")"
}
# A named training run's line of a digest file: its name, its checkpoint and its weights' sha256.
digest() { echo "$1 $(ckpt "$1") $(sha256sum < "$(weights "$1")" | cut -d' ' -f1)"; }
timed() { local name=$1; shift; log start "$name"; "$@"; log stop "$name"; }

# A rollout's dialogues saved as a study's file (`colbench export --ids`: one policy's, on one split) and restored into
# a store that lost them: the very rows the rollout made (ids, grades and their order, the sampled tokens), so a rerun
# of that rollout finds them done and what trained on them refits bit for bit, without sampling them again.
save_dialogues() {  # FILE POLICY SPLIT
  local out
  out=$(mktemp -d)
  "$colbench" export --split "$3" --policy "$2" --ids --out "$out" --json > /dev/null
  mv "$out/trajectories.jsonl" "$1"
  rm -r "$out"
}
restore_dialogues() {  # FILE POLICY SPLIT: only into a store holding none of that policy's graded dialogues there
  [ -f "$1" ] || return 0
  local held
  held=$("$colbench" eval --tasks "backend:$3" --policy "$2" --json |
         python3 -c 'import json, sys; print(sum(row["n_trajectories"] for row in json.load(sys.stdin)))')
  [ "$held" = 0 ] || return 0
  timed "restore-$(basename "$1" .jsonl)" "$colbench" trajectories import "$1" --split "$3" --keep-ids
}
