"""slime.backends.sglang_utils.arguments (624b824): add_sglang_arguments (arguments.py:41) registers the
SGLang server flags with a --sglang- prefix (and the router's) on slime's SGLang parser. The stand-in
registers the --sglang-* names of the pinned slime train.py flag list (tests/fakes/flag_lists.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # tests/fakes: flag_lists
from flag_lists import names, slime_train_flags_file  # noqa: E402


def add_sglang_arguments(parser):
    for flag in names(slime_train_flags_file()):
        if flag.startswith("--sglang-"):
            parser.add_argument(flag, nargs="?", const=True)
    return parser
