"""Regenerate the flag lists of the pinned stack (env/flags/*.txt) from the real sources.

    python -m pyhelpers.launch.pinned_flag_lists sglang                # pip-downloads the pinned wheel (no deps)
    python -m pyhelpers.launch.pinned_flag_lists sglang --wheel W.whl  # or reads a downloaded one
    python -m pyhelpers.launch.pinned_flag_lists slime --slime-dir ~/slime --megatron-dir ~/Megatron-LM

The sources are read, never imported (they need torch and CUDA): Python's `ast` finds every
`add_argument("--name", ...)` and the dataclass fields the argument factories turn into flags.
What is read, and why the result is a superset, is in env/flags/README.md. Stdlib only: the
lists are facts the command builders' own list (slime_flags.py) is checked against by tests.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

LISTS = Path(__file__).resolve().parents[2] / "env" / "flags"
SGLANG_PIN = "sglang==0.5.15.post1"
SGLANG_SERVER_ARGS = "sglang/srt/server_args.py"


def _flag(text: object) -> str | None:
    """A long option name as argparse accepts it ("--tp-size"), else None."""
    if isinstance(text, str) and text.startswith("--") and len(text) > 2 and text[2].isalnum():
        return text
    return None


def add_argument_flags(tree: ast.AST) -> set[str]:
    """The long option names given positionally to any `*.add_argument(...)` call, or to slime's
    `reset_arg(parser, "--name", ...)` (slime/utils/arguments.py), which adds or replaces one."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in ("add_argument", "reset_arg"):
                out |= {f for a in node.args if isinstance(a, ast.Constant) and (f := _flag(a.value))}
    return out


# --- SGLang: ServerArgs (sglang/srt/server_args.py) ------------------------------------------

def _arg_meta(annotation: ast.expr) -> ast.expr | None:
    """The metadata of `A[T, meta]` / `Annotated[T, meta]`, else None (such a field has no flag)."""
    if isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", None) in ("A", "Annotated"):
        elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else []
        return elts[1] if len(elts) >= 2 else None
    return None


def sglang_flags(source: str) -> set[str]:
    """ServerArgs.add_cli_args: one flag per field annotated A[T, "help"] or A[T, Arg(...)] (its
    cli_name or --field-name, plus Arg's aliases; none with no_cli=True), plus the flags that
    add_cli_args registers by hand (sglang/srt/arg_groups/arg_utils.py add_cli_args_from_dataclass)."""
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ServerArgs")
    out: set[str] = set()
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        meta = _arg_meta(node.annotation)
        if meta is None:
            continue
        names = ["--" + node.target.id.replace("_", "-")]
        if isinstance(meta, ast.Call):
            kw = {k.arg: k.value for k in meta.keywords}
            if isinstance(kw.get("no_cli"), ast.Constant) and kw["no_cli"].value is True:
                continue
            if isinstance(kw.get("cli_name"), ast.Constant):
                names = [kw["cli_name"].value]
            if isinstance(kw.get("aliases"), ast.List):
                names += [e.value for e in kw["aliases"].elts if isinstance(e, ast.Constant)]
        elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            continue
        out |= {f for n in names if (f := _flag(n))}
    return out | add_argument_flags(tree)


