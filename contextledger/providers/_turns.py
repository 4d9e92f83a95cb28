"""Wire formats whose API wants user and model turns to alternate (Bedrock Converse, Gemini).

Such an API takes one turn object per run of same-role messages: ``{"role":...,"<items
key>":[``, the items of the run's messages, ``]}``. A tool message goes in a user turn, so tool
results and the user message after them share one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from contextledger.providers._base import WireFormat
from contextledger.providers._shapes import dumps
from contextledger.vocabulary._messages import ModelRole


def turn_head(role: str, items_key: str) -> bytes:
    """The bytes that open a turn: ``{"role":...,"<items_key>":[``."""
    return dumps({"role": role})[:-1] + b"," + dumps(items_key) + b":["


def alternating_heads(model_role: str, items_key: str) -> dict[ModelRole, bytes]:
    """Turn heads by view role: user and tool messages in ``user`` turns, assistant messages
    in ``model_role`` turns, their items under ``items_key``."""
    user = turn_head("user", items_key)
    return {"user": user, "tool": user, "assistant": turn_head(model_role, items_key)}


class AlternatingTurns(WireFormat):
    """A wire format whose ``encode_message`` gives a message's items only, which
    ``WireFormat.encode`` wraps in turns: a turn opens with ``turn_heads[role]`` and ends with
    ``]}``, and consecutive messages whose roles have the same head share it.

    Fragments still depend only on the message and its mark; only the joins between them
    depend on the neighbours' roles, and a join never changes the bytes before the message
    that follows it. A message's offset is where its turn opens when it starts one, and
    where its items start when it continues the previous message's turn.
    """

    #: Set by each format, usually with ``alternating_heads``.
    turn_heads: ClassVar[Mapping[ModelRole, bytes]]
    turn_end: ClassVar[bytes] = b"]}"
