"""The one error an importer raises on purpose: a transcript it cannot read."""

from __future__ import annotations

from contextledger.events._errors import LedgerError


class TraceImportError(LedgerError):
    """A transcript is malformed: names the file, the 1-based ``line`` and the ``field`` (a
    dotted path such as ``message.content[2].tool_use_id``; empty when the whole line is at
    fault). Nothing is imported from a file that raises it."""

    def __init__(self, source: str, line: int, field: str, reason: str) -> None:
        where = f"{source}:{line}" + (f" field {field!r}" if field else "")
        super().__init__(f"cannot import {where}: {reason}")
        self.source = source
        self.line = line
        self.field = field
        self.reason = reason
