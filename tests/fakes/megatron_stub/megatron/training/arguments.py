"""megatron.training.arguments (Megatron-LM 1dcf0daf, arguments.py:48 add_megatron_arguments): registers
every non-SGLang name of the pinned slime train.py flag list (tests/fakes/flag_lists.py). Differs:
Megatron's own groups, types and defaults are not modelled, and the names slime adds itself are
registered here too -- a command-line check only needs the union of the parsers' names."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # tests/fakes: flag_lists
from flag_lists import names, slime_train_flags_file  # noqa: E402


def add_megatron_arguments(parser):
    for flag in names(slime_train_flags_file()):
        if not flag.startswith("--sglang-"):
            parser.add_argument(flag, nargs="?", const=True)
    return parser
