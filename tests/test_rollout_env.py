"""The rollout plugin needs only what slime's environment has (issue 5, item 5).

How, offline (no package index here): a fresh plain venv (`python -m venv --without-pip`, no
system site-packages) gets one extra sys.path entry, a directory of symlinks to exactly the
distributions slime's env is known to hold -- httpx, PyYAML, jsonschema, transformers, tokenizers,
numpy and jinja2 (chat templates) -- plus everything those require (their non-extra
`Requires-Dist`, resolved from this venv's metadata). The fresh interpreter runs isolated (-I: no
user site, no PYTHONPATH) with the project root first, then exercises the plugin's heavy paths:
importing every plugin module, loading the policy tokenizer through transformers and building a
prompt, writing the plugin YAML, validating a spool record with jsonschema and making the httpx
clients. Anything outside the allow-list would fail to import there. It also checks that none of
the toolkit-only packages (dotenv, wandb, ray, pytest) nor any pyhelpers.cli module got imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from support.tokenizer import build_tokenizer

pytestmark = pytest.mark.heavy  # a virtualenv with slime's env packages and the plugin in it

ROOTS = ["httpx", "pyyaml", "jsonschema", "transformers", "tokenizers", "numpy", "jinja2"]
# Toolkit-only packages. (click is not listed: httpx itself imports it for its CLI when installed;
# the plugin's own modules never import it -- no pyhelpers.cli module may be loaded, checked below.)
NOT_IN_PLUGIN = {"dotenv", "wandb", "ray", "pytest", "requests_toolbelt"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[str]) -> list[metadata.Distribution]:
    seen: dict[str, metadata.Distribution] = {}
    todo = list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional/platform dependency this machine does not have
        seen[name] = dist
        for req in dist.requires or []:
            r = Requirement(req)
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(r.name)
    return list(seen.values())


def _shim(tmp_path) -> tuple[str, set[str]]:
    """A directory with symlinks to the allowed distributions' top-level entries (+ dist-info)."""
    shim = tmp_path / "allowed-site"
    shim.mkdir()
    names: set[str] = set()
    for dist in _closure(ROOTS):
        base = dist.locate_file("")
        for f in dist.files or []:
            top = f.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            src = base / top
            dst = shim / top
            if not dst.exists() and src.exists():
                dst.symlink_to(src)
                if not top.endswith((".dist-info", ".data")):
                    names.add(top.split(".")[0])
    return str(shim), names


CHILD = r"""
import asyncio, json, sys
root, shim, tok, out = sys.argv[1:5]
sys.path[:0] = [root, shim]
import pyhelpers.rollout.flags, pyhelpers.rollout.generate, pyhelpers.rollout.rollout
from pyhelpers.jsonfiles import validation_errors
from pyhelpers.rollout import runtime, settings
from pyhelpers.policy.sglang_client import SGLangClient
from pyhelpers.shopsim.client import ShopSimClient

builder, pad = runtime._builder(tok)
tr = builder.start({"instruction": "买一双白色运动鞋"}, max_context_len=4096)
assert tr.prompt_len > 0 and isinstance(pad, int)
settings.write_plugin_yaml(out + "/slime.yaml", round=0, round_dir=out, bank_path="", tasks_path=out + "/t.jsonl",
    shopsim_url="http://127.0.0.1:1", shopsim_slots=4, shopsim_episode_concurrency=2, max_turns=3,
    rollout_max_context_len=4096, rollout_max_response_len=256, reward="strict", retry_trains=0,
    skill_token_budget=64, draw_limit_factor=4, tokenizer_path=tok, steps_per_round=2, shopsim_start_timeout=30.0,
    eval_concurrency=2, eval_episode_retries=1, eval_max_infra_share=0.05, gate_pairs=16, gate_arm_episodes=4,
    gate_seed=1, gate_max_skills=8, gate_failed_share=0.7, gate_alpha=0.1, gate_max_rounds=3,
    analyst_drain_timeout=60.0, bank_wait_timeout=60.0)
assert validation_errors({"id": "x"}, "spool")  # jsonschema ran and found the violations

async def clients():
    await ShopSimClient("http://127.0.0.1:1").aclose()
    await SGLangClient("http://127.0.0.1:1").aclose()
asyncio.run(clients())
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pyhelpers."))))
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_plugin_runs_in_a_venv_with_only_slime_env_packages(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    py = venv / "bin" / "python"
    bare = subprocess.run([str(py), "-I", "-c", "import httpx"], capture_output=True, text=True)
    assert bare.returncode != 0, "the fresh venv must not see this venv's packages"
    shim, allowed = _shim(tmp_path)
    tok = build_tokenizer(tmp_path / "tok")
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([str(py), "-I", "-c", CHILD, str(ROOT), shim, str(tok), str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    own, loaded = (set(json.loads(line)) for line in proc.stdout.strip().splitlines()[-2:])
    assert "pyhelpers.rollout.generate" in own and not {m for m in own if m.startswith("pyhelpers.cli")}
    assert not loaded & NOT_IN_PLUGIN, loaded & NOT_IN_PLUGIN
    outside = {m for m in loaded if m not in sys.stdlib_module_names and m not in allowed
               and m not in ("pyhelpers", "cython_runtime") and not m.startswith("_")}  # Cython-made
    assert not outside, outside
    assert (out / "slime.yaml").read_text().count("shopsimrl_") >= 14
