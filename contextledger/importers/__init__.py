"""Importers: real transcripts into events (Claude Code, Codex CLI, OpenHands and OpenHands V1,
SWE-agent, mini-swe-agent, Gemini CLI, opencode, aider, OpenAI chat logs); ``import_trace``
picks the format by content, ``import_with_report`` also says what was read, written and left
out. Both refuse input that is no valid conversation unless told to be lenient. ``export_trace``
writes a session back as an OpenAI chat log or a Claude Code transcript. ``first_difference``
compares a stored session with a transcript imported again (``StoredSessionDiffers``).
Inside ``streaming(sink)`` the importers hand their events to ``sink`` as they build them
(memory bounded by a batch, not by the file)."""

from contextledger.events._catalogue import LeftOut
from contextledger.importers._aider import import_aider, import_aider_lines
from contextledger.importers._claude_code import import_claude_code, import_claude_code_lines
from contextledger.importers._codex import import_codex, import_codex_lines
from contextledger.importers._detect import (
    FORMATS,
    detect_format,
    import_trace,
    import_with_report,
    source_digest,
    transcripts_under,
)
from contextledger.importers._errors import TraceImportError
from contextledger.importers._export import (
    EXPORT_FORMATS,
    export_claude_code,
    export_openai_chat,
    export_trace,
)
from contextledger.importers._gemini_cli import import_gemini_cli, import_gemini_cli_data
from contextledger.importers._grown import (
    SOURCE_EVENTS,
    SOURCE_HASH,
    Difference,
    StoredSessionDiffers,
    first_difference,
)
from contextledger.importers._imported import ApiCall, ImportedSession, Spawn
from contextledger.importers._mini_swe_agent import (
    import_mini_swe_agent,
    import_mini_swe_agent_data,
)
from contextledger.importers._openai_chat import import_openai_chat, import_openai_chat_data
from contextledger.importers._opencode import import_opencode, import_opencode_data
from contextledger.importers._openhands import import_openhands, import_openhands_lines
from contextledger.importers._openhands_v1 import (
    import_openhands_v1,
    import_openhands_v1_events,
)
from contextledger.importers._report import ImportReport, ImportResult, import_report
from contextledger.importers._sink import (
    STREAM_BATCH,
    EventBuffer,
    Sink,
    Streamed,
    Tally,
    streaming,
    written_counts,
)
from contextledger.importers._strictness import INVALID_KINDS, NO_MESSAGE
from contextledger.importers._swe_agent import import_swe_agent, import_swe_agent_data

__all__ = [
    "EXPORT_FORMATS",
    "FORMATS",
    "INVALID_KINDS",
    "NO_MESSAGE",
    "SOURCE_EVENTS",
    "SOURCE_HASH",
    "STREAM_BATCH",
    "ApiCall",
    "Difference",
    "EventBuffer",
    "ImportReport",
    "ImportResult",
    "ImportedSession",
    "LeftOut",
    "Sink",
    "Spawn",
    "StoredSessionDiffers",
    "Streamed",
    "Tally",
    "TraceImportError",
    "detect_format",
    "export_claude_code",
    "export_openai_chat",
    "export_trace",
    "first_difference",
    "import_aider",
    "import_aider_lines",
    "import_claude_code",
    "import_claude_code_lines",
    "import_codex",
    "import_codex_lines",
    "import_gemini_cli",
    "import_gemini_cli_data",
    "import_mini_swe_agent",
    "import_mini_swe_agent_data",
    "import_openai_chat",
    "import_openai_chat_data",
    "import_opencode",
    "import_opencode_data",
    "import_openhands",
    "import_openhands_lines",
    "import_openhands_v1",
    "import_openhands_v1_events",
    "import_report",
    "import_swe_agent",
    "import_swe_agent_data",
    "import_trace",
    "import_with_report",
    "source_digest",
    "streaming",
    "transcripts_under",
    "written_counts",
]