def sglang_source(wheel: Path | None) -> tuple[str, str]:
    """server_args.py's text and where it came from (the wheel's file name)."""
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", SGLANG_PIN, "-d", tmp],
                           check=True)
            wheel = next(Path(tmp).glob("sglang-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            return zf.read(SGLANG_SERVER_ARGS).decode("utf-8"), wheel.name


# --- slime's train.py: slime + Megatron-LM + SGLang (prefixed) -------------------------------

def _parse_all(root: Path, pattern: str) -> dict[Path, ast.AST]:
    trees = {}
    for path in sorted(root.glob(pattern)):
        try:
            trees[path] = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue  # not Python 3 source we can read: holds no flag of ours
    return trees


def _dataclass_fields(trees: dict[Path, ast.AST]) -> dict[str, tuple[list, list[str]]]:
    """{class name: ([(field, its arg_names)], base class names)} of every class in the trees."""
    out: dict[str, tuple[list, list[str]]] = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = [n for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
                bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                out.setdefault(node.name, ([(f.target.id, _arg_names(f.value)) for f in fields], bases))
    return out


def _arg_names(value: ast.expr | None) -> list[str]:
    """`field(metadata={"argparse_meta": {"arg_names": ["--x", ...]}})`: the names given there."""
    names: list[str] = []
    for node in ast.walk(value) if value is not None else ():
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "arg_names" and isinstance(v, (ast.List, ast.Tuple)):
                    names += [f for e in v.elts if isinstance(e, ast.Constant) and (f := _flag(e.value))]
    return names


def _factory_flags(trees: dict[Path, ast.AST], classes: dict) -> set[str]:
    """Megatron's ArgumentGroupFactory(Config, exclude=[...]) (megatron/training/argument_utils.py):
    --field-name for each field of Config and its bases, and the --no-/--disable- forms it adds for
    store_false booleans (taken for every field: a superset), and the `arg_names` a field's
    metadata gives instead."""
    out: set[str] = set()

    def fields_of(name: str, seen: set[str]) -> list[tuple[str, list[str]]]:
        if name in seen or name not in classes:
            return []
        seen.add(name)
        own, bases = classes[name]
        return own + [f for b in bases for f in fields_of(b, seen)]

    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ArgumentGroupFactory" and node.args:
                cls = node.args[0]
                name = cls.id if isinstance(cls, ast.Name) else getattr(cls, "attr", "")
                excluded = {e.value for k in node.keywords if k.arg == "exclude" and isinstance(k.value, ast.List)
                            for e in k.value.elts if isinstance(e, ast.Constant)}
                for f, arg_names in fields_of(name, set()):
                    if f not in excluded and not f.startswith("_"):
                        stem = f.replace("_", "-")
                        out |= {f"--{stem}", f"--no-{stem}", f"--disable-{stem}", *arg_names}
    return out


def slime_flags(slime_dir: Path, megatron_dir: Path, sglang: set[str]) -> set[str]:
    slime = _parse_all(slime_dir, "slime/**/*.py") | _parse_all(slime_dir, "*.py")
    megatron = _parse_all(megatron_dir, "megatron/**/*.py")
    out = set()
    for trees in (slime, megatron):
        for tree in trees.values():
            out |= add_argument_flags(tree)
    out |= _factory_flags(megatron, _dataclass_fields(megatron))
    # slime/backends/sglang_utils/arguments.py: every SGLang server flag, as --sglang-<name>.
    out |= {"--sglang-" + f[2:] for f in sglang}
    return out


def _git_head(path: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


# A flag that takes a secret (--wandb-key, --api-key, ...) would put it in `ps` and in W&B's run
# config; the toolkit never emits one, so the lists leave them out and the stand-ins refuse them.
_SECRET_FLAG = re.compile(r"-(api-key|wandb-key|password|secret|auth-token|hf-token)$")


def takes_secret(flag: str) -> bool:
    return bool(_SECRET_FLAG.search(flag))


def write_list(path: Path, header: list[str], flags: set[str]) -> None:
    kept = sorted(f for f in flags if not takes_secret(f))
    left = sorted(set(flags) - set(kept))
    header = header + ([f"left out: {len(left)} flag(s) that take a secret (never on a command line)"] if left else [])
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"# {line}\n" for line in header) + "".join(f + "\n" for f in kept))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=["sglang", "slime"])
    ap.add_argument("--wheel", type=Path, help="the downloaded sglang wheel (default: pip download it)")
    ap.add_argument("--out-dir", type=Path, default=LISTS)
    ap.add_argument("--slime-dir", type=Path, help="slime: a slime checkout (624b824)")
    ap.add_argument("--megatron-dir", type=Path, help="slime: Megatron-LM at the commit slime pins (1dcf0daf)")
    args = ap.parse_args(argv)
    sglang_list = args.out_dir / "sglang_server_flags.txt"
    if args.which == "sglang":
        source, wheel = sglang_source(args.wheel)
        write_list(sglang_list, [f"`python -m sglang.launch_server` flags of {SGLANG_PIN}",
                                 f"read from {wheel}: {SGLANG_SERVER_ARGS} (ServerArgs fields + add_cli_args)",
                                 "regenerate: python -m pyhelpers.launch.pinned_flag_lists sglang"], sglang_flags(source))
        print(f"wrote {sglang_list}")
        return 0
    slime_dir, megatron_dir = args.slime_dir, args.megatron_dir
    missing = [name for name, d in (("--slime-dir", slime_dir), ("--megatron-dir", megatron_dir))
               if d is None or not d.is_dir()]
    if missing:
        sys.exit(f"pinned_flag_lists slime: give {' and '.join(missing)} a checkout (slime 624b824; "
                 "Megatron-LM at the commit slime pins, 1dcf0daf)")
    sglang = {line for line in sglang_list.read_text().splitlines() if line.startswith("--")}
    out = args.out_dir / "slime_train_flags.txt"
    write_list(out, ["every flag slime's train.py accepts: slime, Megatron-LM and --sglang-<SGLang server flag>",
                     f"slime {_git_head(slime_dir)}, Megatron-LM {_git_head(megatron_dir)}, "
                     f"SGLang from {sglang_list.name}",
                     "regenerate: python -m pyhelpers.launch.pinned_flag_lists slime --slime-dir ... --megatron-dir ..."],
               slime_flags(slime_dir, megatron_dir, sglang))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
