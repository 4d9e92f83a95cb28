"""The view-transform hook: pi's ``transformContext`` for the model view.

A ``Transform`` takes the view about to be encoded and a ``TransformContext`` and returns the
messages to send. It is pure: the log keeps every event, only what the model sees changes.
``apply_transform`` runs one and refuses a result that separates a tool call from its result;
``load_transform`` resolves a transform named in configuration as ``"module.path:function"``
(``named_transform``: called by that name), and ``view_transform`` says which one a
session's requests go through.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from contextledger.history._view import tool_pairs_ok
from contextledger.policy._cadence import estimate_view_tokens
from contextledger.vocabulary._messages import ModelMessage


class StrategyError(Exception):
    """A strategy could not be loaded, named or applied."""


@dataclass(frozen=True, kw_only=True)
class TransformContext:
    """What a transform may consult besides the view: the model's usable window in tokens (0
    when unknown), the turn index (real user messages so far) and a token estimate."""

    usable_tokens: int = 0
    turn: int = 0
    estimate: Callable[[Sequence[ModelMessage]], int] = field(default=estimate_view_tokens)


Transform = Callable[[Sequence[ModelMessage], TransformContext], list[ModelMessage]]


def apply_transform(
    transform: Transform,
    view: Sequence[ModelMessage],
    context: TransformContext | None = None,
    *,
    name: str | None = None,
) -> list[ModelMessage]:
    """``transform(view, context)``, checked: raises ``StrategyError`` naming the strategy when
    the transform raises, returns anything but a list of ``ModelMessage`` or separates a tool
    call from its result."""
    label = name or getattr(transform, "__name__", repr(transform))
    try:
        result: object = transform(view, context or TransformContext())
    except StrategyError:
        raise
    except Exception as exc:
        raise StrategyError(f"strategy {label!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(result, list):
        raise StrategyError(
            f"strategy {label!r} returned {type(result).__name__}, expected a list of ModelMessage"
        )
    strays = [type(m).__name__ for m in result if not isinstance(m, ModelMessage)]
    if strays:
        raise StrategyError(
            f"strategy {label!r} returned a list holding {strays[0]}, expected a list of "
            "ModelMessage"
        )
    if not tool_pairs_ok(result):
        raise StrategyError(
            f"strategy {label!r} separated a tool call from its result; a transform must "
            "keep or drop each call together with its result"
        )
    return result


def load_transform(spec: str) -> Transform:
    """The callable named by ``"module.path:attribute"`` (the attribute may be dotted)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise StrategyError(f"transform {spec!r} is not of the form 'module.path:function'")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise StrategyError(f"transform {spec!r}: cannot import {module_name!r}: {exc}") from exc
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError as exc:
            raise StrategyError(
                f"transform {spec!r}: {module_name!r} has no {attribute!r}"
            ) from exc
    if not callable(target):
        raise StrategyError(f"transform {spec!r} is a {type(target).__name__}, not callable")
    return cast(Transform, target)


def named_transform(spec: str) -> Transform:
    """The transform ``spec`` (``"module.path:function"``) names (``load_transform``), called
    by that name: a ``StrategyError`` about it, wherever it runs (a request built, a
    compaction), names the spec as given (``'os:getcwd'``), not the function (``'getcwd'``)."""
    loaded = load_transform(spec)

    @functools.wraps(loaded)
    def named(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        return loaded(view, context)

    named.__name__ = named.__qualname__ = spec
    return named


def view_transform(transform: Transform | None, named: str | None) -> Transform | None:
    """The transform a session's requests go through: ``transform`` when given, else the one
    ``named`` names (``config.view.transform``, ``named_transform``), else None."""
    return transform or (named_transform(named) if named else None)
