"""The memory page and the API documentation page (/docs) in a real browser: headless
Chromium (Selenium) against a real ``memoryos serve`` on 127.0.0.1, with no internet (the
browser resolves no host but 127.0.0.1, so a page works only if the server itself serves
every file it loads). One browser for the module's tests. Skipped only when chromium or
chromedriver is missing (``.ci/run`` installs them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from browser import (
    browser_session,
    chromium_paths,
    css_text,
    css_texts,
    foreign,
    log_in,
    main_text,
)
from srvutil import Server, add_key, start_server
from waiting import wait_until

if chromium_paths() is None:
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

# Small tiers, so a few turns reach MTM and the archive.
CONFIG = """\
log_level = "error"
summary_debounce_seconds = 0.01
heat_tick_seconds = 3600.0
mtm_capacity = 3
segment_max_pages = 4
"""
T0 = 1_700_000_000.0
XSS_USER = "<img src=x onerror=alert(9)>"
PAYLOAD_Q = "<script>window.__pwned = 1; alert('q')</script> my pin"
PAYLOAD_R = "<img src=x onerror=\"window.__pwned = 2; alert('r')\"> noted"
FILLER = [
    "We hiked the granite ridge above the glacier lake",
    "I baked sourdough bread today",
    "My sister plays the cello in an orchestra",
    "The train to Porto was late again",
    "I am learning to juggle with three balls",
    "Our garden tomatoes finally turned red",
    "I repainted the kitchen a pale green",
    "The chess club meets on Thursday evenings",
    "I read a novel about lighthouse keepers",
    "My bicycle chain snapped on the hill",
    "We watched the meteor shower from the roof",
    "I started a course in pottery",
    "The museum had an exhibit on Roman coins",
    "My neighbour keeps bees on her balcony",
    "I planted lavender along the fence",
    "The concert hall has wonderful acoustics",
    "I lost my umbrella on the tram",
    "We built a birdhouse from old planks",
    "The bakery sells cardamom buns on Sundays",
    "I fixed the leaking tap myself",
]


@dataclass
class Site:
    """The server, its keys, and every network request the browser made."""

    server: Server
    acme: str
    globex: str
    root: Path
    urls: list[str] = field(default_factory=list)
    responses: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("ui-browser")
    (root / "config.toml").write_text(CONFIG, encoding="utf-8")
    keys = root / "keys.json"
    acme, globex = add_key(root, keys, "acme"), add_key(root, keys, "globex")
    server = start_server(root, root / "data", keys, "--rate", "1000", "--burst", "1000")
    try:
        with server.client(acme) as c:
            turns = [
                ("I just adopted a beagle called Rufus.", "Congratulations on Rufus!"),
                ("My locker code at the gym is zebracorn42.", "Noted."),
            ]
            turns += [(f, "How nice.") for f in FILLER]
            for i, (q, r) in enumerate(turns):
                assert (
                    c.post(
                        "/v1/users/ann/turns",
                        json={"query": q, "response": r, "timestamp": T0 + i * 7200.0},
                    ).status_code
                    == 201
                )
            assert (
                c.post(
                    f"/v1/users/{quote(XSS_USER, safe='')}/turns",
                    json={"query": PAYLOAD_Q, "response": PAYLOAD_R},
                ).status_code
                == 201
            )
        yield Site(server, acme, globex, root)
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
    _drain(site, driver)
    assert foreign(site.urls) == []


def _drain(site: Site, driver: Any) -> None:
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message.get("method") == "Network.requestWillBeSent":
            site.urls.append(params["request"]["url"])
        elif message.get("method") == "Network.responseReceived":
            site.responses[params["response"]["url"]] = int(params["response"]["status"])


def _status(site: Site, driver: Any, url: str) -> int:
    _drain(site, driver)
    return site.responses[url]


def _login(site: Site, driver: Any, key: str) -> None:
    log_in(driver, site.server.base_url, key)


_main_text = main_text


def _no_script_ran(driver: Any) -> None:
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018 (the property raises when there is none)
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    assert driver.find_elements(By.TAG_NAME, "img") == []


def test_log_in_list_the_users_and_open_one(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    assert driver.get_cookie("memoryos_ui")["httpOnly"] is True
    assert driver.get_cookie("memoryos_ui")["sameSite"] == "Strict"
    assert site.acme not in driver.current_url
    rows = {
        r.get_attribute("data-user"): r
        for r in driver.find_elements(By.CSS_SELECTOR, "#users-table tbody tr")
    }
    assert set(rows) == {"ann", XSS_USER}
    assert rows["ann"].find_elements(By.TAG_NAME, "td")[0].text == "22"  # turns
    rows["ann"].find_element(By.LINK_TEXT, "ann").click()
    wait_until(lambda: _main_text(driver).startswith("ann\n"), "the user page")
    text = _main_text(driver)
    assert "Turns stored\n22" in text and "Mid-term memory" in text
    assert (
        driver.find_element(By.CSS_SELECTOR, "svg.chart title")
        .get_attribute("textContent")
        .startswith("Heat of")
    )
    # The archive tab lists what left the hot tiers, newest first.
    driver.find_element(By.LINK_TEXT, "Archive").click()
    wait_until(lambda: "Archive of ann" in _main_text(driver), "the archive page")
    ids = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#archive-table th a")]
    assert ids and all(i.startswith("page:p") for i in ids)
    assert [int(i[6:]) for i in ids] == sorted((int(i[6:]) for i in ids), reverse=True)


def test_search_shows_the_right_page_with_its_why(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    driver.get(site.server.base_url + "/ui/users/ann")
    driver.find_element(By.TAG_NAME, "body").send_keys("/")  # the shortcut to the search box
    active = driver.switch_to.active_element
    assert active.get_attribute("id") == "search-q"
    active.send_keys("What is my dog called, the beagle Rufus?", Keys.ENTER)
    wait_until(lambda: "/search" in driver.current_url, "the search to run")
    first = driver.find_element(By.CSS_SELECTOR, "table.results tbody tr")
    assert first.get_attribute("data-memory") == "page:p1"
    cells = first.find_elements(By.TAG_NAME, "td")
    assert cells[0].text in ("mtm", "archive") and float(cells[1].text) > 0
    assert "bm25" in cells[2].text  # the why
    assert "beagle called Rufus" in cells[3].text
    assert "beagle called Rufus" in driver.find_element(By.ID, "rendered").text


def test_deleting_a_page_removes_it_from_the_page_search_and_export(
    site: Site, driver: Any
) -> None:
    _login(site, driver, site.acme)
    base = site.server.base_url + "/ui/users/ann"
    driver.get(base + "/memories/page:p2")
    driver.find_element(By.PARTIAL_LINK_TEXT, "Delete page:p2").click()
    wait_until(lambda: "What goes" in _main_text(driver), "the confirmation page")
    wait_until(lambda: "zebracorn42" in css_text(driver, "pre.gone"), "the page that goes, shown")
    driver.find_element(By.ID, "confirm-delete").click()
    wait_until(lambda: "Deleted page:p2." in _main_text(driver), "the deletion's confirmation")
    for path in ("", "/archive"):
        driver.get(base + path)
        assert "zebracorn42" not in driver.page_source
    driver.get(base + "/archive?q=zebracorn42+locker")
    assert "No archived page matches." in _main_text(driver)
    driver.get(base + "/search?q=" + quote("gym locker code zebracorn42"))
    results = driver.find_elements(By.CSS_SELECTOR, "table.results tbody tr")
    assert results and "page:p2" not in [r.get_attribute("data-memory") for r in results]
    assert not any("zebracorn42" in r.text for r in results)
    assert "zebracorn42" not in driver.find_element(By.ID, "rendered").text
    driver.get(base + "/memories/page:p2")
    assert "Deleted." in _main_text(driver)
    assert (
        driver.find_element(By.CSS_SELECTOR, "#history tbody tr td:nth-child(2)").text == "deleted"
    )
    with site.server.client(site.acme) as api:
        export = api.get("/v1/users/ann/export")
        assert export.status_code == 200 and "zebracorn42" not in export.text
        assert "Rufus" in export.text


def test_correcting_a_trait_shows_in_its_history(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    driver.get(site.server.base_url + "/ui/users/ann/profile")
    for level, evidence in (("high", "adopted a beagle"), ("medium", "walks him daily")):
        select = driver.find_element(By.ID, "lvl-pets_and_animals")
        # A user with no trait level yet sees only the first category open (whether an
        # earlier test of this module set one depends on the order the tests ran in).
        category = select.find_element(By.XPATH, "ancestor::details")
        if category.get_attribute("open") is None:
            category.find_element(By.TAG_NAME, "summary").click()
        Select(select).select_by_value(level)
        box = driver.find_element(By.ID, "ev-pets_and_animals")
        box.send_keys(evidence)
        box.submit()
        wait_until(lambda lv=level: f"-> {lv}." in _main_text(driver), "the confirmation")
    row = driver.find_element(
        By.XPATH, "//a[@href='/ui/users/ann/memories/trait%3Apets_and_animals']/ancestor::tr"
    )
    assert "medium" in row.text and "walks him daily" in row.text
    row.find_element(By.TAG_NAME, "a").click()
    wait_until(lambda: "History" in _main_text(driver), "the memory page")
    events = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#history tbody tr")
    ]
    assert [(e[1], e[2], e[3]) for e in events] == [
        ("corrected", "-", "high"),
        ("corrected", "high", "medium"),
    ]
    with site.server.client(site.acme) as api:
        history = api.get("/v1/users/ann/memories/trait:pets_and_animals/history").json()
        assert [e["new"] for e in history["events"]] == ["high", "medium"]


def test_script_payloads_render_as_text_and_run_nothing(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    _no_script_ran(driver)
    assert XSS_USER in _main_text(driver)  # the user id, as text
    user = site.server.base_url + "/ui/users/" + quote(XSS_USER, safe="")
    for url in (
        user,
        user + "/archive",
        user + "/profile",
        user + "/memories/page:p1",
        user + "/memories/page:p1/delete",
        user + "/search?q=" + quote(PAYLOAD_Q),
        site.server.base_url + "/ui/users?q=" + quote(XSS_USER),
    ):
        driver.get(url)
        _no_script_ran(driver)
        assert driver.find_element(By.TAG_NAME, "h1").text != ""
    driver.get(user + "/memories/page:p1")
    text = driver.find_element(By.ID, "memory-text").text
    assert PAYLOAD_Q in text and PAYLOAD_R in text
    driver.get(user + "/search?q=" + quote(PAYLOAD_Q))
    assert driver.find_element(By.ID, "search-q").get_attribute("value") == PAYLOAD_Q
    assert PAYLOAD_R in driver.find_element(By.ID, "rendered").text
    _no_script_ran(driver)


def test_another_tenants_user_is_a_404_page(site: Site, driver: Any) -> None:
    _login(site, driver, site.globex)
    assert "No users" in _main_text(driver)
    for path in ("/ui/users/ann", "/ui/users/ann/profile", "/ui/users/ann/memories/page:p1"):
        url = site.server.base_url + path
        driver.get(url)
        assert driver.find_element(By.TAG_NAME, "h1").text == "No such user (404)"
        assert _status(site, driver, url) == 404
        assert "Rufus" not in driver.page_source


def test_keyboard_labels_and_widths(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    base = site.server.base_url + "/ui/users/ann"
    try:
        for width, height, mobile in ((1280, 900, False), (390, 844, True)):
            # A phone's screen, as the browser's device emulation lays it out.
            driver.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
            )
            for path in ("", "/profile", "/archive", "/search?q=bread"):
                driver.get(base + path)
                # Nothing wider than the screen: wide tables scroll inside their box (a
                # mobile layout viewport grows to the widest content, so it is checked too).
                assert driver.execute_script(
                    "return [window.innerWidth, "
                    "document.documentElement.scrollWidth <= window.innerWidth]"
                ) == [width, True], path
                unlabelled = driver.execute_script(
                    "return [...document.querySelectorAll('input,select,textarea')]"
                    ".filter(e => e.type !== 'hidden' && e.labels.length === 0)"
                    ".map(e => e.name)"
                )
                assert unlabelled == [], path
        # The first Tab reaches the skip link, which leads to the content.
        driver.get(base)
        driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
        skip = driver.switch_to.active_element
        assert skip.text == "Skip to content"
        skip.send_keys(Keys.ENTER)
        assert driver.switch_to.active_element.get_attribute("id") == "main"
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_every_request_stays_on_127_0_0_1(site: Site, driver: Any) -> None:
    _login(site, driver, site.acme)
    base = site.server.base_url + "/ui/users/ann"
    for path in ("", "/archive", "/profile", "/search?q=bread", "/memories/page:p1"):
        driver.get(base + path)
        entries = driver.execute_script(
            "return performance.getEntriesByType('navigation').concat("
            "performance.getEntriesByType('resource')).map(e => e.name)"
        )
        assert entries and foreign(entries) == []
        assert any("/ui/static/ui.css" in e for e in entries)
        assert any("/ui/static/ui.js" in e for e in entries)
    _drain(site, driver)
    assert len(site.urls) > 10 and foreign(site.urls) == []


# -- the API documentation page ------------------------------------------------------------------


def test_swagger_ui_renders_every_operation_from_local_files(site: Site, driver: Any) -> None:
    _drain(site, driver)  # what earlier tests asked for
    earlier = len(site.urls)
    driver.get(site.server.base_url + "/docs")
    # Swagger UI draws one block per operation, its path in .opblock-summary-path.
    wait_until(
        lambda: css_texts(driver, ".opblock-summary-path"),
        "Swagger UI to render an operation (did its script or style not load?)",
    )
    wait_until(
        lambda: len(css_texts(driver, ".opblock-summary-path")) >= 15,
        lambda: (
            f"Swagger UI to render 15 operations (it shows {css_texts(driver, '.opblock-summary-path')})"
        ),
    )
    shown = {p.replace("\u200b", "") for p in css_texts(driver, ".opblock-summary-path")}
    assert {
        "/v1/users",
        "/v1/users/{user_id}/memories",
        "/v1/users/{user_id}/turns",
        "/healthz",
    } <= shown
    # Its stylesheet applied: an operation block is laid out as Swagger UI's CSS says.
    block = driver.find_element(By.CSS_SELECTOR, ".opblock")
    assert block.value_of_css_property("border-radius") != "0px"
    _drain(site, driver)
    urls = site.urls[earlier:]
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in urls), urls
    assert any(u.endswith("/openapi.json") for u in urls), urls
    assert foreign(urls) == []
