"""The defaults of the context policy that the config and the policy's functions share.

Each threshold is defined here once, with its reason and its precedent, and referenced both
by ``contextledger.config`` (a setting's default) and by the function that applies it (a
parameter's default, or the fallback when a setting is unset). A constant only a function
uses stays at the top of that function's module; a default only the config uses stays in
the config, with its reason beside it.
"""

from __future__ import annotations

from typing import Final

# --- tokens --------------------------------------------------------------------------------

#: Characters per token of the plain estimate (opencode's ``Token.estimate``; Kilo Code and
#: pi use the same rule): it needs no tokenizer and is what the reference agents decide by.
CHARS_PER_TOKEN: Final = 4
#: Kilo ``FACTOR``: characters / 4 under-counts provider tokenizers by 15-30 %, most on code
#: and JSON, so every preflight figure is inflated by 1.3 (an empirical margin, not a ratio of
#: any tokenizer).
PREFLIGHT_FACTOR: Final = 1.3
#: How the calibrated counter cuts text into the pieces it counts, as a byte-level BPE
#: tokenizer's pre-split does (GPT-2's and cl100k's, simplified): a word with the space before
#: it, up to three digits, a run of punctuation, a run of whitespace. Characters per token
#: depend on the content, pieces per token hardly: on the tuning traces (``claude-code-jsonl``,
#: 200+ character strings, cl100k standing in for the provider's tokenizer) prose has 4.5-4.8
#: characters a token, code and paths 3.2-3.4, JSON 2.7 and non-ASCII text 2.3 (one string),
#: but 0.87-1.11 pieces a token throughout; calibrated on pieces instead of characters, the
#: estimation benchmark's median error on ``tune`` fell from 9.5 % to 6.6 %. Counting
#: whitespace runs, digits in threes and punctuation runs each did better there than leaving
#: whitespace out (7.1 %), single digits (7.3 %), each punctuation mark apart (7.3 %) or a
#: piece per non-ASCII character (6.7 %). Its runs are possessive: nothing follows them, so
#: giving back a character could never make a match, and not trying is twice as fast.
TOKEN_PIECE_PATTERN: Final = r" ?(?:[A-Za-z]++|\d{1,3}+|[^\sA-Za-z\d]++)|\s++"
#: Tokens per piece before any usage is reported (the calibration's prior): a piece of the
#: pre-split is one token of the vocabulary unless it is a rare word.
TOKENS_PER_PIECE: Final = 1.0

# --- compaction: the window ----------------------------------------------------------------

#: MiMo trigger ratio: compact at 90 % of the effective window, leaving 10 % for the next
#: turn's growth and the compaction request, whatever the model's limits.
DEFAULT_TRIGGER_RATIO: Final = 0.9
#: MiMo ``OUTPUT_CAP``: the output reserve never exceeds 20,000; reserving a 128K output limit
#: in full would cut a 200K window's trigger from 180K to 72K.
OUTPUT_RESERVE_CAP: Final = 20_000
#: The output the ``default`` strategy's window keeps free for an answer (MiMo reserves the
#: model's output limit, up to ``OUTPUT_RESERVE_CAP``): requests ask for no more than the
#: window leaves (``output_cap``), so a smaller reserve only lets the view grow further before
#: the window forces a compaction. 4,096 was chosen on the tuning traces
#: (``claude-code-jsonl``, 32k window, model summaries): among 4,096, 6,144 and MiMo's 8,192
#: it left ``default`` above ``baseline`` on the fewest traces with no over-window call.
ECONOMIC_OUTPUT_RESERVE: Final = 4_096
#: MiMo ``pressureLevel``: levels 1, 2, 3 start at 50 %, 70 % and 85 % of the usable window.
PRESSURE_PERCENTS: Final = (50, 70, 85)

# --- output --------------------------------------------------------------------------------

#: opencode / Kilo ``OUTPUT_TOKEN_MAX``: the default cap on requested output. Nearly every
#: answer and tool call fits in 32K, and it bounds how much of the window an output
#: reservation takes from a model that advertises 64K or 128K of output.
OUTPUT_TOKEN_MAX: Final = 32_000
#: Kilo ``SAFETY``: tokens kept free between the estimated prompt and the capped output, for
#: the estimate's error.
OUTPUT_SAFETY: Final = 2_048
#: Kilo ``MEDIA_OUTPUT_RESERVE``: what each attached media item is assumed to cost when capping
#: output; the client cannot tokenize an image (Anthropic bills 1000x1000 px at ~1,334).
MEDIA_OUTPUT_RESERVE: Final = 2_048
#: Kilo ``MIN_OUTPUT`` and MiMo's completion floor: below 1,024 tokens a model cannot finish
#: a useful answer or tool call, so a cap never goes lower.
MIN_OUTPUT: Final = 1_024
#: MiMo ``completionBudget`` margin between prompt and completion (the #2356 failure:
#: 131,072 - 99,509 - 1,024 = 30,539).
COMPLETION_MARGIN: Final = 1_024

