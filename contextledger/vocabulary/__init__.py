"""The shared vocabulary: the types and defaults every layer above speaks.

A leaf package: it imports nothing of contextledger but ``contextledger.events``.

- ``messages``: the provider-neutral messages a model view is made of (``ModelMessage``).
- ``requests``: the provider-neutral request (``Request``) and its cache marks.
"""
