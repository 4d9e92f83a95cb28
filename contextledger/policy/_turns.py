"""What a turn is: it begins at a user message a person wrote (``is_real_user``, defined in
``history._view``, whose environment block and historical media follow the same turns) and
runs to the next one. The user messages the runtime or a client writes on its own are marked
``synthetic`` (a compaction's "continue" or replayed request, a Claude Code attachment, a
Codex context note) and belong to the turn they arrive in, as does a message that arrived
mid-turn (its text kept only as synthetic and ignored parts); a compaction request starts no
turn either. Every count of turns (the prune's protected turns, the compaction's tail, the
request's turn number, the compaction attempts of a turn) reads them through
``is_real_user``. The compaction's tail also goes on from the compactor's own message after
an automatic compaction (``resumes_turn``, here): the turn's opening was summarised, and what
follows is its rest.
"""

from __future__ import annotations

from contextledger.events._parts import TextPart
from contextledger.history._projection import Message


def resumes_turn(message: Message) -> bool:
    """The compactor's message after an automatic compaction: its "continue" note or the
    request it sends again (a synthetic message with a part marked ``compaction_continue`` or
    ``compaction_replay``)."""
    return (
        message.role == "user"
        and message.synthetic
        and any(
            isinstance(p, TextPart)
            and bool(p.metadata.get("compaction_continue") or p.metadata.get("compaction_replay"))
            for p in message.parts
        )
    )
