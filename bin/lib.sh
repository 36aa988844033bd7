# shellcheck shell=bash
# Shared functions for bin/ scripts; sourced, never executed. Each function says what it does,
# which globals it reads and what it returns. Decisions live in pyhelpers; this file only
# launches, stops and reports.

set -Eeuo pipefail
shopt -s inherit_errexit
if [[ "${SHOPSIMRL_DEBUG:-0}" == 1 ]]; then
  PS4='+ ${BASH_SOURCE##*/}:${LINENO}: '
  set -x
fi

# Project root (the directory above bin/) and the toolkit's virtualenv python.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV_PY="$ROOT/.venv/bin/python"
export ROOT

# die MESSAGE: print "shopsimrl: MESSAGE" on stderr and exit 1.
die() {
  printf 'shopsimrl: %s\n' "$*" >&2
  exit 1
}

# log MESSAGE: one timestamped progress line on stderr (stdout stays for data).
log() {
  printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2
}

# need_venv: fail with the fix when `make setup` has not run.
need_venv() {
  [[ -x "$VENV_PY" ]] || die "the toolkit's virtualenv is missing: $ROOT/.venv (run: make setup)"
}

# py ARGS...: run `pyhelpers ARGS...` with the toolkit's python.
py() {
  need_venv
  "$VENV_PY" -m pyhelpers "$@"
}

# load_config [--with-secrets]: validate the configuration and export it into this shell.
# Fails (exit 1, each problem named) before any side effect. Secrets arrive through the pipe,
# never through argv or a file.
load_config() {
  local block
  block="$(py config export "$@")" || exit 1
  eval "$block"
}
