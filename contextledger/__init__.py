"""contextledger: an embeddable, event-sourced context runtime for LLM agents.

The log is the truth; everything a model sees is a view computed from it. Start with
``contextledger.store`` (where events live), ``contextledger.events`` (what they are),
``contextledger.history`` (what they amount to) and ``contextledger.ledger.SessionLog``
(validated appends with a live projection).
"""

__version__ = "0.1.0"
