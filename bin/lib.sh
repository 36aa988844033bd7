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

# log MESSAGE: one progress line on stderr (stdout stays for data), in the toolkit's one format
# `HH:MM:SS service  message` (pyhelpers/loop/console.py stamp()); the service is the script's name.
log() {
  printf '%(%H:%M:%S)T %-8s %s\n' -1 "${0##*/}" "$*" >&2
}

# check_round VALUE RESUME_CMD: die naming the make variable ROUND (the user typed that, not
# --round) unless VALUE is a round number; before anything reads the configuration or starts.
check_round() {
  [[ "$1" =~ ^[0-9]+$ ]] || die "ROUND='$1' is not a round number: \`$2 ROUND=N\` takes the 0-based round the run stands at, or leave ROUND out"
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

# load_config [--with-secrets]: validate the configuration and export it into this shell: what
# bash reads, and SHOPSIMRL_CONFIG, what env/defaults.env and .env hold, read once for every
# process this shell starts (pyhelpers/config/load.py start). Fails (exit 1, each problem named)
# before any side effect. Secrets arrive through the pipe, never through argv or a file.
load_config() {
  local block
  block="$(py config export "$@")" || exit 1
  eval "$block"
}

# check_your_config: exit 1 with `make check`'s own lines when the configuration the real run will
# read from .env (over env/defaults.env) has an error. For a rehearsal, which replaces some knobs
# with small values or stand-ins: a bad .env value there (ROUNDS=2.5) must fail the rehearsal as it
# will fail the real run. Knobs given on the command line (make rehearse SHOPSIM_SLOTS=16) are the
# rehearsal's, checked by its own configuration; the rehearse profile only spares TRAIN_SAVE's
# system-disk rule (a rehearsal writes a few KB of stand-in checkpoints elsewhere).
check_your_config() {
  local problems name without=()
  while IFS='=' read -r name _; do
    without+=(-u "$name")
  done < <(grep -E '^[A-Z][A-Z0-9_]*=' "$ROOT/env/defaults.env")
  if ! problems="$(env "${without[@]}" DOCTOR_PROFILE=rehearse "$VENV_PY" -m pyhelpers config check 2>&1 >/dev/null)"; then
    printf '%s\n' "$problems" >&2
    exit 1
  fi
}

# load_model_args [--optional]: set MODEL_ARGS (slime's Qwen3.5-4B architecture flags) by sourcing
# MODEL_ARGS_SCRIPT. A missing script stops with the fix, or with --optional leaves MODEL_ARGS empty.
load_model_args() {
  # shellcheck disable=SC2034  # read by the caller
  MODEL_ARGS=()
  if [[ ! -f "$MODEL_ARGS_SCRIPT" ]]; then
    [[ "${1:-}" == --optional ]] && return 0
    die "slime's model script is missing: MODEL_ARGS_SCRIPT=$MODEL_ARGS_SCRIPT (point it at scripts/models/qwen3.5-4B.sh of your slime checkout)"
  fi
  set +u  # slime's script is not written for nounset
  # shellcheck source=/dev/null
  source "$MODEL_ARGS_SCRIPT"
  set -u
}

# --- The run lock (architecture §5) -----------------------------------------------------------
# Services, their process groups and readiness are Python's (pyhelpers/procs/groups.py, pyhelpers/launch/services.py:
# `pyhelpers proc ...`, `pyhelpers run service ...`). What stays here is the lock of the driver
# shell. It is held by a small coprocess that the kernel kills when the driver dies, never by a
# descriptor of the driver shell: every $(...) and `&` of the driver is a forked shell that would
# inherit such a descriptor and keep the run locked after the driver's death.

# take_run_lock: hold $RUN_DIR/lock (flock) for the life of this shell, through the coprocess
# `pyhelpers proc hold-lock`, which records this shell's pid, start time, host, start date and
# command in it. Refused (returns 1, the holder named on stderr with how to stop it) while another
# driver holds it; a stale lock whose holder is gone is taken over with a note. Taking it twice in
# one shell is a no-op. Globals: RUN_DIR; sets LOCK_HELPER_PID.
take_run_lock() {
  : "${RUN_DIR:?RUN_DIR is not set (call load_config first)}"
  if [[ -n "${LOCK_HELPER_PID:-}" ]]; then return 0; fi
  need_venv
  mkdir -p "$RUN_DIR"
  local answer=""
  coproc RUN_LOCK { exec "$VENV_PY" -m pyhelpers proc hold-lock --lock "$RUN_DIR/lock" --holder-pid "$$"; }
  LOCK_HELPER_PID="$RUN_LOCK_PID"  # bash unsets RUN_LOCK_PID when the coprocess ends
  read -r answer <&"${RUN_LOCK[0]}" || true
  if [[ "$answer" != locked ]]; then
    wait "$LOCK_HELPER_PID" 2>/dev/null || true
    unset LOCK_HELPER_PID
    return 1
  fi
}

# release_run_lock: clear the holder record and release the lock (the driver's death releases it
# too). Globals: LOCK_HELPER_PID.
release_run_lock() {
  if [[ -z "${LOCK_HELPER_PID:-}" ]]; then return 0; fi
  kill -TERM "$LOCK_HELPER_PID" 2>/dev/null || true
  wait "$LOCK_HELPER_PID" 2>/dev/null || true
  unset LOCK_HELPER_PID
}
