"""No test leaves loopback: every process of the session's Ray cluster listens on 127.0.0.1.

Ray is imported here when the module is collected, as test modules do, before any fixture
runs: Ray reads whether to bind to the machine's network address once, at import, so the
setting must be made before collection (it is, at the top of tests/conftest.py).
"""

from __future__ import annotations

import ipaddress

import pytest

ray = pytest.importorskip("ray")

_LOOPBACK = "127.0.0.1"


def test_every_ray_node_and_the_gcs_are_on_loopback(ray_cluster) -> None:
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert nodes
    assert {n["NodeManagerAddress"] for n in nodes} == {_LOOPBACK}
    assert ray_cluster.address.rsplit(":", 1)[0] == _LOOPBACK  # the GCS
    assert ray.util.get_node_ip_address() == _LOOPBACK


def test_no_ray_process_listens_off_loopback(ray_cluster) -> None:
    psutil = pytest.importorskip("psutil")
    # This session's Ray processes are its descendants (another run's are not ours).
    pids = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() in ("gcs_server", "raylet"):
                pids.add(child.pid)
        except psutil.NoSuchProcess:
            pass  # a short-lived worker that ended meanwhile
    assert pids, "the session's cluster has a GCS and a raylet"
    try:
        sockets = [
            c
            for c in psutil.net_connections("inet")
            if c.pid in pids and c.status == psutil.CONN_LISTEN
        ]
    except psutil.AccessDenied:
        pytest.skip("listening sockets of other processes are not visible here")
    assert sockets
    off = sorted(ip for ip in {c.laddr.ip for c in sockets} if not _is_loopback(ip))
    assert off == [], f"Ray listens on {off} (all interfaces or the machine's address)"


def _is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1 is 127.0.0.1
    return (mapped or addr).is_loopback
