"""The size of a reasoning part: its text, or the thinking its signature seals when the text
was omitted (Opus 4.7 in Claude Code 2.1.150 and later writes ``"thinking": ""``)."""

from __future__ import annotations

from contextledger.events._parts import ReasoningPart
from contextledger.history import part_chars
from contextledger.history._estimate import estimate_part_tokens, reasoning_payload
from contextledger.policy._tokens import measure_messages, measure_part, pieces
from contextledger.vocabulary._messages import ModelMessage, ModelReasoning

SIGNATURE = "EqAPCmMIDhgCKkDJZUuNNeogV27oBp+qYpoE/u/qnW9lwlZHsRxf9qPJAULIpF06A7Z3X8Ps"


def _reasoning(text: str, **sealed: str) -> ReasoningPart:
    return ReasoningPart(
        id="prt_1", message_id="msg_1", text=text, metadata={"anthropic": sealed} if sealed else {}
    )


def test_a_thinking_block_with_its_text_omitted_counts_by_its_signature() -> None:
    part = _reasoning("", signature=SIGNATURE)
    assert part_chars(part) == len(SIGNATURE)
    assert measure_part(part).text_pieces == pieces(SIGNATURE) > 0
    assert estimate_part_tokens(part) == -(-len(SIGNATURE) // 4)


def test_a_shown_thinking_counts_by_its_text_signed_or_not() -> None:
    assert part_chars(_reasoning("Check the lock first.", signature=SIGNATURE)) == 21
    assert part_chars(_reasoning("Check the lock first.")) == 21


def test_a_redacted_thinking_block_counts_by_its_data() -> None:
    assert reasoning_payload("", {"anthropic": {"redactedData": "EmwKAhgB"}}) == "EmwKAhgB"
    assert reasoning_payload("", {"anthropic": {"signature": ""}}) == ""
    assert reasoning_payload("", {"openai": {"signature": SIGNATURE}}) == ""


def test_the_view_of_a_sealed_thinking_measures_what_the_part_does() -> None:
    part = _reasoning("", signature=SIGNATURE)
    view = ModelMessage(
        role="assistant",
        content=(ModelReasoning(text="", provider_metadata=part.metadata),),
        source_id="msg_1",
    )
    assert measure_messages((view,)) == measure_part(part)
