"""The head's `ray start` missing Ray's fixed 30 s registration wait (ray/_private/node.py:424-444,
2.60.0: "The current node timed out during startup", exit 1) on a busy machine. Seen in a rehearsal
at load 25 on 2 cores: the dashboard and its agent answered, so `ray-head: ready after 70.7 s`; 9 s
later `ray start` raised and ended the head, the job's submission met a dead head (ray-lost), and the
restart's second start missed the same way: 'failed the same way twice', the run stopped. The head
is ready only once Ray says its node started (`Ray runtime started.`, ray/scripts/scripts.py:
1249-1251), and a start that ended before that is started again, as a worker's node agent does.
Ray's wait itself is RAY_START_TIMEOUT long: the GCS call that waits for the new node honours
RAY_raylet_start_wait_time_s (Ray's own error names it: 'Try increase the RAY_raylet_start_wait_time_s
config'), which `ray start` on the head and on each worker gets.

The stand-in `ray` below answers the readiness probes' dashboard and agent ports as the real head's
do while it starts; a failing attempt ends (Ray's own words, exit 1) once the dashboard answered a
probe, the order the loaded rehearsal showed.
"""

from __future__ import annotations

import sys
import textwrap

import pytest
from support.port_claims import claim_block, claim_port

from pyhelpers.config import ray_ports
from pyhelpers.config.load import load
from pyhelpers.errors import ToolkitError
from pyhelpers.launch import cluster, services
from pyhelpers.loop.supervisor import TRANSIENT, classify_exception
from pyhelpers.procs import groups
from pyhelpers.run.layout import from_config

# argv: DIR DASHBOARD_PORT AGENT_PORT; FAKE_RAY_PLAN="fail start": attempt 1 fails, attempt 2 starts.
FAKE_RAY_HEAD = textwrap.dedent("""\
    import http.server, os, socket, sys, threading, time
    d, dash, agent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    n = len(os.listdir(d)) + 1
    open(os.path.join(d, f"attempt-{n}"), "w").close()
    what = (os.environ["FAKE_RAY_PLAN"].split() + ["start"])[n - 1]
    answered = threading.Event()

    class Dashboard(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"ray_version": "2.60.0"}')
            answered.set()

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", dash), Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    listener = socket.create_server(("127.0.0.1", agent))
    print("Local node IP: 127.0.0.1", flush=True)
    if what == "fail":
        answered.wait()
        print("Exception: The current node timed out during startup. This could happen because some of "
              "the raylet failed to startup or the GCS has become overloaded.", flush=True)
        sys.exit(1)
    print("2026-12-06 09:01:55,078\\tSUCC scripts.py:1251 -- Ray runtime started.", flush=True)
    while True:
        time.sleep(3600)
""")


@pytest.fixture
def head(tmp_path, toolkit_env, monkeypatch, rehearsal_world):
    """start(plan) -> (cfg, lay, attempts dir, progress lines): the ray-head service as the train stage
    ensures it, its `ray start` the stand-in above (in the rehearsal's stand-in conda env, as bin/in-env
    runs the real one)."""
    monkeypatch.setenv("RAY_PORT", str(claim_block(ray_ports.SPAN)))
    monkeypatch.setenv("RAY_DASHBOARD_PORT", str(claim_port()))
    monkeypatch.setenv("CONDA_ROOT", str(rehearsal_world / "conda"))
    monkeypatch.setenv("SLIME_ENV", "slime")
    cfg = load()
    lay = from_config(cfg)
    fake = tmp_path / "fake_ray_head.py"
    fake.write_text(FAKE_RAY_HEAD)
    attempts = tmp_path / "attempts"
    attempts.mkdir()
    argv = [sys.executable, str(fake), str(attempts), str(cfg.RAY_DASHBOARD_PORT),
            str(ray_ports.port_of(cfg, "dashboard agent HTTP"))]
    monkeypatch.setattr(services.ray_start, "ray_head", lambda cfg: argv)

    def start(plan: str):
        monkeypatch.setenv("FAKE_RAY_PLAN", plan)
        lines: list[str] = []
        return cfg, lay, attempts, lines
    yield start
    groups.stop_all(lay.pids, 2.0)


def test_a_head_whose_ray_start_missed_the_registration_wait_is_started_again(head):
    cfg, lay, attempts, lines = head("fail start")
    said = services.ensure(cfg, lay, "ray-head", progress=lines.append)
    log = (lay.logs / "ray-head.log").read_text()
    # ready only once Ray said its node started: the failed attempt's answering dashboard was not enough
    assert "Ray runtime started." in log.split("==> ")[-1], f"{said}\n{log}"
    assert sorted(p.name for p in attempts.iterdir()) == ["attempt-1", "attempt-2"], f"{said}\n{log}"
    assert any("starting it again (attempt 2 of 3)" in line for line in lines), lines
    assert services.alive(lay, "ray-head")


def test_a_head_whose_ray_start_misses_every_attempt_is_ray_lost_naming_the_attempts(head):
    cfg, lay, attempts, lines = head("fail fail fail")
    with pytest.raises(ToolkitError) as err:
        services.ensure(cfg, lay, "ray-head", progress=lines.append)
    f = classify_exception("train", 0, step=None, exc=err.value)
    assert (f.cause, f.kind) == ("ray-lost", TRANSIENT), f
    assert "3 attempts" in err.value.what and "timed out during startup" in err.value.what, err.value.what
    assert len(list(attempts.iterdir())) == 3


def test_ray_start_on_the_head_and_on_a_worker_waits_ray_start_timeout_for_its_node_to_register(toolkit_env, monkeypatch):
    """A worker's join at load 25 missed the 30 s three times in a row ('GCS cannot find the node with
    node ID ... Try increase the RAY_raylet_start_wait_time_s config'), its agent gave up, and the
    two-node rehearsal waited out its JOIN_TIMEOUT."""
    monkeypatch.setenv("RAY_START_TIMEOUT", "240")
    cfg = load()
    lay = from_config(cfg)
    assert services.spec(cfg, lay, "ray-head").env_extra.get("RAY_raylet_start_wait_time_s") == "240"
    assert cluster.worker_env(cfg, lay).get("RAY_raylet_start_wait_time_s") == "240"
