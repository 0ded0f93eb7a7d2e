"""The base every record class shares: field checks, the dict codec, :class:`_Record`.

The record modules (:mod:`memoryos_actors.records`, :mod:`memoryos_actors.requests`,
:mod:`memoryos_actors.hits`, :mod:`memoryos_actors.context`) build their frozen, slotted
dataclasses on :class:`_Record` and check their fields in ``__post_init__`` with the ``_``
helpers here: each raises :class:`~memoryos_actors.errors.InvalidInput` naming the class and
the field, and some normalise the value in place (lists to tuples, ints to floats).
``to_dict()`` gives plain values (str, int, float, bool, None, list, dict) that round-trip
through msgpack, and ``Cls.from_dict(d)`` rebuilds the object, driven by the type hints.

The names are private to the record modules (a leading underscore): nothing else builds
records from parts.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from memoryos_actors.errors import InvalidInput

# ---------------------------------------------------------------------------- validation


def _fail(cls: str, name: str, what: str, value: Any) -> InvalidInput:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return InvalidInput(f"{cls}.{name} {what}, got {shown}")


def _text(obj: Any, name: str, *, nonempty: bool = False) -> str:
    value = getattr(obj, name)
    cls = type(obj).__name__
    if not isinstance(value, str):
        raise _fail(cls, name, "must be a str", value)
    try:
        # Lone surrogates cannot be stored as UTF-8 (msgpack, WAL): refuse them up front.
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(cls, name, "must be valid Unicode (no lone surrogates)", value) from None
    if nonempty and not value.strip():
        raise _fail(cls, name, "must be a non-empty string", value)
    return value


def _opt_text(obj: Any, name: str, *, nonempty: bool = False) -> None:
    if getattr(obj, name) is not None:
        _text(obj, name, nonempty=nonempty)


def _integer(obj: Any, name: str, *, minimum: int | None = None) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(type(obj).__name__, name, "must be an int", value)
    if minimum is not None and value < minimum:
        raise _fail(type(obj).__name__, name, f"must be >= {minimum}", value)


def _number(obj: Any, name: str, *, minimum: float | None = None, optional: bool = False) -> None:
    value = getattr(obj, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(type(obj).__name__, name, "must be a number", value)
    value = float(value)
    if not math.isfinite(value):
        raise _fail(type(obj).__name__, name, "must be finite", value)
    if minimum is not None and value < minimum:
        raise _fail(type(obj).__name__, name, f"must be >= {minimum}", value)
    object.__setattr__(obj, name, value)


def _timestamp(obj: Any, name: str, *, optional: bool = False) -> None:
    _number(obj, name, minimum=0.0, optional=optional)


def _tuple_of(obj: Any, name: str, kind: type | tuple[type, ...]) -> None:
    value = getattr(obj, name)
    cls = type(obj).__name__
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _fail(cls, name, "must be a tuple", value)
    for item in value:
        if not isinstance(item, kind):
            raise _fail(cls, name, f"must hold {_kind_name(kind)}", item)
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise _fail(cls, name, "must hold valid Unicode", item) from None
    object.__setattr__(obj, name, value)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return kind.__name__


def _pairs(obj: Any, name: str) -> None:
    """``extras``: a tuple of (key, value) string pairs with distinct keys."""
    value = getattr(obj, name)
    cls = type(obj).__name__
    if isinstance(value, Mapping):
        value = tuple(sorted(value.items()))
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise _fail(cls, name, "must be a tuple of (key, value) pairs", value)
    pairs = []
    for item in value:
        if isinstance(item, list):
            item = tuple(item)
        if (
            not isinstance(item, tuple)
            or len(item) != 2
            or not all(isinstance(x, str) for x in item)
        ):
            raise _fail(cls, name, "must hold (str, str) pairs", item)
        pairs.append(item)
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _fail(cls, name, "must not repeat a key", keys)
    object.__setattr__(obj, name, tuple(pairs))


def _choice(obj: Any, name: str, choices: tuple[Any, ...]) -> None:
    value = getattr(obj, name)
    if value not in choices or isinstance(value, bool):
        raise _fail(type(obj).__name__, name, f"must be one of {choices}", value)


# ---------------------------------------------------------------------------- codec

_T = TypeVar("_T", bound="_Record")


_PLAIN = frozenset((str, int, float, bool, type(None)))


def _encode(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decoder(tp: Any) -> Callable[[Any], Any] | None:
    """The function that turns a plain value into a value of type ``tp``, or None where
    the plain value is already one (str, numbers, bool, Literal, Any). Made once per field
    of a record class (:func:`_plan`), so decoding reads no type hints."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = _decoder([a for a in typing.get_args(tp) if a is not type(None)][0])
        if inner is None:
            return None
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            each = _decoder(args[0])

            def many(value: Any) -> tuple[Any, ...]:
                if not isinstance(value, (list, tuple)):
                    raise InvalidInput(f"expected a list, got {value!r}")
                return tuple(value) if each is None else tuple(each(v) for v in value)

            return many
        parts = tuple(_decoder(a) for a in args)

        def fixed(value: Any) -> tuple[Any, ...]:
            if not isinstance(value, (list, tuple)):
                raise InvalidInput(f"expected a list, got {value!r}")
            return tuple(
                v if part is None else part(v) for part, v in zip(parts, value, strict=True)
            )

        return fixed
    if origin is frozenset:

        def keywords(value: Any) -> frozenset[Any]:
            if not isinstance(value, (list, tuple)):
                raise InvalidInput(f"expected a list of keywords, got {value!r}")
            return frozenset(value)

        return keywords
    if isinstance(tp, type) and issubclass(tp, _Record):
        return tp.from_dict
    return None


