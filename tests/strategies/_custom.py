"""Transforms named in configuration by the loader tests."""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.strategies import TransformContext
from contextledger.vocabulary._messages import ModelMessage

NOT_CALLABLE = 42


def last_two(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
    """The last two messages, whatever they split (for the refusal test)."""
    return list(view[-2:])


def forgets_to_return(view: Sequence[ModelMessage], context: TransformContext) -> None:
    """Nothing, as a transform that forgot its ``return`` (for the refusal test)."""


class Holder:
    @staticmethod
    def identity(view: Sequence[ModelMessage], context: TransformContext) -> list[ModelMessage]:
        return list(view)
