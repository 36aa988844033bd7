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

# --- Processes and the run lock (design.md §5) --------------------------------------------
# Thin wrappers over `pyhelpers proc ...` (pyhelpers/procs.py, ready.py, runlock.py decide).
# State lives in $RUN_DIR/pids/NAME.json (pid == process group id, start time, host, argv, log,
# start order) and $RUN_DIR/logs/NAME.log. Knobs: STOP_GRACE, READY_BACKOFF_MAX.
# The run lock is held by a small coprocess that the kernel kills when the driver dies, never by
# a descriptor of the driver shell: every $(...) and `&` of the driver is a forked shell that
# would inherit such a descriptor and keep the run locked after the driver's death.
# Processes are stopped by group, never by name.

# _need_proc_knobs: fail with the fix unless load_config has exported RUN_DIR and the knobs.
_need_proc_knobs() {
  : "${RUN_DIR:?RUN_DIR is not set (call load_config first)}"
  : "${STOP_GRACE:?STOP_GRACE is not set (call load_config first)}"
  : "${READY_BACKOFF_MAX:?READY_BACKOFF_MAX is not set (call load_config first)}"
}

# svc_start NAME [--port HOST:PORT]... [--] CMD...: start CMD as service NAME in its own session
# (setsid; stdin /dev/null; stdout+stderr appended to $RUN_DIR/logs/NAME.log; no inherited fds)
# and print its pid. --port refuses the start while that address is taken, naming the holder.
# Globals: RUN_DIR. Returns 1 (message on stderr) if NAME is already running or a port is taken.
svc_start() {
  _need_proc_knobs
  local name="$1"
  shift
  local -a opts=()
  while [[ "${1:-}" == --port ]]; do
    opts+=(--needs-port "$2")
    shift 2
  done
  if [[ "${1:-}" == -- ]]; then shift; fi
  py proc start --pids-dir "$RUN_DIR/pids" --logs-dir "$RUN_DIR/logs" --name "$name" "${opts[@]}" -- "$@"
}

# svc_stop NAME...: stop the named services if still ours: TERM the group, wait, KILL after
# STOP_GRACE s; one line per name (stopped / killed after N s / already gone / pid reused — left
# alone); a name that was never started is skipped. Globals: RUN_DIR, STOP_GRACE. Returns 1 if a
# group survived KILL.
svc_stop() {
  _need_proc_knobs
  local -a opts=()
  local name
  for name in "$@"; do opts+=(--name "$name"); done
  py proc stop --pids-dir "$RUN_DIR/pids" --grace "$STOP_GRACE" --missing-ok "${opts[@]}"
}

# svc_stop_all: svc_stop every service recorded in $RUN_DIR/pids, in reverse start order.
svc_stop_all() {
  _need_proc_knobs
  py proc stop --pids-dir "$RUN_DIR/pids" --grace "$STOP_GRACE" --all
}

# svc_wait NAME TIMEOUT [--knob KNOB] (--http URL [--expect-status N] | --tcp HOST:PORT |
# --cmd -- CMD...): wait until NAME answers, backing off from 0.1 s to READY_BACKOFF_MAX s.
# Returns 1 at once if NAME dies, or after TIMEOUT s; both print its log's last 30 lines and the
# fix (naming KNOB, the timeout's knob). Globals: RUN_DIR, READY_BACKOFF_MAX.
svc_wait() {
  _need_proc_knobs
  py proc wait --pids-dir "$RUN_DIR/pids" --name "$1" --timeout "$2" \
    --backoff-max "$READY_BACKOFF_MAX" "${@:3}"
}

# svc_sweep MARKER: stop every process whose argv, environment or stdout/stderr references the
# path MARKER (e.g. "$RAY_TEMP_DIR": Ray's workers live in their own process groups), TERM then
# KILL after STOP_GRACE s. Globals: STOP_GRACE. Returns 1 if one survived KILL.
svc_sweep() {
  _need_proc_knobs
  py proc sweep --marker "$1" --grace "$STOP_GRACE"
}

# take_run_lock: hold $RUN_DIR/lock (flock) for the life of this shell, through the coprocess
# `pyhelpers proc hold-lock`, which records this shell's pid, start time, host, start date and
# command in it. Refused (returns 1, the holder named on stderr with how to stop it) while another
# driver holds it; a stale lock whose holder is gone is taken over with a note. Taking it twice in
# one shell is a no-op. Globals: RUN_DIR; sets LOCK_HELPER_PID.
take_run_lock() {
  _need_proc_knobs
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

# ensure_service NAME [--round N] [--model DIR]: start the run's service NAME (shopsim, ray-head,
# eval-server; pyhelpers/services.py says how) unless it is up, and wait until it answers.
ensure_service() {
  py run service "$@"
}
