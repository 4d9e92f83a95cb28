"""``mask_secrets``: the one function that masks secrets in text, for log lines and for every
stored text that comes from an exception."""

from __future__ import annotations

import pytest

from contextledger.logging import REDACTED, mask_secrets

# Each: a text holding a secret, and the text as it is stored or logged.
SECRETS = [
    ("OpenAI key sk-proj-abc123DEF456ghi789", f"OpenAI key {REDACTED}"),
    ("anthropic: sk-ant-api03-Xy9_Zz0-Qq1Ww2", f"anthropic: {REDACTED}"),
    ("Authorization: Bearer eyJhbGciOi.e30.sig", f"Authorization: Bearer {REDACTED}"),
    ("x-api-key: 1234abcd", f"x-api-key: {REDACTED}"),
    ('{"x-api-key": "opaque-value"}', f'{{"x-api-key": "{REDACTED}"}}'),
    ("X-Goog-Api-Key=AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv", f"X-Goog-Api-Key={REDACTED}"),
    ("in AKIAIOSFODNN7EXAMPLE's policy", f"in {REDACTED}'s policy"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"aws_secret_access_key = {REDACTED}",
    ),
    ("GET /v1?key=0123456789abcdef0123456789abcdef&alt=json", f"GET /v1?key={REDACTED}&alt=json"),
    ("token=dGhpcyBpcyBhIHNlY3JldCB0b2tlbg==", f"token={REDACTED}"),
    ("{'access_token': 'ya29.short'}", f"{{'access_token': '{REDACTED}'}}"),
    ("password: hunter2", f"password: {REDACTED}"),
    ("pushed with ghp_0123456789abcdefghijABCDEFGHIJ0123", f"pushed with {REDACTED}"),
]

# Each: a text with nothing secret in it, left as it is.
HARMLESS = [
    "the bearer of bad news",
    "KeyError: key=part_id",
    "max_tokens=4096, input_tokens: 12",
    "sort_key=created_at",
    "token=abc",
    "task-12345678 stays",
    "monkey=1234567890123456789",
]


@pytest.mark.parametrize(("text", "masked"), SECRETS)
def test_secrets_are_masked(text: str, masked: str) -> None:
    assert mask_secrets(text) == masked


@pytest.mark.parametrize("text", HARMLESS)
def test_text_without_secrets_is_left_as_it_is(text: str) -> None:
    assert mask_secrets(text) == text


def test_masking_twice_changes_nothing_more() -> None:
    once = mask_secrets(" ".join(text for text, _ in SECRETS))
    assert mask_secrets(once) == once
    assert "hunter2" not in once and "wJalrXUtnFEMI" not in once
