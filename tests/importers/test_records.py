"""Reading JSON documents: a document decoded with its lists read an item at a time gives the
same values as one decoded whole, and a content key hashed as it is encoded the same hash as
the whole text."""

from __future__ import annotations

import hashlib
import json
import math
import mmap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextledger.importers._openai_chat import document_key
from contextledger.importers._records import LazyItems, decode_json, lazy_document

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _plain(value: Any) -> Any:
    """``value`` with every list read through its items (a ``LazyItems`` decoded)."""
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


@given(json_values)
def test_a_lazy_document_reads_as_the_document(value: Any) -> None:
    data = json.dumps(value).encode()
    document = lazy_document(data)
    assert _plain(document) == value
    if isinstance(value, list):
        assert isinstance(document, LazyItems) and len(document) == len(value)
        assert document[1:3] == value[1:3] and (not value or document[-1] == value[-1])


@given(json_values)
def test_a_document_key_is_the_hash_of_its_json_text(value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, default=repr).encode("utf-8", "surrogatepass")
    assert document_key(value).sha256 == hashlib.sha256(text).hexdigest()
    lazy = lazy_document(json.dumps(value).encode())
    assert document_key(lazy).sha256 == hashlib.sha256(text).hexdigest()


def test_what_msgspec_refuses_is_read_as_the_json_module_reads_it() -> None:
    # NaN is no JSON, but Python writes it; bytes that are not UTF-8 become U+FFFD.
    assert math.isnan(_plain(lazy_document(b'{"a": [NaN]}'))["a"][0])
    assert _plain(lazy_document(b'{"a": ["\xff"]}')) == {"a": ["\ufffd"]}
    with pytest.raises(json.JSONDecodeError):
        lazy_document(b'{"a": [1,')


@pytest.mark.parametrize(
    "folder", ["opencode-export", "gemini-cli", "swe-agent-traj", "mini-swe-agent"]
)
def test_every_shared_document_reads_the_same_from_a_memory_map(folder: str) -> None:
    if not (TRACES / folder).is_dir():
        pytest.skip(f"shared/traces not present: {TRACES / folder} does not exist")
    for path in sorted((TRACES / folder).iterdir()):
        with path.open("rb") as f:
            buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        assert _plain(lazy_document(buffer)) == decode_json(path.read_bytes())
