"""``LiveView``: the model view kept up to date as events arrive, at a cost that follows the
change rather than the length of the history.

Each history message's conversion is memoised on its version (and the few inputs it depends
on); the flat list of model messages is patched from the first changed message onward. New
events almost always touch the newest messages, so an update costs about the same at 500 or
50,000 messages. Events that reshape the view (a compaction requested, completed or rolled
back) and options whose output depends on the newest user message make it recompute the
message order, still reusing every unchanged conversion. The result always equals
``model_view(history, options)``; the property tests check that.
"""

from __future__ import annotations

from collections.abc import Sequence

from contextledger.history._projection import History, Message
from contextledger.history._view import (
    ViewOptions,
    _environment,
    convert_message,
    in_view,
    latest_user_id,
    media_boundary,
    view_messages,
    without_media,
)
from contextledger.vocabulary._messages import ModelMessage

_Key = tuple[int, str | None, bool]


class LiveView:
    """The model view of one ``History``, updated incrementally by ``update``."""

    __slots__ = (
        "_boundary",
        "_cursor",
        "_flat",
        "_history",
        "_memo",
        "_newest",
        "_options",
        "_position",
        "_segments",
        "_starts",
        "_structure",
    )

    def __init__(self, options: ViewOptions | None = None) -> None:
        self._options = options or ViewOptions()
        self._history: History | None = None
        self._cursor = 0
        self._structure = -1
        self._boundary = ""
        self._newest = ""
        self._position: dict[str, int] = {}
        self._segments: list[list[ModelMessage]] = []
        self._starts: list[int] = []
        self._flat: list[ModelMessage] = []
        self._memo: dict[str, tuple[_Key, list[ModelMessage]]] = {}

    @property
    def options(self) -> ViewOptions:
        """The options this view is built with."""
        return self._options

    def update(self, history: History) -> Sequence[ModelMessage]:
        """The view of ``history`` now. The returned sequence belongs to this object and is
        valid until the next ``update``; copy it to keep it."""
        if history is not self._history:
            # Conversions are memoised per message id and version, which only mean something
            # within one history: a new one starts from scratch.
            self._memo.clear()
            self._cursor = 0
        changed, cursor = history.changed_since(self._cursor)
        if (
            history is not self._history
            or history.structure != self._structure
            or self._options.environment == "latest"
            or self._options.historical_media == "latest-user"
        ):
            self._rebuild(history)
        else:
            self._patch(history, changed)
        self._history, self._cursor, self._structure = history, cursor, history.structure
        self._newest = history.messages[-1].id if history.messages else ""
        return self._flat

    # --- full recompute (memoised) ------------------------------------------------------------

    def _rebuild(self, history: History) -> None:
        options = self._options
        order = view_messages(history, options)
        latest_user = latest_user_id(order)
        self._boundary = media_boundary(order) if options.historical_media == "compaction" else ""
        self._position = {m.id: i for i, m in enumerate(order)}
        self._segments = [
            self._convert(history, m, _environment(history, m, options, latest_user)) for m in order
        ]
        # Only the messages in the view stay memoised: those a compaction cut off are not
        # converted again unless a rollback brings them back, so the memo follows the view,
        # not the session.
        self._memo = {m.id: self._memo[m.id] for m in order}
        self._restack(0)

    def _convert(
        self, history: History, message: Message, environment: str | None
    ) -> list[ModelMessage]:
        """The message's conversion, memoised on its version and the inputs it depends on.
        ``message`` may be a media-stripped copy of the history's; the key says so."""
        stripped = message is not history.message(message.id)
        key: _Key = (message.version, environment, stripped)
        cached = self._memo.get(message.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        converted = convert_message(message, self._options, environment)
        self._memo[message.id] = (key, converted)
        return converted

    def _restack(self, first: int) -> None:
        """Rebuild the flat list from segment ``first`` on."""
        start = self._starts[first] if first < len(self._starts) else len(self._flat)
        del self._flat[start:]
        del self._starts[first:]
        for segment in self._segments[first:]:
            self._starts.append(len(self._flat))
            self._flat.extend(segment)

    # --- patching -----------------------------------------------------------------------------

    def _patch(self, history: History, changed: list[str]) -> None:
        first = len(self._segments)
        options = self._options
        for message_id in dict.fromkeys(changed):
            message = history.message(message_id)
            position = self._position.get(message_id)
            if position is None:
                # Only a message newer than the last update can join (at the end); a change
                # to an older message outside the view (before a compaction) leaves it out.
                if message_id <= self._newest or not self._joins(history, message):
                    continue
                position = len(self._segments)
                self._position[message_id] = position
                self._segments.append([])
            if message.id < self._boundary:
                message = without_media(message)
            environment = _environment(history, message, options, None)
            self._segments[position] = self._convert(history, message, environment)
            first = min(first, position)
        if first < len(self._segments):
            self._restack(first)

    def _joins(self, history: History, message: Message) -> bool:
        """Whether a message new to this view belongs in it (appended at the end)."""
        return in_view(history, message, self._options.agent_id)
