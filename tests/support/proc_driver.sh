#!/usr/bin/env bash
# Summary: A stand-in driver for tests/test_procs.py: takes the run lock, starts children
# Usage: tests/support/proc_driver.sh take|hold|leak   (RUN_DIR, STOP_GRACE, READY_BACKOFF_MAX set)
#
#   take  take the run lock, print "locked", exit.
#   hold  take the lock, start service `svc` (pyhelpers proc start), wait for it (proc wait), then
#         run a foreground child, as the training driver runs its stages.
#   leak  take the lock, then start a background child of the driver shell (a forked shell that
#         must not keep the lock after the driver dies).
# The long-running child touches $RUN_DIR/<mode>.ready once it runs.
# shellcheck source=../../bin/lib.sh
source "$(dirname "$0")/../../bin/lib.sh"

mode="${1:?usage: tests/support/proc_driver.sh take|hold|leak}"
take_run_lock
echo locked
case "$mode" in
  take) ;;
  hold)
    py proc start --pids-dir "$RUN_DIR/pids" --logs-dir "$RUN_DIR/logs" --name svc -- sleep 300 >/dev/null
    py proc wait --pids-dir "$RUN_DIR/pids" --name svc --timeout 10 --backoff-max "$READY_BACKOFF_MAX" \
      --cmd -- true >/dev/null
    # shellcheck disable=SC2016  # $0 must expand in the child, not here
    bash -c 'touch "$0"; exec sleep 300' "$RUN_DIR/hold.ready"
    ;;
  leak)
    # shellcheck disable=SC2016  # $0 must expand in the child, not here
    bash -c 'touch "$0"; exec sleep 300' "$RUN_DIR/leak.ready" &
    wait
    ;;
  *) die "unknown mode: $mode (use take, hold or leak)" ;;
esac
