"""Correcting a fact and an assistant trait through the memory page, in a real browser
(headless Chromium, Selenium) against a real ``memoryos serve`` on 127.0.0.1.

The facts and traits are the system's own: the offline LLM distils them from the turns once
a segment gets hot (a low promotion threshold and small tiers make that happen at once).
Each correction made on the page is checked to be the same edit the HTTP API makes: the
API answers the new text, the memory's history holds its creation, then old -> new, and retrieval finds the
new text, not the old. Skipped only when chromium or chromedriver is missing (``.ci/run``
installs them)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from browser import (
    browser_session,
    chromium_paths,
    foreign,
    log_in,
    main_text,
    requested_urls,
)
from srvutil import Server, add_key, start_server
from waiting import wait_until

if chromium_paths() is None:
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

from selenium.webdriver.common.by import By

# Small tiers and a low promotion threshold: a hot segment is promoted to LPM within a
# few turns, and the offline LLM distils facts and assistant traits from it.
# Persona updates gathered for 0.01 s, not the default 5 s: the module's set-up waits for
# the facts and traits they learn, and sat idle for the debounce.
CONFIG = """\
log_level = "error"
summary_debounce_seconds = 0.01
persona_debounce_seconds = 0.01
heat_tick_seconds = 0.05
stm_capacity = 2
mtm_capacity = 3
segment_max_pages = 2
promotion_threshold = 0.5
"""
USER = "eve"
TURNS = [
    ("I am from Lisbon.", "I always answer in short sentences."),
    ("I love sailing on weekends.", "I will remember that."),
    ("My sister plays the cello.", "How nice."),
    ("I like green tea.", "Noted."),
    ("We walked by the river.", "Lovely."),
    ("The weather was grey.", "Indeed."),
]


@dataclass
class Site:
    server: Server
    acme: str
    globex: str
    urls: list[str] = field(default_factory=list)


def _memories(api: httpx.Client) -> dict[str, Any]:
    r = api.get(f"/v1/users/{USER}/memories", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _learned(api: httpx.Client) -> dict[str, str] | None:
    """Memory id -> text of the user's facts and the default assistant's traits, once
    both kinds exist (None before)."""
    body = _memories(api)
    facts = {f["memory_id"]: f["text"] for f in body["kb"]}
    agent = {t["memory_id"]: t["text"] for a in body["agents"].values() for t in a["traits"]}
    return {**facts, **agent} if facts and agent else None


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ui-corrections")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    keys = root / "keys.json"
    acme, globex = add_key(root, keys, "acme"), add_key(root, keys, "globex")
    server = start_server(root, root / "data", keys, "--rate", "1000", "--burst", "1000")
    try:
        with server.client(acme) as api:
            for q, r in TURNS:
                assert (
                    api.post(
                        f"/v1/users/{USER}/turns", json={"query": q, "response": r}
                    ).status_code
                    == 201
                )
            wait_until(lambda: _learned(api), "facts and assistant traits learned", timeout=60.0)
        yield Site(server, acme, globex)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def driver(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with browser_session(tmp_path_factory.mktemp("chromium")) as d:
        yield d


@pytest.fixture(autouse=True)
def _only_loopback(site: Site, driver: Any) -> Iterator[None]:
    """After each test: the browser asked no host but 127.0.0.1 for anything."""
    yield
    site.urls.extend(requested_urls(driver))
    assert foreign(site.urls) == []


def _correct_on_profile(site: Site, driver: Any, memory_id: str, new: str) -> None:
    """Open the profile, type ``new`` into the correction box of ``memory_id`` and send it
    (the way a person does: the row's own form, its own button)."""
    driver.get(f"{site.server.base_url}/ui/users/{USER}/profile")
    action = f"/ui/users/{USER}/memories/{quote(memory_id, safe='')}/correct"
    form = driver.find_element(By.CSS_SELECTOR, f"form[action='{action}']")
    box = form.find_element(By.NAME, "value")
    label = driver.find_element(By.CSS_SELECTOR, f"label[for='{box.get_attribute('id')}']")
    assert memory_id in label.get_attribute("textContent")  # the box is labelled
    box.clear()
    box.send_keys(new)
    form.find_element(By.TAG_NAME, "button").click()
    wait_until(
        lambda: f"Corrected {memory_id}:" in main_text(driver),
        f"the confirmation of the correction of {memory_id}",
    )


def _check_corrected(
    site: Site, driver: Any, memory_id: str, old: str, new: str, query: str, section: str
) -> None:
    # The page the correction led to shows the new text and the history old -> new.
    assert f"-> {new}" in main_text(driver)
    driver.get(f"{site.server.base_url}/ui/users/{USER}/memories/{quote(memory_id, safe='')}")
    assert new in driver.find_element(By.ID, "memory-text").text
    events = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#history tbody tr")
    ]
    assert [(e[1], e[2], e[3]) for e in events] == [("created", "-", old), ("corrected", old, new)]
    # The profile shows the new text in its row, not the old one.
    driver.get(f"{site.server.base_url}/ui/users/{USER}/profile")
    link = driver.find_element(
        By.CSS_SELECTOR, f"a[href='/ui/users/{USER}/memories/{quote(memory_id, safe='')}']"
    )
    row = link.find_element(By.XPATH, "./ancestor::tr")
    assert new in row.text and old not in row.text
    # The same edit the HTTP API makes: the API, the history and retrieval agree.
    with site.server.client(site.acme) as api:
        got = api.get(f"/v1/users/{USER}/memories/{memory_id}")
        assert got.status_code == 200 and got.json()["text"] == new
        history = api.get(f"/v1/users/{USER}/memories/{memory_id}/history").json()["events"]
        assert [(e["action"], e["old"], e["new"]) for e in history] == [
            ("created", None, old),
            ("corrected", old, new),
        ]
        # Retrieval's ``section`` (kb, agent_traits) holds the new text, not the old (the
        # turn it was learned from still says the old one: that is the dialogue).
        found = api.post(f"/v1/users/{USER}/retrieve", json={"query": query})
        assert found.status_code == 200
        texts = [item["text"] for item in found.json()[section]]
        assert new in texts and old not in texts