# --- compaction: the summary -----------------------------------------------------------------

#: The most tokens an extractive summary holds: past it, its oldest bullets are left out
#: (those carried from the previous summary first). Claude Code's own compaction summaries in
#: the tuning traces (``claude-code-jsonl``: four, of heads of 100,000 tokens and more) hold
#: 2,249 to 3,331 tokens (4 characters a token); carrying 40 bullets a section let a summary
#: grow past 8,000 tokens after a few compactions. On the four long tuning traces (200k
#: window, Anthropic prices, summaries priced as model calls) ``default`` cost 37.0 USD with
#: no limit, 33.0 at 4,096, 27.5 at 3,072 and 24.9 at 2,048, and the facts it retained fell
#: from 93-98 % to 92-97 %, 65-86 % and 52-85 %: 4,096 is the shortest that keeps them (in
#: the retention benchmark's economic cadence, at 32k, the tuning traces move by at most 1.3
#: points; the window cadence loses 11 and 24 points on two of them).
SUMMARY_MAX_TOKENS: Final = 4_096

# --- view ----------------------------------------------------------------------------------

#: pi and opencode: a tool result in a summary's input is cut to 2,000 characters; the
#: summary needs what a tool did, not everything it printed.
SUMMARY_TOOL_OUTPUT_CHARS: Final = 2_000

# --- tool_output ---------------------------------------------------------------------------

#: Lines of one tool result shown to the model. opencode's ``Truncate.MAX_LINES`` (also pi's
#: and Claude Code's Read default): a whole source file of ordinary size fits in one view.
TOOL_OUTPUT_MAX_LINES: Final = 2000
#: Bytes of one tool result shown to the model: opencode's ``Truncate.MAX_BYTES`` (50 KiB,
#: about 12,800 tokens at 4 bytes a token), which keeps one result well under any context.
TOOL_OUTPUT_MAX_BYTES: Final = 50 * 1024

# --- prune ---------------------------------------------------------------------------------

#: opencode ``PRUNE_PROTECT``: the newest 40,000 tokens of tool output are never cleared: the
#: current work still reads them.
PRUNE_PROTECT_TOKENS: Final = 40_000
#: opencode ``PRUNE_MINIMUM``: prune only when it frees more than 20,000 tokens, or the cache
#: miss it causes costs more than it saves.
PRUNE_MINIMUM_TOKENS: Final = 20_000
#: opencode ``PRUNE_PROTECTED_TOOLS``: skill output is standing instructions, not data.
PRUNE_PROTECTED_TOOLS: Final = ("skill",)
#: MiMo ``SOFT_TRIM_KEEP_HEAD/TAIL``: a soft trim keeps the first and the last 1,536
#: characters of an output, where what ran and how it ended usually are.
SOFT_TRIM_KEEP_CHARS: Final = 1_536
#: The ``batch`` prune (``default``'s): between compactions, old tool outputs are soft-trimmed
#: in batches, one cache break each, keeping the conversation and the outputs' ends. Its
#: figures were chosen on the tuning traces (``claude-code-jsonl``: both windows, Anthropic
#: and OpenAI prices, summaries priced as model calls): with 0.8 / 0.6 / 512 ``default`` was
#: above ``baseline`` in 3 of the 28 cases and dominated in none; with 0.7 / 0.6 / 512 and
#: 0.7 / 0.6 / 1,024 above in 1 (by 0.02 %) and dominated in 1, 2-3 % cheaper at 32k; 1,024
#: retained the most (93.9 % against 92.9 % at 32k on Anthropic prices). The ``cost`` mode it
#: replaced was above in 2 and dominated in none there, at 39.5 / 3.81 USD at 32k (Anthropic /
#: OpenAI) against 41.1 / 3.69: on Anthropic, whose cache is read only near the request's
#: breakpoints, a trim writes the whole prompt again and rarely saves a compaction at 32k.
#:
#: The newest tool output never trimmed, as a share of the usable window (at most
#: ``PRUNE_PROTECT_TOKENS``): what the current work still reads.
BATCH_PROTECT_SHARE: Final = 0.25
#: The share of the compaction limit at which the next prompt has every old output trimmed
#: whether or not the trim pays, so that a step rarely carries the prompt past the limit
#: before a trim could keep it under ...
BATCH_PRESSURE_SHARE: Final = 0.7
#: ... provided the trim brings it down to this share; one that frees less is left to the
#: compaction, which would otherwise follow soon and write the trimmed prompt again.
BATCH_RELIEF_SHARE: Final = 0.6
#: An old output is trimmed to its first and last this many characters (a quarter of
#: MiMo's soft trim, ``SOFT_TRIM_KEEP_CHARS``): what ran and how it ended.
BATCH_TRIM_KEEP_CHARS: Final = 1_024
#: MiMo ``stripNonEssential``: media and reasoning older than the last 3 turns are stripped
#: under pressure (level 2).
STRIP_PROTECTED_TURNS: Final = 3
