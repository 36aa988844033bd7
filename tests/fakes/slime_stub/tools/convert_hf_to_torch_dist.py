#!/usr/bin/env python3
"""Stand-in for slime's tools/convert_hf_to_torch_dist.py (v0.3.1), for `make convert-base` tests.

    source scripts/models/qwen3.5-4B.sh
    PYTHONPATH=/root/Megatron-LM python tools/convert_hf_to_torch_dist.py ${MODEL_ARGS[@]} \
        --hf-checkpoint HF --save OUT

Model args are accepted and ignored (the real tool does not check them against the HF config
either). --hf-checkpoint must hold config.json. Output as the real tool leaves it: OUT/release/
(torch_dist files) and OUT/latest_checkpointed_iteration.txt = "release". The real tool needs
GPUs; the stand-in does not."""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/fakes: megatron_layout
from megatron_layout import write_release  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="convert_hf_to_torch_dist.py")
    ap.add_argument("--hf-checkpoint", required=True)
    ap.add_argument("--save", required=True)
    args, _model_args = ap.parse_known_args(argv)
    if not (Path(args.hf_checkpoint) / "config.json").is_file():
        print(f"OSError: {args.hf_checkpoint} does not appear to have a file named config.json", file=sys.stderr)
        return 1
    write_release(Path(args.save))
    print(f"fake converter: saved {args.hf_checkpoint} as torch_dist release in {args.save}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