def test_correcting_a_fact_on_the_page_is_the_apis_edit(site: Site, driver: Any) -> None:
    with site.server.client(site.acme) as api:
        learned = _learned(api)
    assert learned is not None
    fact_id, old = next(
        (m, t) for m, t in learned.items() if m.startswith("fact:") and "Lisbon" in t
    )
    new = "User is from Porto, not Lisbon's twin city."
    log_in(driver, site.server.base_url, site.acme)
    _correct_on_profile(site, driver, fact_id, new)
    _check_corrected(site, driver, fact_id, old, new, "where is the user from", "kb")


def test_correcting_an_assistant_trait_on_the_page_is_the_apis_edit(
    site: Site, driver: Any
) -> None:
    with site.server.client(site.acme) as api:
        learned = _learned(api)
    assert learned is not None
    trait_id, old = next(
        (m, t)
        for m, t in learned.items()
        if m.startswith("agent_trait:") and "short sentences" in t
    )
    # The tenant sees its own assistant id, never the library's tenant-scoped one.
    assert trait_id.startswith("agent_trait:default:")
    new = "Assistant: I answer in bullet points."
    log_in(driver, site.server.base_url, site.acme)
    _correct_on_profile(site, driver, trait_id, new)
    _check_corrected(
        site, driver, trait_id, old, new, "how should the assistant answer", "agent_traits"
    )


def test_another_tenant_cannot_correct_them(site: Site) -> None:
    """The correction route of another tenant's user is a 404 and changes nothing."""
    with site.server.client(site.acme) as api:
        before = _memories(api)
    with httpx.Client(base_url=site.server.base_url, timeout=60.0) as c:
        form = c.get("/ui/login")
        token = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        assert c.post("/ui/login", data={"csrf": token, "key": site.globex}).status_code == 303
        token = c.get("/ui/users").text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        for mid in ("fact:f1", "agent_trait:default:a1"):
            r = c.post(
                f"/ui/users/{USER}/memories/{quote(mid, safe='')}/correct",
                data={"csrf": token, "value": "Overwritten by globex."},
            )
            assert r.status_code == 404
    with site.server.client(site.acme) as api:
        assert _memories(api)["kb"] == before["kb"]
        assert _memories(api)["agents"] == before["agents"]
