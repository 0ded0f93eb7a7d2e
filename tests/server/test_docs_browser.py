"""The API documentation page (/docs) in headless Chromium, with no internet: the
browser resolves no host but 127.0.0.1, so the page works only if the server itself serves
every file it loads. Skipped only when chromium or chromedriver is missing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from browser import browser_session, chromium_paths, foreign, requested_urls
from srvutil import Deployment
from waiting import wait_until

if chromium_paths() is None:
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with browser_session(tmp_path_factory.mktemp("chromium-docs")) as d:
        yield d


def _texts(driver: Any, css: str) -> list[str]:
    try:
        return [str(e.text) for e in driver.find_elements(By.CSS_SELECTOR, css)]
    except StaleElementReferenceException:  # Swagger UI re-rendered the element meanwhile
        return []


def test_swagger_ui_renders_every_operation_from_local_files(
    deployment: Deployment, driver: Any
) -> None:
    base = deployment.server.base_url
    requested_urls(driver)  # forget what an earlier test asked for
    driver.get(base + "/docs")
    # Swagger UI draws one block per operation, its path in .opblock-summary-path.
    wait_until(
        lambda: _texts(driver, ".opblock-summary-path"),
        "Swagger UI to render an operation (did its script or style not load?)",
    )
    wait_until(
        lambda: len(_texts(driver, ".opblock-summary-path")) >= 15,
        lambda: (
            f"Swagger UI to render 15 operations (it shows {_texts(driver, '.opblock-summary-path')})"
        ),
    )
    shown = {p.replace("\u200b", "") for p in _texts(driver, ".opblock-summary-path")}
    assert {
        "/v1/users",
        "/v1/users/{user_id}/memories",
        "/v1/users/{user_id}/turns",
        "/healthz",
    } <= shown
    # Its stylesheet applied: an operation block is laid out as Swagger UI's CSS says.
    block = driver.find_element(By.CSS_SELECTOR, ".opblock")
    assert block.value_of_css_property("border-radius") != "0px"
    urls = requested_urls(driver)
    assert any(u.endswith("/docs/assets/swagger-ui-bundle.js") for u in urls), urls
    assert any(u.endswith("/openapi.json") for u in urls), urls
    assert foreign(urls) == []


def test_there_is_no_redoc_page_that_would_call_a_cdn(deployment: Deployment) -> None:
    with deployment.server.client() as c:
        assert c.get("/redoc").status_code == 404
