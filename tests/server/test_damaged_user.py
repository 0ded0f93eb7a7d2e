"""One user's damaged files over HTTP: that user's calls fail with the typed error, every
other user is served, and ``/metrics`` keeps answering and counts the damaged user."""

from __future__ import annotations

from pathlib import Path

from srvutil import add_key, start_server

from memoryos_actors import MemoryConfig, MemoryOS
from memoryos_actors.store.snapshot import list_snapshots
from memoryos_actors.store.userstore import SNAPSHOT_DIR, user_path


def _flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 16):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_metrics_count_a_damaged_user_while_the_others_are_served(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    cfg = MemoryConfig(log_level="error", heat_tick_seconds=3600.0)
    with MemoryOS.open(data_dir, cfg) as mem:  # the server's users are "<tenant>:<id>"
        for user in ("acme:vic", "acme:ann"):
            mem.add_turn(user, f"{user} likes glacier hikes", "noted")
    for _gen, snap in list_snapshots(user_path(data_dir, "acme:vic") / SNAPSHOT_DIR):
        _flip_middle(snap)
    key = add_key(tmp_path, tmp_path / "keys.json", "acme")
    server = start_server(tmp_path, data_dir, tmp_path / "keys.json")
    try:
        with server.client(key) as c:
            before = c.get("/metrics")
            assert before.status_code == 200
            assert "memoryos_damaged_users 0.0" in before.text
            bad = c.post("/v1/users/vic/retrieve", json={"query": "hikes"})
            assert bad.status_code == 500
            assert bad.json()["error"]["type"] == "CorruptDataError"
            assert "snapshot" in bad.json()["error"]["message"]
            good = c.post("/v1/users/ann/retrieve", json={"query": "hikes"})
            assert good.status_code == 200
            after = c.get("/metrics")
            assert after.status_code == 200
            assert "memoryos_damaged_users 1.0" in after.text
            assert "acme:vic" not in after.text  # no label carries a user
    finally:
        server.stop()