_PLANS: dict[type, tuple[frozenset[str], tuple[tuple[str, Callable[[Any], Any] | None], ...]]] = {}


def _plan(
    cls: type,
) -> tuple[frozenset[str], tuple[tuple[str, Callable[[Any], Any] | None], ...]]:
    """The keys ``cls.from_dict`` accepts (its fields and ``"type"``) and each field's
    decoder, made on the class's first decode."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        plan = (
            frozenset(names) | {"type"},
            tuple((name, _decoder(hints[name])) for name in names),
        )
        _PLANS[cls] = plan
    return plan


#: Each record class's field names, in order (read once per class).
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


class _Record:
    """Mixin of every message: dict conversion driven by the type hints."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """Plain msgpack-friendly values: frozensets as sorted lists, tuples as lists."""
        cls = type(self)
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        return {name: _encode(getattr(self, name)) for name in names}

    @classmethod
    def from_dict(cls: type[_T], d: Mapping[str, Any]) -> _T:
        """Rebuild from :meth:`to_dict` output; validates like the constructor."""
        if not isinstance(d, Mapping):
            raise InvalidInput(f"{cls.__name__}.from_dict needs a mapping, got {type(d).__name__}")
        known, fields = _plan(cls)
        if not known.issuperset(d):
            unknown = sorted(set(d) - known)
            raise InvalidInput(f"{cls.__name__}.from_dict: unknown key(s) {unknown}")
        kwargs = {
            name: d[name] if decode is None else decode(d[name])
            for name, decode in fields
            if name in d
        }
        try:
            return cls(**kwargs)
        except TypeError as exc:  # a required field was missing
            raise InvalidInput(f"{cls.__name__}.from_dict: {exc}") from None


def _record(cls: type[_T]) -> type[_T]:
    """Mark a record class (kept as the one place to hook every record class)."""
    return cls


def _fmt_time(ts: float | None) -> str:
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return f"t={ts:.0f}"


def _bool(obj: Any, name: str) -> None:
    if not isinstance(getattr(obj, name), bool):
        raise _fail(type(obj).__name__, name, "must be a bool", getattr(obj, name))


def _instance(obj: Any, name: str, kind: type) -> None:
    if not isinstance(getattr(obj, name), kind):
        raise _fail(type(obj).__name__, name, f"must be a {kind.__name__}", getattr(obj, name))
