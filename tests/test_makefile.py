"""The Makefile's control and inspection targets never touch the venv a live run uses: after a
pull that changes env/requirements.txt, `make stop` must stop the run, not reinstall packages
under it first."""

from __future__ import annotations

import shutil
import subprocess

from conftest import ROOT

CONTROL = ("stop", "status", "logs", "watch", "report", "plan", "wandb-sync", "doctor", "migrate-pack", "plan-memory",
           "config", "check")


def _dry_run(target: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", target], cwd=cwd, capture_output=True, text=True, timeout=60)


def _runs_setup(dry: subprocess.CompletedProcess) -> bool:
    return any(line.split()[:1] == ["bin/setup"] for line in dry.stdout.splitlines())  # (with its --for TARGET)


def test_control_and_inspection_targets_never_run_setup():
    for target in CONTROL:
        dry = _dry_run(target)
        assert dry.returncode == 0, dry.stderr
        assert not _runs_setup(dry), f"make {target} would run setup"
    assert _runs_setup(_dry_run("train"))  # the run itself still updates the venv first


def test_without_a_venv_they_say_how_to_make_one(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for target in ("stop", "status"):
        res = subprocess.run(["make", target], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert res.returncode != 0
        assert f"the toolkit's virtualenv is missing: {tmp_path}/.venv (run: make setup)" in res.stderr


def test_setup_never_reinstalls_under_processes_running_from_the_venv(tmp_path):
    """`make train` after a pull runs setup before the run lock can refuse it: setup itself must
    leave a venv alone while a live run's processes use it."""
    import os
    import signal
    import sys

    root = tmp_path / "clone"
    for rel in ("bin/setup", "bin/lib.sh", "pyhelpers/procs/venv_users.py", "env/requirements.txt", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    (root / "env" / "system-packages.txt").write_text("")
    calls = tmp_path / "python-calls"
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    # A stand-in for the venv's python: records how setup calls it; `-c` runs as a live process would.
    venv_python.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n[[ "$1" == -c ]] && exec -a "$0" sleep 60\n'
                           "exit 0\n")
    venv_python.chmod(0o755)
    live = subprocess.Popen([str(venv_python), "-c", "a live run"], cwd=root, start_new_session=True)
    try:
        res = subprocess.run([str(root / "bin" / "setup")], cwd=root, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHON": sys.executable})
        assert res.returncode == 1, res.stdout + res.stderr
        assert "not updating .venv: these processes run from it" in res.stderr and str(live.pid) in res.stderr
        assert "-m pip" not in calls.read_text()
    finally:
        os.killpg(live.pid, signal.SIGKILL)
        live.wait()


def test_a_round_that_is_not_a_number_is_named_before_anything_starts(toolkit_env):
    """`make resume ROUND=abc` used to run the preflight, then answer about the internal `--round`;
    the user typed ROUND, so the answer names ROUND, before the configuration or the preflight."""
    import os

    for cmd in (["make", "resume", "ROUND=abc"], ["make", "rehearse", "RESUME=1", "ROUND=-1"]):
        env = {k: v for k, v in toolkit_env.items() if k not in ("MAKEFLAGS", "MFLAGS")}
        res = subprocess.run(cmd, cwd=ROOT, env={**env, "PATH": os.environ["PATH"]}, capture_output=True,
                             text=True, timeout=120)
        out = res.stdout + res.stderr
        assert res.returncode != 0, out
        bad = cmd[-1].split("=", 1)[1]
        assert f"ROUND={bad!r} is not a round number" in res.stderr, out
        assert "--round" not in out and "preflight" not in out and "rehearsal:" not in out, out


def test_the_menu_never_cuts_a_knob_description_mid_sentence():
    """`make` showed each knob's first comment line: 13 of them stopped mid-sentence ("...; past
    that, groups with equal"). Each description now runs to the end of a sentence (or of its doc)."""
    import os

    from pyhelpers.config.load import read_knobs

    # COLUMNS wide enough for each entry on one line (the menu fits narrower ones: tests/test_menu.py)
    menu = subprocess.run([str(ROOT / "bin" / "help")], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "COLUMNS": "1000"}).stdout
    lines = {ln.split()[0]: ln for ln in menu.splitlines() if ln.startswith("    ") and ln.split()}
    cut = []
    for name, knob in read_knobs().items():
        line = lines[name]
        start = line.find(knob.doc[:20])
        assert start > 0, (name, line)
        shown = line[start:].rstrip()
        assert knob.doc.startswith(shown), (name, shown)
        if shown != knob.doc and not shown.endswith((".", ".)", "?", ":")):
            cut.append(f"{name}: {shown}")
    assert not cut, cut


def test_setup_says_it_is_still_installing_while_pip_is_silent(tmp_path):
    """pip prints nothing for minutes while it installs the collected packages: setup prints a
    line every SHOPSIMRL_SETUP_HEARTBEAT seconds meanwhile, so the step does not look hung."""
    import os
    import selectors
    import sys
    import time

    root = tmp_path / "clone"
    for rel in ("bin/setup", "bin/lib.sh", "pyhelpers/procs/venv_users.py", "env/requirements.txt", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    (root / "env" / "system-packages.txt").write_text("")
    gate = tmp_path / "pip-may-finish"
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    # A stand-in for the venv's pip: silent in its install step until the test opens the gate.
    venv_python.write_text("#!/usr/bin/env bash\n"
                           "echo 'Collecting a==1'\necho 'Installing collected packages: a'\n"
                           f"while [[ ! -e {gate} ]]; do sleep 0.05; done\necho 'Successfully installed a-1'\n")
    venv_python.chmod(0o755)
    setup = subprocess.Popen([str(root / "bin" / "setup")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHON": sys.executable, "SHOPSIMRL_SETUP_HEARTBEAT": "0.2"})
    seen, deadline = [], time.monotonic() + 60  # (a bound on a hang, not a timing assertion)
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(setup.stderr, selectors.EVENT_READ)
            while time.monotonic() < deadline and not any("still installing" in ln for ln in seen):
                if sel.select(timeout=1):
                    line = setup.stderr.readline()
                    if not line:
                        break
                    seen.append(line)
    finally:
        gate.touch()
        out, err = setup.communicate(timeout=60)
    assert any("pip: still installing the collected packages (" in ln for ln in seen), seen
    assert setup.returncode == 0, "".join(seen) + err
    assert "setup    done: .venv is ready" in err, out + err


def test_make_rehearse_refuses_round_without_resume(tmp_path, rehearsal_world):
    """ROUND only means something to a resumed rehearsal: without RESUME=1 it was silently dropped."""
    from support.rehearsal import rehearse_env

    env = rehearse_env(tmp_path, rehearsal_world, tracked=False)
    res = subprocess.run(["make", "rehearse", "ROUND=1"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode != 0
    assert "ROUND=1" in res.stderr and "make rehearse RESUME=1 ROUND=1" in res.stderr, res.stderr
    assert not (tmp_path / "runs" / "rehearsal").exists()


def test_setup_counts_each_package_once_says_installing_once_and_no_wrong_next_step(tmp_path):
    """Under `make rehearse`, setup's last line said "setup: done (.venv ready; run: make test)" in the
    middle of the rehearsal; its progress counted a package pip collects twice
    ("10 packages collected (opentelemetry-api>=1.43.0)", the 10th line, not the 10th package) and
    said "installing the collected packages (the longest step)" for the toolkit's own install too."""
    import os
    import sys

    root = tmp_path / "clone"
    for rel in ("bin/setup", "bin/lib.sh", "pyhelpers/procs/venv_users.py", "env/requirements.txt", "pyproject.toml"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    (root / "env" / "system-packages.txt").write_text("")
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    # pip as it logs (.venv/setup.log of a real setup): a requirement collected again further down
    collected = [*"abcdefghi", "c>=1.0 (from x==1->-r env/requirements.txt (line 9))", "j"]
    venv_python.write_text("#!/usr/bin/env bash\n"
                           'if [[ " $* " == *" -e "* ]]; then echo "Installing collected packages: toolkit"; '
                           'echo "Successfully installed toolkit-0.1"; exit 0; fi\n'
                           + "".join(f"echo 'Collecting {c}'\n" for c in collected)
                           + "echo 'Installing collected packages: a, b'\necho 'Successfully installed a-1 b-1'\n")
    venv_python.chmod(0o755)
    res = subprocess.run([str(root / "bin" / "setup"), "--for", "rehearse"], cwd=root, capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "pip: 10 packages collected (j)" in out, out
    assert out.count("installing the collected packages") == 1, out
    [done] = [line for line in out.splitlines() if "done" in line]
    assert "setup    done: .venv is ready for make rehearse" in done and "make test" not in done, done

    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS")}
    for goals, flag in ((["rehearse"], 'bin/setup --for "rehearse"'), (["setup"], "bin/setup")):
        dry = subprocess.run(["make", "-n", *goals], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        setup = [line.strip() for line in dry.stdout.splitlines() if line.startswith("bin/setup")]
        assert dry.returncode == 0 and setup == [flag], dry.stdout + dry.stderr
