#!/usr/bin/env python3
"""Stand-in for slime's tools/convert_torch_dist_to_hf.py (v0.3.1, CPU only), for rehearsals.

    python tools/convert_torch_dist_to_hf.py --input-dir SAVE/iter_0000019 --output-dir OUT \
        --origin-hf-dir HF [-a] [-f] [--vocab-size N] [--chunk-size BYTES]

Same command line and the same refusals as the real tool: --input-dir must be one iter_* (or
release) directory holding torch_dist files (.metadata, common.pt); --output-dir must not exist
unless -f/--force; one of --origin-hf-dir/--model-name is required. Output: every non-weight file
of --origin-hf-dir copied, model-00001-of-00001.safetensors and model.safetensors.index.json
(tests/fakes/megatron_layout.write_hf_export; bytes are a function of the iteration) holding the
weights Megatron has -- not the visual tower -- plus, with -a/--add-missing-from-origin-hf, every
other tensor of --origin-hf-dir, each printed as "add NAME from origin hf checkpoint" (slime
tools/convert_torch_dist_to_hf.py:128-140,133,192-194).
Test-only: FAKE_CONVERT_NO_LANGUAGE=1 writes none of the weights Megatron holds (a broken converter:
with -a the base model's are copied instead).
Test-only: FAKE_CONVERT_DELAY=S sleeps S seconds after writing the config, before the weights
(a window in which a kill leaves a half-written export)."""

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/fakes: megatron_layout, modelled_wait
from megatron_layout import write_hf_export  # noqa: E402
from modelled_wait import wait  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="convert_torch_dist_to_hf.py")
    ap.add_argument("--input-dir", required=True)
    ap.add_argument("--output-dir", required=True)
    ap.add_argument("--origin-hf-dir")
    ap.add_argument("--model-name")
    ap.add_argument("-f", "--force", action="store_true")
    ap.add_argument("-a", "--add-missing-from-origin-hf", action="store_true")
    ap.add_argument("--vocab-size", type=int)
    ap.add_argument("--chunk-size", type=int)
    args = ap.parse_args(argv)
    if not (args.origin_hf_dir or args.model_name):
        ap.error("either --origin-hf-dir or --model-name must be given")
    src, out = Path(args.input_dir), Path(args.output_dir)
    for name in (".metadata", "common.pt"):
        if not (src / name).is_file():
            print(f"FileNotFoundError: [Errno 2] No such file or directory: '{src / name}'", file=sys.stderr)
            return 1
    if out.exists() and not args.force:
        print(f"AssertionError: {out} exists; pass -f/--force to overwrite", file=sys.stderr)
        return 1
    m = re.fullmatch(r"iter_(\d{7})", src.name)
    iteration = int(m.group(1)) if m else 0
    print(f"fake converter: loading {src} (iteration {iteration})", flush=True)
    delay = float(os.environ.get("FAKE_CONVERT_DELAY", "0") or 0)
    if delay:
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_bytes((Path(args.origin_hf_dir) / "config.json").read_bytes())
        wait("FAKE_CONVERT_DELAY", delay)
    write_hf_export(out, Path(args.origin_hf_dir), iteration, add_missing=args.add_missing_from_origin_hf,
                    language=os.environ.get("FAKE_CONVERT_NO_LANGUAGE") != "1", report=lambda line: print(line, flush=True))
    print(f"fake converter: wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
