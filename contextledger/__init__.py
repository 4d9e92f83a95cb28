"""contextledger: an embeddable, event-sourced context runtime for LLM agents.

The log is the truth; everything a model sees is a view computed from it. The names an
application needs are here: the ``Runtime`` and its ``SessionHandle`` (or ``LocalSession``
to run a session in-process), the stores, ``Config`` and ``Model``, the request inputs, the
importers, the strategies and the simulation. Each subpackage's ``__init__`` is its public
API (``contextledger.policy`` for the pure decisions alone, ``contextledger.testing`` for
the hypothesis strategies and invariants, which need the ``testing`` extra); the modules
inside are implementation and may move.
"""

from contextledger.actors import (
    EmbeddedRuntimeClosed,
    Runtime,
    RuntimeBridge,
    RuntimeClosed,
    SessionApi,
    SessionHandle,
    embed_in_asyncio,
)
from contextledger.compaction import (
    CompactionExhausted,
    CompactionResult,
    ExtractiveSummarizer,
    ModelSummarizer,
    Summarizer,
)
from contextledger.config import Config, ConfigError
from contextledger.events import Event, LedgerError, ModelRef, ToolSchema, Usage
from contextledger.history import History, ViewOptions, model_view
from contextledger.importers import ImportedSession, TraceImportError, import_trace
from contextledger.ledger import SessionLog
from contextledger.request import BuiltRequest, RequestInputs, SystemSegments
from contextledger.simulation import (
    LocalSession,
    TraceResult,
    TurnReplay,
    simulate_paths,
    simulate_trace,
)
from contextledger.store import EventStore, MemoryStore, SQLiteStore
from contextledger.strategies import Strategy, strategy
from contextledger.vocabulary import Model, ModelLimits, ModelMessage

__version__ = "0.1.0"

__all__ = [
    "BuiltRequest",
    "CompactionExhausted",
    "CompactionResult",
    "Config",
    "ConfigError",
    "EmbeddedRuntimeClosed",
    "Event",
    "EventStore",
    "ExtractiveSummarizer",
    "History",
    "ImportedSession",
    "LedgerError",
    "LocalSession",
    "MemoryStore",
    "Model",
    "ModelLimits",
    "ModelMessage",
    "ModelRef",
    "ModelSummarizer",
    "RequestInputs",
    "Runtime",
    "RuntimeBridge",
    "RuntimeClosed",
    "SQLiteStore",
    "SessionApi",
    "SessionHandle",
    "SessionLog",
    "Strategy",
    "Summarizer",
    "SystemSegments",
    "ToolSchema",
    "TraceImportError",
    "TraceResult",
    "TurnReplay",
    "Usage",
    "ViewOptions",
    "__version__",
    "embed_in_asyncio",
    "import_trace",
    "model_view",
    "simulate_paths",
    "simulate_trace",
    "strategy",
]
