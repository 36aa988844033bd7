"""Probe run INSIDE the activated slime env: which flags of a command line the INSTALLED parsers do
not know. `python3 - REQUEST_JSON` with this file on stdin; stdlib only, no pyhelpers (the env does
not have the toolkit). REQUEST_JSON: {"paths": [MEGATRON_DIR, SLIME_DIR], "slime": argv,
"sglang": argv}. Prints one line: MARKER + {"slime": {"unknown": [...]} | {"error": ...}, "sglang": ...}.

slime train.py parses in two parsers (slime 624b824 slime/utils/arguments.py:1600-1643): SGLang's
flags with slime's --sglang- prefix (backends/sglang_utils/arguments.py:41, parse_known_args), and
Megatron's parser with slime's own flags added (megatron_utils/arguments.py:193-195 ->
Megatron-LM arguments.py:48,87-102) with ignore_unknown_args=True; a few are pre-parsed
(arguments.py:1584-1597). A flag none of them registers is silently ignored -- what this finds.
`python -m sglang.launch_server` parses with ServerArgs.add_cli_args (SGLang 0.5.15.post1
server_args.py:6142, 7127-7150). Only the parsers are built: nothing is imported that needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys

MARKER = "SHOPSIMRL_FLAGS "
# slime's _pre_parse_mode parser (slime/utils/arguments.py:1591-1595): removed from the others.
PRE_PARSED = ("--train-backend", "--debug-rollout-only", "--debug-train-only", "--load-debug-rollout-data")


def _flags(argv):
    return [a.split("=", 1)[0] for a in argv if a.startswith("--")]


def _registered(parser):
    return set(parser._option_string_actions)  # argparse's own table of option strings


def slime_unknown(argv):
    from megatron.training.arguments import (
        add_megatron_arguments,  # optional: Megatron/slime/SGLang exist only in the slime env this probe runs in
    )
    from slime.backends.sglang_utils.arguments import add_sglang_arguments  # optional: as above
    from slime.utils.arguments import get_slime_extra_args_provider  # optional: as above

    megatron = argparse.ArgumentParser(allow_abbrev=False, add_help=False)
    megatron = add_megatron_arguments(megatron) or megatron
    megatron = get_slime_extra_args_provider()(megatron) or megatron
    sglang = argparse.ArgumentParser(add_help=False)
    sglang = add_sglang_arguments(sglang) or sglang
    known = _registered(megatron) | _registered(sglang) | set(PRE_PARSED)
    return sorted({f for f in _flags(argv) if f not in known})


def sglang_unknown(argv):
    from sglang.srt.server_args import ServerArgs  # optional: SGLang, only in the slime env

    parser = argparse.ArgumentParser(prog="sglang serve", add_help=False)
    ServerArgs.add_cli_args(parser)
    return sorted({f for f in _flags(argv) if f not in _registered(parser)})


def _run(fn, argv):
    try:
        return {"unknown": fn(argv)}
    except BaseException as exc:  # an import or parser failure is a finding, not a crash
        return {"error": f"{type(exc).__name__}: {exc}"}


def main(request):
    for path in reversed(request.get("paths") or []):
        sys.path.insert(0, path)
    out = {"slime": _run(slime_unknown, request["slime"]), "sglang": _run(sglang_unknown, request["sglang"])}
    sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
