"""The run's own files the next stages read (pyhelpers/stages/inputs.py): each valid against its
schema, checked in the preflight, before ShopSimulator, Ray or the job start."""

from __future__ import annotations

from pyhelpers.doctor.base import FAIL, PASS, Context, Result, result
from pyhelpers.jsonfiles import load_json_or_none
from pyhelpers.run import hints, layout
from pyhelpers.stages import preflight

SHOWN = 5


def check_run_files(ctx: Context) -> list[Result]:
    lay = layout.from_config(ctx.cfg)
    inputs, bad = preflight.check(ctx.cfg, lay, fresh=ctx.fresh_run)
    if bad:
        first, why = bad[0]
        # A rehearsal's fixes name its own commands (run.json says which run this is; the rehearse
        # profile alone does not: a CPU box checks a real run's files with it too).
        manifest = load_json_or_none(lay.manifest)
        say = hints.for_run(isinstance(manifest, dict) and bool(manifest.get("rehearsal")))
        details = [f"{p} (fix: {say(i.fix)})" for i, p in bad[:SHOWN]]
        if len(bad) > SHOWN:
            details.append(f"... and {len(bad) - SHOWN} more")
        return [result("run-files", FAIL, f"{len(bad)} of {len(inputs)} file(s) the next stages read are invalid; "
                                          f"first: {why}", fix=say(first.fix), details=details)]
    if ctx.fresh_run:  # only SEED_BANK, as round 0 of a new run reads it (make rehearse checks the user's so)
        return [result("run-files", PASS, f"SEED_BANK {inputs[0].path} is a valid bank: round 0 starts with it"
                        if inputs else "SEED_BANK is empty: round 0 starts with an empty bank")]
    if not inputs:
        return [result("run-files", PASS, "nothing of the run to read yet (a new run, SEED_BANK empty)")]
    return [result("run-files", PASS, f"{len(inputs)} file(s) the next stages read are valid")]
