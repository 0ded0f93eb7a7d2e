"""A headless Chromium (the system's ``chromium`` and ``chromedriver``) driven by Selenium,
for the memory page's browser tests. It resolves no host name but 127.0.0.1 and logs every
network request it makes, so a test can check that none left the machine."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from waiting import wait_until


def chromium_paths() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` if both are installed, else None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def start_browser(tmp: Path, width: int = 1280, height: int = 900) -> Any:
    """A headless Chromium whose profile and temporary files are under ``tmp``."""
    # Selenium Manager would look for drivers online when it is asked to find one: the
    # paths are given, and it is told to stay offline in any case.
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = chromium_paths()
    assert found is not None, "chromium and chromedriver are needed"
    browser, driver = found
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--metrics-recording-only",
        "--no-default-browser-check",
        # No host name resolves but the loopback address: nothing can be fetched
        # from anywhere else, whatever a page asks for.
        "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        f"--user-data-dir={tmp / 'profile'}",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    options.add_experimental_option(
        "perfLoggingPrefs", {"enableNetwork": True, "enablePage": False}
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    service = Service(executable_path=driver, env=env)
    return webdriver.Chrome(service=service, options=options)


@contextmanager
def browser_session(tmp: Path) -> Iterator[Any]:
    """A headless Chromium (see :func:`start_browser`) that quits when the block ends."""
    driver = start_browser(tmp)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser requested since the last call (from its network log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


#: URL schemes that name no host: the browser's own pages and inline data.
_LOCAL_SCHEMES = frozenset({"data", "about", "blob", "chrome", "chrome-untrusted", "devtools"})


def foreign(urls: list[str]) -> list[str]:
    """The URLs among ``urls`` that are not on 127.0.0.1 (the browser's own ``chrome:``
    pages and ``data:`` URLs are not requests to a host)."""
    return [
        url
        for url in urls
        if urlsplit(url).scheme not in _LOCAL_SCHEMES and urlsplit(url).hostname != "127.0.0.1"
    ]


def log_in(driver: Any, base_url: str, key: str) -> None:
    """Log in to the memory page at ``base_url`` with ``key``, from the keyboard (the key
    typed into its box, the form sent with Enter), as a fresh browser session."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.delete_all_cookies()
    driver.get(base_url + "/ui/login")
    box = driver.find_element(By.ID, "key")
    box.send_keys(key)
    box.send_keys(Keys.ENTER)
    wait_until(
        lambda: urlsplit(driver.current_url).path == "/ui/users",
        "the login to lead to the users page",
        interval=0.05,
    )


def main_text(driver: Any) -> str:
    """The text of the page's main part ("" while the page is being replaced)."""
    return css_text(driver, "main")


def css_text(driver: Any, selector: str) -> str:
    """The text of the first element ``selector`` matches ("" as :func:`css_texts`)."""
    return next(iter(css_texts(driver, selector)), "")


def css_texts(driver: Any, selector: str) -> list[str]:
    """The texts of the elements ``selector`` matches, none while the page (or the part
    a script draws) is being replaced: an element found then belonged to what went away."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By

    try:
        return [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, selector)]
    except StaleElementReferenceException:
        return []
    except WebDriverException as exc:  # chromedriver's word for a node of a replaced page
        if "does not belong to the document" in str(exc):
            return []
        raise
