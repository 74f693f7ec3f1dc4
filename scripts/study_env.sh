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
timed() { local name=$1; shift; log start "$name"; "$@"; log stop "$name"; }
