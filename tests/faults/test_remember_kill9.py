"""A remembered note is durable on return (#44 item 4): a writer that remembers notes
with ``fsync="always"`` and is killed with SIGKILL right after the acknowledgements (no
close, no snapshot) loses none of them; reopened, each is read, listed and retrieved with
its metadata, and the ids go on after them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from faultutil import small_config

from memoryos_actors import MemoryOS

_CHILD = r"""
import json, os, signal, sys
from memoryos_actors import MemoryOS
from faultutil import small_config

mem = MemoryOS.open(sys.argv[1], small_config(fsync="always"))
for k in range(5):
    mem.add_turn("kim", f"small talk {k}", "sure")
    mid = mem.remember("kim", f"Note {k}: the locker code is {1000 + k}.", metadata={"k": k})
    print(json.dumps([mid, k]), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # kill -9 at once: no close, no snapshot
"""


def test_remembered_notes_survive_a_sigkill_right_after_they_are_acknowledged(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data_dir)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    acked = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(acked) == 5
    with MemoryOS.open(data_dir, small_config(fsync="always")) as mem:
        listed = {m.memory_id: m for m in mem.memories("kim", kinds=["fact"])}
        for mid, k in acked:
            note = mem.get_memory("kim", mid)
            assert note.text == f"Note {k}: the locker code is {1000 + k}."
            assert (note.origin, note.metadata) == ("remembered", {"k": k})
            assert listed[mid] == note
        ctx = mem.retrieve("kim", "what is the locker code?")
        assert {item.text for item in ctx.kb} >= {
            f"Note {k}: the locker code is {1000 + k}." for _m, k in acked
        }
        # The next note is numbered after the recovered ones.
        assert mem.remember("kim", "A later note.") not in listed
        assert len(mem.stored_page_ids("kim")) == 5
