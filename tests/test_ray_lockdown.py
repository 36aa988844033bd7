"""The run's Ray head locked down and isolated (issue 17 §2), on a real (CPU) Ray head started as
the loop starts it (`pyhelpers run service ray-head`), with a job running a task on it:

- every socket a process of the cluster listens on is on loopback (read from /proc/net/tcp{,6});
- every fixed port is the configuration's (RAY_PORT and the ports above it, RAY_DASHBOARD_PORT);
- without the run's token GCS, the client server and the job API refuse; with it they answer;
- the token is in a 0600 file and on no command line, in no other file of the run or of Ray;
- starting the head prunes the run's own old Ray sessions and leaves another's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
import requests
from support.rehearsal import (
    in_rehearsal,
    pyhelpers_cmd,
    rehearse_env,
    wait_for,
)

from pyhelpers.config import ray_ports
from pyhelpers.config.load import load
from pyhelpers.procs import groups, procfs

LOOPBACK = ("127.0.0.1", "::ffff:127.0.0.1", "::1")
# The job's driver connects with the token it inherits from the head and runs one task (a worker).
JOB = ("import ray, time, pathlib, sys; ray.init(); "
       "assert ray.get(ray.remote(lambda: 1).remote()) == 1; "
       "pathlib.Path(sys.argv[1]).touch(); time.sleep(300)")
OLD = [f"session_2020-01-0{d}_10-00-00_000000_{100 + d}" for d in range(1, 6)]  # this run's, recorded
FOREIGN = "session_2020-01-09_10-00-00_000000_999"  # someone else's in a shared temp dir


def _token_file(run_dir: Path) -> Path:
    return run_dir / "ray" / "auth-token"


def _bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


@pytest.fixture(scope="module")
def head(tmp_path_factory, rehearsal_world):
    tmp = tmp_path_factory.mktemp("ray-lockdown")
    env = rehearse_env(tmp, rehearsal_world, tracked=False)
    cfg = load({**env, "RUN_NAME": "rehearsal"})
    temp = Path(cfg.ray_temp_dir)
    for name in [*OLD, FOREIGN]:
        (temp / name / "logs").mkdir(parents=True)
    (cfg.run_dir / "ray").mkdir(parents=True)
    (cfg.run_dir / "ray" / "sessions").write_text("".join(f"{n}\n" for n in OLD))
    try:
        up = in_rehearsal(env, *pyhelpers_cmd("run", "service", "ray-head"), timeout=240)
        assert up.returncode == 0, up.stdout + up.stderr
        token = _token_file(cfg.run_dir).read_text().strip() if _token_file(cfg.run_dir).exists() else None
        marker = tmp / "job-ran-a-task"
        http = requests.Session()
        http.trust_env = False
        sub = http.post(f"http://127.0.0.1:{cfg['RAY_DASHBOARD_PORT']}/api/jobs/", timeout=30, headers=_bearer(token),
                        json={"entrypoint": f"{sys.executable} -c '{JOB}' {marker}", "submission_id": "lockdown"})
        assert sub.status_code == 200, sub.text
        wait_for("the job to run a task", marker.exists, timeout=240)
        yield SimpleNamespace(env=env, cfg=cfg, run_dir=cfg.run_dir, temp=temp, token=token, http=http)
    finally:
        in_rehearsal(env, *pyhelpers_cmd("run", "cleanup"), timeout=180)


def _cluster_pids(h) -> set[int]:
    rec = groups.load(groups.pidfile(h.run_dir / "pids", "ray-head"))
    return set(procfs.group_members(rec.pgid)) | set(procfs.marker_matches(h.cfg.ray_temp_dir))


def _listeners(pids: set[int]) -> list[tuple[str, int, int]]:
    """(address, port, pid) of every listening TCP socket of these processes."""
    socks = procfs.listeners()
    owners = procfs.pids_with_sockets(set(socks))
    return sorted((addr, port, pid) for inode, (addr, port) in socks.items()
                  for pid in owners.get(inode, ()) if pid in pids)


def test_every_listener_of_the_cluster_is_on_loopback(head):
    heard = _listeners(_cluster_pids(head))
    assert len(heard) > 10  # the head, its agents, the job's supervisor, driver and worker
    public = [h for h in heard if h[0] not in LOOPBACK]
    assert public == [], f"listening beyond loopback: {public}"


def test_every_fixed_port_is_the_configurations(head):
    ports = {port for _, port, _ in _listeners(_cluster_pids(head))}
    configured = {p.port for p in ray_ports.ports(head.cfg)}
    assert configured - ports == set()
    # Every other port is a worker's, chosen by the kernel: none of Ray's fixed defaults.
    assert {10001, 52365, 44217, 44227, 8265, 6379} & (ports - configured) == set()


def test_the_job_api_refuses_a_caller_without_the_token(head):
    url = f"http://127.0.0.1:{head.cfg['RAY_DASHBOARD_PORT']}"
    assert head.http.get(f"{url}/api/jobs/", timeout=30).status_code == 401
    assert head.http.get(f"{url}/api/version", timeout=30).status_code == 401
    assert head.http.get(f"{url}/api/jobs/", timeout=30, headers=_bearer("not-the-token")).status_code == 403
    assert head.http.get(f"{url}/api/jobs/lockdown", timeout=30, headers=_bearer(head.token)).json()["status"] == "RUNNING"


def test_gcs_and_the_client_server_refuse_a_caller_without_the_token(head):
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc, ray_client_pb2, ray_client_pb2_grpc

    base = head.cfg.int("RAY_PORT")
    calls = {
        "GCS": (base, lambda ch, md: gcs_service_pb2_grpc.NodeInfoGcsServiceStub(ch).GetAllNodeInfo(
            gcs_service_pb2.GetAllNodeInfoRequest(), metadata=md, timeout=30)),
        "client server": (base + 1, lambda ch, md: ray_client_pb2_grpc.RayletDriverStub(ch).ClusterInfo(
            ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING), metadata=md, timeout=30)),
    }
    got = {}
    for what, (port, call) in calls.items():
        got[what] = []
        for md in ([], [("authorization", "Bearer not-the-token")], [("authorization", f"Bearer {head.token}")]):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                try:
                    call(ch, md)
                    got[what].append("OK")
                except grpc.RpcError as exc:
                    got[what].append(exc.code().name)
    assert got == {"GCS": ["UNAUTHENTICATED", "UNAUTHENTICATED", "OK"],
                   "client server": ["UNAUTHENTICATED", "UNAUTHENTICATED", "OK"]}


def test_the_token_is_a_0600_file_and_nowhere_else(head):
    token_file = _token_file(head.run_dir)
    assert head.token and len(head.token) >= 32
    assert token_file.stat().st_mode & 0o777 == 0o600 and token_file.parent.stat().st_mode & 0o777 == 0o700
    on_cmdline = []
    for pid in procfs.all_pids():
        try:
            if head.token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                on_cmdline.append(pid)
        except OSError:
            continue
    assert on_cmdline == []
    in_files = []
    for root in (head.run_dir, head.temp):
        for p in root.rglob("*"):
            if p.is_file() and not p.is_symlink() and p != token_file:
                try:
                    if head.token.encode() in p.read_bytes():
                        in_files.append(p)
                except OSError:
                    continue
    assert in_files == []


def test_starting_the_head_keeps_the_newest_sessions_of_the_run_and_not_another_s(head):
    from pyhelpers.launch import ray_sessions

    kept = ray_sessions.recorded(head.run_dir)
    assert kept[:-1] == OLD[-ray_sessions.KEEP:]  # the oldest recorded ones are gone ...
    assert kept[-1] == ray_sessions.latest(head.temp)  # ... and the head's own is recorded
    assert [n for n in OLD if (head.temp / n).exists()] == OLD[-ray_sessions.KEEP:]
    assert (head.temp / FOREIGN).is_dir()
