"""Importers: real transcripts into events (Claude Code JSONL so far)."""

from contextledger.importers.claude_code import (
    ApiCall,
    ImportedSession,
    import_claude_code,
    import_claude_code_lines,
)
from contextledger.importers.errors import TraceImportError

__all__ = [
    "ApiCall",
    "ImportedSession",
    "TraceImportError",
    "import_claude_code",
    "import_claude_code_lines",
]
