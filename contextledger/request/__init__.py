"""Request assembly: system segments, per-turn context, instructions, prefix snapshots, cache
breakpoints and the builder that turns a history into a provider-neutral ``Request`` (the
request types themselves are vocabulary: ``contextledger.vocabulary.requests``)."""
