"""Write the v1 data directory the format tests open, and what the public API answers on it.

Run with the code whose on-disk format is to be pinned (it was run once, on main before the
formats module of #43 existed; the outputs are committed beside this script):

    python tests/data/make_v1_datadir.py

It writes ``v1_datadir.tar.gz`` (a small data directory holding every kind of WAL record
and of archive record) and ``v1_answers.json.gz`` (gzipped JSON: what ``memories()``, ``user_state()``,
``retrieve()`` for fixed queries and ``export_user`` give for it, after the directory is
opened the way ``tests/store/test_v1_datadir.py`` opens it). Three steps:

1. a child process writes three users with a tiny configuration (profiles, promotions and
   so persona updates, facts and agent traits pushed out to the archive, segments and
   pages evicted to the archive, a correction and a deletion), closes (a snapshot), opens
   again, writes more and exits without closing: WAL records after the snapshot;
2. one WAL record and one archive record are damaged and ``repair_user`` cuts them: the
   ``lost`` placeholders (repair's backups of the damaged files are removed);
3. the directory is packed, and a copy of it is opened and read for the answers.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack

HERE = Path(__file__).resolve().parent
TARBALL = HERE / "v1_datadir.tar.gz"
ANSWERS = HERE / "v1_answers.json.gz"
USERS = ("ann", "bob", "cy")
QUERIES = (
    "hiking glacier mountain",
    "sourdough bread oven",
    "violin concert orchestra",
    "python parser bug",
)
#: A tiny configuration: every tier overflows within a few dozen turns.
CONFIG: dict[str, Any] = {
    "mtm_capacity": 2,
    "segment_max_pages": 3,
    "fscore_threshold": 0.9,
    "chain_affinity": False,
    "kb_capacity": 2,
    "agent_traits_capacity": 2,
    "promotion_threshold": 1.5,
    "persona_debounce_seconds": 0.0,
    "summary_debounce_seconds": 0.01,
    "heat_tick_seconds": 3600.0,
    "snapshot_every_turns": 10_000,
    "fsync": "never",
    "log_level": "error",
}
START = 1_700_000_000.0
_FRAME = struct.Struct(">IIQ")
_HEADER_SIZE = 6 + 2 + 8 + 4  # the framing's header: magic, version, base seq, CRC

_TOPICS = (
    (
        "I love hiking near the glacier lake with my sister.",
        "I always suggest a warm jacket for glacier walks.",
    ),
    (
        "My sourdough bread got a crunchy crust in the new oven.",
        "I love talking about bread with you.",
    ),
    (
        "I play the violin in a small orchestra every Thursday.",
        "I try to recommend concerts you might enjoy.",
    ),
    ("The python parser has a bug with nested brackets.", "I prefer short code examples."),
    ("I work as a nurse on night shifts at the hospital.", "That is demanding work."),
    ("My favourite food is mushroom risotto with parmesan.", "Delicious choice."),
)


def turn(user: str, n: int) -> tuple[str, str]:
    """The ``n``-th turn of ``user``: a topic sentence made unique per user and n."""
    q, r = _TOPICS[n % len(_TOPICS)]
    return f"{q} ({user} story {n})", r


_WRITER = """
import json, os, sys
sys.path[:0] = [sys.argv[3]]
from make_v1_datadir import CONFIG, START, USERS, turn
from memoryos_actors import AgentProfile, ManualClock, MemoryConfig, MemoryOS, UserProfile
data, phase = sys.argv[1], sys.argv[2]
cfg = MemoryConfig(**CONFIG)
clock = ManualClock(START if phase == "1" else START + 10_000.0)
mem = MemoryOS.open(data, cfg, clock=clock)
if phase == "1":
    for i, user in enumerate(USERS):
        mem.set_user_profile(user, UserProfile(name=user.title(), birth_year=1990 + i, extras=(("job", "nurse"),)))
        mem.set_agent_profile(user, AgentProfile(role="assistant", character="kind"), "default")
    for n in range(30):
        for user in USERS:
            clock.advance(7.0)
            mem.add_turn(user, *turn(user, n), assistant_id="default" if n % 4 else "coach")
        if n % 10 == 9:
            mem.flush()
    mem.flush()
    facts = [m for m in mem.memories("ann", kinds=["fact"])]
    if facts:
        mem.correct_memory("ann", facts[-1].memory_id, "Ann likes glacier hiking a lot.")
    pages = [m for m in mem.memories("bob", kinds=["page"])]
    mem.delete_memory("bob", pages[len(pages) // 2].memory_id)
    mem.correct_memory("cy", "trait:extraversion", "high", "says so")
    mem.flush()
    mem.close()
else:
    for n in range(30, 38):
        for user in USERS:
            clock.advance(7.0)
            mem.add_turn(user, *turn(user, n))
    mem.set_user_profile("cy", UserProfile(name="Cy", birth_year=1985, extras=(("job", "luthier"),)))
    mem.flush()
    os._exit(0)  # no close: the WAL keeps records after the snapshot, as after kill -9
"""


def _run_writer(data: Path, phase: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, str(data), phase, str(HERE)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"writer phase {phase} failed:\n{done.stderr}")


def _frames(path: Path) -> list[tuple[int, int, dict[str, Any]]]:
    """``(offset, frame length, record)`` of every frame of an undamaged log."""
    data = path.read_bytes()
    out, at = [], _HEADER_SIZE
    while at < len(data):
        length, _crc, _seq = _FRAME.unpack_from(data, at)
        payload = data[at + _FRAME.size : at + _FRAME.size + length]
        out.append((at, _FRAME.size + length, msgpack.unpackb(payload, raw=False)))
        at += _FRAME.size + length
    return out


def _damage(path: Path, kind: str) -> None:
    """Flip bytes inside the middle frame of ``kind`` in the log at ``path``."""
    frames = [f for f in _frames(path) if f[2].get("t") == kind and f[1] > _FRAME.size + 24]
    offset, _length, _rec = frames[len(frames) // 2]
    data = bytearray(path.read_bytes())
    for i in range(offset + _FRAME.size + 2, offset + _FRAME.size + 18):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _user_dir(data: Path, user: str) -> Path:
    from memoryos_actors.store.userstore import user_path

    return user_path(data, user)


def _kinds(path: Path) -> set[str]:
    return {str(f[2].get("t")) for f in _frames(path)} if path.exists() else set()


def write_datadir(data: Path) -> None:
    """Steps 1 and 2 of the module docstring, into the new directory ``data``."""
    from memoryos_actors.repair import repair_user

    _run_writer(data, "1")
    _run_writer(data, "2")
    _damage(_user_dir(data, "bob") / "wal.log", "meta")
    _damage(_user_dir(data, "cy") / "archive.log", "page")
    for user in ("bob", "cy"):
        report = repair_user(data, user)
        assert report.changed, report
    for backup in data.rglob("*.corrupt-*"):
        backup.unlink()
    wal_kinds = set().union(*(_kinds(_user_dir(data, u) / "wal.log") for u in USERS))
    arc_kinds = set().union(*(_kinds(_user_dir(data, u) / "archive.log") for u in USERS))
    want_wal = {"turn", "meta", "persona", "user_profile", "agent_profile", "edit", "lost"}
    want_arc = {"segment", "page", "fact", "agent_trait", "lost"}
    assert want_wal <= wal_kinds, f"WAL kinds {wal_kinds}"
    assert want_arc <= arc_kinds, f"archive kinds {arc_kinds}"


def plain(value: Any) -> Any:
    """``value`` as JSON-ready data (dataclasses as dicts, sets sorted, bytes as hex)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (frozenset, set)):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return plain(value.tolist())
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return repr(value)


def normalised(value: Any, key: str = "") -> Any:
    """``value`` without what differs between two openings of the same directory: floats
    rounded to 9 decimals (sums of scores vary in the last bit), and the random prefix of
    the ids of the persona jobs an opening asks again (``applied_jobs``)."""
    if isinstance(value, dict):
        return {k: normalised(v, k) for k, v in value.items()}
    if isinstance(value, list):
        if key == "applied_jobs":
            return [str(j).split(".")[-1] for j in value]
        return [normalised(v) for v in value]
    if isinstance(value, float):
        return round(value, 9)
    return value


def _timeless(context: dict[str, Any]) -> dict[str, Any]:
    """A retrieval's answer without how long it took (the one thing a rerun changes)."""
    return {k: v for k, v in context.items() if k != "elapsed_ms"}


def answers(data: Path, out_dir: Path) -> dict[str, Any]:
    """What the public API answers for the data directory ``data`` (opened in place)."""
    from memoryos_actors import ManualClock, MemoryConfig, MemoryOS

    got: dict[str, Any] = {}
    cfg = MemoryConfig(**CONFIG)
    with MemoryOS.open(data, cfg, clock=ManualClock(START + 50_000.0)) as mem:
        for user in USERS:
            mem.flush(user_id=user)
            export = mem.export_user(user, out_dir / f"{user}.json")
            got[user] = {
                "memories": plain(list(mem.memories(user))),
                "user_state": plain(mem.user_state(user)),
                "retrieve": {q: _timeless(plain(mem.retrieve(user, q))) for q in QUERIES},
                "export": json.loads(export.read_text()),
            }
    return normalised(got)


def unpack(tarball: Path, into: Path) -> Path:
    """Unpack the committed data directory into ``into``; return its path."""
    with tarfile.open(tarball) as tar:
        tar.extractall(into, filter="data")
    return into / "data"


def _members(root: Path) -> Iterator[Path]:
    yield from sorted(root.rglob("*"))


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_datadir(data)
        with tarfile.open(TARBALL, "w:gz") as tar:
            for path in [data, *_members(data)]:
                info = tar.gettarinfo(str(path), arcname=str(path.relative_to(data.parent)))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if path.is_file():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
        copy = unpack(TARBALL, Path(tmp) / "copy")
        exports = Path(tmp) / "exports"
        exports.mkdir()
        got = answers(copy, exports)
    with gzip.GzipFile(ANSWERS, "wb", mtime=0) as f:
        f.write((json.dumps(got, indent=1, sort_keys=True) + "\n").encode())
    print(f"wrote {TARBALL.name} ({TARBALL.stat().st_size} bytes) and {ANSWERS.name}")


if __name__ == "__main__":
    os.environ.setdefault("MEMORYOS_LOG_LEVEL", "error")
    main()
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
