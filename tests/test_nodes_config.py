"""The multi-node knobs (NNODES, NODE_ADDR, HEAD_ADDR, NET_IFACE, JOIN_TIMEOUT): checked once, like
every knob, against this machine's own interfaces (docs/multinode.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, run_pyhelpers

from pyhelpers.procs import groups, netif, procfs


def _routable() -> tuple[str, str]:
    """(interface, address) of one non-loopback IPv4 address of this machine."""
    for name, addrs in netif.addresses().items():
        for a in addrs:
            if a.version == 4 and not a.is_loopback:
                return name, str(a)
    pytest.fail("this machine has no non-loopback IPv4 address; the multi-node checks need one to test")


def _errors(r) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]


def test_addresses_are_the_kernels_as_ip_addr_lists_them():
    ip = shutil.which("ip")
    assert ip, "iproute2's `ip` is missing: `make setup` installs it (env/system-packages.txt)"
    listed = json.loads(subprocess.run([ip, "-j", "addr"], capture_output=True, text=True, check=True).stdout)
    ours = netif.addresses()
    for link in listed:
        want = {i["local"] for i in link.get("addr_info", [])}
        assert {str(a) for a in ours[link["ifname"]]} == want, link["ifname"]


def test_one_node_needs_none_of_them(toolkit_env):
    r = run_pyhelpers(["config", "check"], toolkit_env)
    assert r.returncode == 0, r.stderr


def test_several_nodes_need_node_addr(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "NNODES": "2"})
    assert r.returncode == 1
    line = next(ln for ln in _errors(r) if "NODE_ADDR" in ln)
    iface, addr = _routable()
    assert "NNODES=2 needs NODE_ADDR" in line and f"NODE_ADDR={addr}" in line, line


@pytest.mark.parametrize("addr", ["127.0.0.1", "::1", "localhost"])
def test_node_addr_on_loopback_is_refused(toolkit_env, addr):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "NNODES": "2", "NODE_ADDR": addr, "NET_IFACE": "lo"})
    assert r.returncode == 1
    assert any(f"NODE_ADDR={addr!r} is a loopback address" in ln for ln in _errors(r)), r.stderr


def test_node_addr_of_another_machine_is_refused_naming_this_machines_addresses(toolkit_env):
    iface, addr = _routable()
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "NNODES": "2", "NODE_ADDR": "198.51.100.250",
                                            "NET_IFACE": iface})
    assert r.returncode == 1
    line = next(ln for ln in _errors(r) if ln.startswith("error: NODE_ADDR="))
    assert "is not an address of this machine" in line and f"{addr} ({iface})" in line, line


def test_node_addr_must_be_an_address_not_a_name(toolkit_env):
    r = run_pyhelpers(["config", "check"], {**toolkit_env, "NNODES": "2", "NODE_ADDR": "node1.example"})
    assert r.returncode == 1
    assert any("NODE_ADDR='node1.example' is not an IP address" in ln for ln in _errors(r)), r.stderr


def test_net_iface_is_required_exists_and_carries_node_addr(toolkit_env):
    iface, addr = _routable()
    base = {**toolkit_env, "NNODES": "2", "NODE_ADDR": addr}
    missing = run_pyhelpers(["config", "check"], base)
    assert missing.returncode == 1
    assert any(f"set NET_IFACE={iface}" in ln for ln in _errors(missing)), missing.stderr
    nosuch = run_pyhelpers(["config", "check"], {**base, "NET_IFACE": "nosuch0"})
    assert nosuch.returncode == 1
    assert any("NET_IFACE='nosuch0' is not an interface of this machine" in ln and iface in ln
               for ln in _errors(nosuch)), nosuch.stderr
    wrong = run_pyhelpers(["config", "check"], {**base, "NET_IFACE": "lo"})
    assert wrong.returncode == 1
    assert any(f"NET_IFACE='lo' does not carry NODE_ADDR={addr}" in ln and f"NET_IFACE={iface}" in ln
               for ln in _errors(wrong)), wrong.stderr
    ok = run_pyhelpers(["config", "check"], {**base, "NET_IFACE": iface})
    assert ok.returncode == 0, ok.stderr


def test_head_addr_must_be_a_routable_address(toolkit_env):
    for bad, why in (("127.0.0.1", "is a loopback address"), ("head.example", "is not an IP address")):
        r = run_pyhelpers(["config", "check"], {**toolkit_env, "HEAD_ADDR": bad})
        assert r.returncode == 1
        assert any(f"HEAD_ADDR={bad!r} {why}" in ln for ln in _errors(r)), r.stderr


def test_a_broken_worker_can_still_leave_stop_and_show_status(toolkit_env):
    """Issue 41 item 5: a worker whose interface (and so NODE_ADDR) is gone, its Ray node still running.
    `make leave`, `make stop` and `make status` check only what they use, never the whole configuration:
    they are how such a machine is cleaned up."""
    addr = "198.51.100.250"  # on no interface of this machine (TEST-NET-2)
    env = {**toolkit_env, "NNODES": "2", "NODE_ADDR": addr, "NET_IFACE": "gone0", "HEAD_ADDR": "198.51.100.1",
           "RUN_NAME": "broken", "STOP_GRACE": "1"}
    mine = Path(env["RUNS_DIR"]) / "broken" / "nodes" / addr
    node = groups.start("ray-worker", ["sleep", "3600"], pids_dir=mine / "pids", logs_dir=mine / "logs")
    try:
        leave = subprocess.run([str(ROOT / "bin" / "leave")], env=env, cwd=ROOT, capture_output=True, text=True,
                               timeout=120)
        assert leave.returncode == 0, leave.stderr
        assert f"this worker ({addr}) left the run" in leave.stderr, leave.stderr
        assert not procfs.group_members(node.pgid), "make leave left the worker's Ray node running"
        for verb in ("status", "stop"):
            r = subprocess.run([str(ROOT / "bin" / verb)], env=env, cwd=ROOT, capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0 and "is not an address of this machine" not in r.stdout + r.stderr, \
                f"make {verb}: {r.stdout}{r.stderr}"
    finally:
        groups.stop_all(mine / "pids", 1.0)
