"""The OpenAPI document (``/openapi.json``, what ``/docs`` shows) is written for API users:
every route, parameter, answer and model is described, and no developer's note (Sphinx
roles, remarks about "this module") leaks into it from the code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from srvutil import Deployment

#: Marks of text written for the code's readers, not the API's.
INTERNAL = [
    r":(mod|func|class|meth|attr|data|exc):",
    r"``",
    r"\bthis module\b",
    r"\bWhy this\b",
    r"\bmixin\b",
    r"\bdocstring\b",
    r"\bAttributes:",
    r"\bArgs:",
]
METHODS = {"get", "put", "post", "delete", "patch"}


def _texts(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every (place, text) of a summary or description in the document."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("summary", "description") and isinstance(value, str):
                yield f"{where}.{key}", value
            else:
                yield from _texts(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _texts(value, f"{where}[{i}]")


def _doc(deployment: Deployment) -> dict[str, Any]:
    with deployment.server.client() as c:  # no key: the document is public
        r = c.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def test_the_openapi_text_has_no_notes_for_developers(deployment: Deployment) -> None:
    doc = _doc(deployment)
    assert len(doc["info"].get("description", "")) > 200
    leaks = [
        (where, pattern, text[:120])
        for where, text in _texts(doc)
        for pattern in INTERNAL
        if re.search(pattern, text)
    ]
    assert leaks == []


def test_every_route_parameter_answer_and_model_is_described(deployment: Deployment) -> None:
    doc = _doc(deployment)
    missing: list[str] = []
    operations = [
        (path, method, op)
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if method in METHODS
    ]
    assert len(operations) >= 18
    for path, method, op in operations:
        name = f"{method.upper()} {path}"
        for field in ("summary", "description"):
            if not op.get(field, "").strip():
                missing.append(f"{name}: {field}")
        for param in op.get("parameters", []):
            if not param.get("description", "").strip():
                missing.append(f"{name}: parameter {param['name']}")
        for code, answer in op["responses"].items():
            text = answer.get("description", "").strip()
            if not text or text == "Successful Response":
                missing.append(f"{name}: answer {code}")
        if path.startswith("/v1/"):
            for code in ("401", "422", "429"):
                if code not in op["responses"]:
                    missing.append(f"{name}: answer {code} not documented")
        if "{user_id}" in path and method == "get" and "404" not in op["responses"]:
            missing.append(f"{name}: answer 404 not documented")
    for model, schema in doc["components"]["schemas"].items():
        if not schema.get("description", "").strip():
            missing.append(f"model {model}")
        for prop, spec in schema.get("properties", {}).items():
            if not spec.get("description", "").strip():
                missing.append(f"model {model}: field {prop}")
    assert missing == []


def test_there_is_no_redoc_page_that_would_call_a_cdn(deployment: Deployment) -> None:
    with deployment.server.client() as c:
        assert c.get("/redoc").status_code == 404
