"""Logging setup: structlog, human-readable by default, JSON lines on request.

The library only calls ``structlog.get_logger``; applications configure output. The CLI calls
``configure_logging``; embedding applications may call it too or configure structlog
themselves, adding ``redact_secrets`` to their processor chain. ``mask_secrets`` is the one
function that masks secrets in text, for log lines and for stored texts alike.
"""

from __future__ import annotations

import io
import logging
import re
import sys
from collections.abc import Mapping
from typing import Any, Final, TextIO, cast

import structlog
from structlog.typing import EventDict, WrappedLogger

LEVELS: Final = ("debug", "info", "warning", "error")
REDACTED: Final = "[redacted]"
#: Key names whose values are secrets, matched case-insensitively with ``-`` read as ``_``,
#: alone or as the last ``_``-separated part of a longer name (``x-api-key``,
#: ``access_token``, ``proxy-authorization``). ``max_tokens`` and the like do not match.
_SECRET_KEY: Final = re.compile(
    r"(?:.*_)?(?:api_?key|authorization|token|secret|secret_access_key|password|cookie)"
)
#: Secrets recognisable in free text by their shape: bearer credentials; OpenAI (``sk-``,
#: ``sk-proj-``), OpenRouter (``sk-or-``), Anthropic (``sk-ant-``) and Google (``AIza``) API
#: keys; AWS access key ids (``AKIA``, ``ASIA``); GitHub tokens (``ghp_`` and the like).
_SECRET_TEXT: Final = re.compile(
    r"(?P<bearer>\b(?i:bearer)\s+)[A-Za-z0-9._~+/-]{8,}=*"
    r"|(?<![A-Za-z0-9])sk-[A-Za-z0-9_-]{8,}"
    r"|(?<![A-Za-z0-9])AIza[A-Za-z0-9_-]{20,}"
    r"|(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}"
)
#: A name, ``=`` or ``:`` with any quotes around, and a value: ``x-api-key: ...``,
#: ``aws_secret_access_key=...``, ``"password": "..."``. Possessive, so that a long run of
#: name characters is scanned once (the time stays linear in the text).
_ASSIGNMENT: Final = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<name>[A-Za-z0-9_-]++)"
    r"(?P<separator>[\"']?[ \t]*+[:=][ \t]*+[\"']?)"
    r"(?P<value>[^\s\"'&,;<>()\[\]{}]++)"
)
#: The names whose values are secrets: a name ending in one of these words.
_SECRET_NAME: Final = re.compile(
    r"(?:^|[_-])(?P<word>api[_-]?key|secret(?:[_-]access[_-]key)?|access[_-]?key|password"
    r"|passwd|(?:access|refresh|session|auth|id)[_-]?token|key|token)$",
    re.IGNORECASE,
)
#: After a bare ``key`` or ``token`` only a long token is a secret (``key=AbC...`` of 16 and
#: more characters of hex or base64, as API keys are), not ``key: part_id`` in an error.
_GENERIC_WORDS: Final = frozenset({"key", "token"})
_LONG_TOKEN: Final = re.compile(r"[A-Za-z0-9+/=_.~-]{16,}")


def configure_logging(
    level: str = "warning", *, json: bool = False, stream: TextIO | None = None
) -> None:
    """Send structlog output at ``level`` and above to ``stream`` (stderr by default), as
    JSON lines when ``json`` is true, secrets redacted. Raises ``ValueError`` for an unknown
    level."""
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    out: TextIO = stream or cast(TextIO, _CurrentStderr())
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json
        else structlog.dev.ConsoleRenderer(colors=out.isatty())
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Tracebacks become text first, so that the redaction sees them too.
            structlog.processors.format_exc_info,
            redact_secrets,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )


def redact_secrets(logger: WrappedLogger, method_name: str, event_dict: EventDict) -> EventDict:
    """A structlog processor: values of secret-named keys (at any depth of dicts, lists and
    tuples) become ``"[redacted]"``, and bearer tokens and provider API keys inside any
    string are masked. Nested containers are copied, never changed in place."""
    for key, value in event_dict.items():
        event_dict[key] = _redact(key, value)
    return event_dict


def mask_secrets(text: str) -> str:
    """``text`` with every secret it recognises replaced by ``"[redacted]"``: bearer tokens,
    provider API keys (``sk-...``, ``sk-ant-...``, ``AIza...``), AWS access key ids, GitHub
    tokens, and the value given to a secret's name (``x-api-key: ...``,
    ``aws_secret_access_key=...``, ``password=...``; after a bare ``key=`` or ``token=``,
    a long hex or base64 token). Pure: the one masking function, used for log lines
    (``redact_secrets``) and for every text taken from an exception that is stored (a
    compaction's rollback detail, an assistant message's error, a tool's error)."""
    text = _SECRET_TEXT.sub(lambda m: (m["bearer"] or "") + REDACTED, text)
    return _ASSIGNMENT.sub(_masked_value, text)


def _masked_value(match: re.Match[str]) -> str:
    secret = _SECRET_NAME.search(match["name"])
    if secret is None:
        return match[0]
    if secret["word"].lower() in _GENERIC_WORDS and not _LONG_TOKEN.fullmatch(match["value"]):
        return match[0]
    return match["name"] + match["separator"] + REDACTED


def _is_secret_key(key: object) -> bool:
    return isinstance(key, str) and bool(_SECRET_KEY.fullmatch(key.lower().replace("-", "_")))


def _redact(key: object, value: Any) -> Any:
    if value is not None and _is_secret_key(key):
        return REDACTED
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: _redact(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(None, item) for item in value]
    if isinstance(value, tuple):
        return tuple(_redact(None, item) for item in value)
    return value


class _CurrentStderr(io.TextIOBase):
    """Whatever ``sys.stderr`` is when a line is written (test runners and embedding
    applications replace it; a stream captured at configuration time may be closed)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


__all__ = ["LEVELS", "REDACTED", "configure_logging", "mask_secrets", "redact_secrets"]
