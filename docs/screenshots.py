"""Screenshots of the memory page for the docs (docs/images/), from the demo's conversation.

Plays the demo script (``memoryos demo``'s data: three people, their turns and follow-up
questions) into a fresh data directory for tenant ``demo``, with the turns a few hours
apart so the history spans days and small tiers so some pages reach the archive; corrects
one trait; then serves that directory with ``memoryos serve`` on 127.0.0.1, logs in to
``/ui`` in headless Chromium (the system's ``chromium`` and ``chromedriver``, driven by
Selenium) and saves PNGs into ``docs/images/``. With Pillow installed (the ``bench``
extra), the PNGs are reduced to 256 colours.

    python docs/screenshots.py
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))  # bench/_doors.py: the server's command line

from _doors import serve_argv  # noqa: E402

TENANT = "demo"
TURN_GAP_S = 4 * 3600.0
#: Small tiers so the demo's few turns fill MTM and reach the archive.
CONFIG = """\
log_level = "error"
heat_tick_seconds = 3600.0
summary_debounce_seconds = 0.01
mtm_capacity = 4
"""


def load_demo(data: Path, config_file: Path) -> dict[str, Any]:
    """Play the demo script into ``data`` for tenant ``demo``; return what the shots need."""
    from memoryos_actors import AgentProfile, ManualClock, MemoryConfig, MemoryOS, UserProfile
    from memoryos_actors.cli.demo import load_script

    script = load_script()
    cfg = MemoryConfig.load(config_file)
    clock = ManualClock(script.start_time)

    def uid(user: str) -> str:
        return f"{TENANT}:{user}"

    with MemoryOS.open(data, cfg, clock=clock) as mem:
        for u in script.users:
            mem.set_user_profile(uid(u.user_id), UserProfile.from_dict(u.profile))
            if u.agent_profile is not None:
                mem.set_agent_profile(uid(u.user_id), AgentProfile.from_dict(u.agent_profile))
        longest = max(len(u.turns) for u in script.users)
        for i in range(longest):
            for u in script.users:
                if i < len(u.turns):
                    clock.advance(TURN_GAP_S)
                    mem.add_turn(uid(u.user_id), *u.turns[i])
        mem.flush()
        for i in range(max(len(u.follow_ups) for u in script.users)):
            for u in script.users:
                if i < len(u.follow_ups):
                    question, answer = u.follow_ups[i]
                    clock.advance(TURN_GAP_S)
                    mem.retrieve(uid(u.user_id), question)
                    mem.add_turn(uid(u.user_id), question, answer)
        mem.flush()
        user = script.provenance_user
        # Correct a trait a persona update learned, so its history shows both.
        learned = mem.user_state(uid(user)).traits
        trait = learned[0].name if learned else "nature_and_environment"
        level = "low" if learned and learned[0].level != "low" else "high"
        mem.correct_memory(uid(user), f"trait:{trait}", level, "corrected by hand")
        mem.flush()
    return {"user": user, "query": script.provenance_query, "trait": trait}


def start_server(
    root: Path, data: Path, config_file: Path
) -> tuple[subprocess.Popen[bytes], str, str]:
    from memoryos_actors.server.keys import KeyStore

    key, _ = KeyStore(root / "keys.json").add(TENANT, note="screenshots")
    ready = root / "ready.json"
    proc = subprocess.Popen(
        serve_argv(data, config_file, root / "keys.json", ready),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMORYOS_")},
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return proc, f"http://127.0.0.1:{json.loads(ready.read_text())['port']}", key


def browser(tmp: Path) -> Any:
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager look for drivers online
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        raise SystemExit(
            "needs the chromium and chromedriver commands "
            "(Debian: apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        f"--user-data-dir={tmp / 'profile'}",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    return webdriver.Chrome(
        service=Service(driver, env={**os.environ, "TMPDIR": str(tmp)}), options=options
    )


def shoot(
    driver: Any,
    url: str,
    out: Path,
    width: int = 1280,
    height: int = 800,
    scroll_to: str | None = None,
    mobile: bool = False,
) -> int:
    """Load ``url`` at ``width`` x ``height`` CSS pixels (from the element ``scroll_to``,
    if given) and save the PNG to ``out``; returns its size in bytes."""
    from selenium.webdriver.common.by import By

    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )
    driver.get(url)
    if scroll_to:
        el = driver.find_element(By.CSS_SELECTOR, scroll_to)
        driver.execute_script("arguments[0].scrollIntoView()", el)
    png = driver.get_screenshot_as_png()
    try:
        from PIL import Image
    except ImportError:
        out.write_bytes(png)
    else:
        image = Image.open(io.BytesIO(png)).convert("RGB")
        buf = io.BytesIO()
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(
            buf, format="PNG", optimize=True
        )
        out.write_bytes(buf.getvalue())
    return out.stat().st_size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "images"), help="where the PNGs go")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mos-shots-") as tmp:
        root = Path(tmp)
        config_file = root / "config.toml"
        config_file.write_text(CONFIG, encoding="utf-8")
        demo = load_demo(root / "data", config_file)
        proc, base, key = start_server(root, root / "data", config_file)
        driver = browser(root)
        try:
            from selenium.webdriver.common.by import By

            driver.get(base + "/ui/login")
            driver.find_element(By.ID, "key").send_keys(key)
            driver.find_element(By.CSS_SELECTOR, "form button").click()
            user = base + "/ui/users/" + quote(demo["user"], safe="")
            shots = [
                ("ui-users.png", base + "/ui/users", {"height": 420}),
                ("ui-user.png", user, {"height": 900}),
                ("ui-search.png", user + "/search?q=" + quote(demo["query"]), {"height": 760}),
                ("ui-profile.png", user + "/profile", {"height": 820}),
                ("ui-history.png", user + "/memories/trait:" + demo["trait"], {"height": 720}),
                ("ui-phone.png", user, {"width": 390, "height": 780, "mobile": True}),
            ]
            total = 0
            for name, url, kw in shots:
                size = shoot(driver, url, out / name, **kw)
                total += size
                print(f"{name}: {size / 1024:.0f} KiB")
            print(f"total {total / 1024:.0f} KiB in {out}")
        finally:
            driver.quit()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
