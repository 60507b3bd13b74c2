"""The log's masking and formats, line by line (the full-run test is in `test_logs.py`)."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest

from toolrelay.server.logs import Redactor, configure_logging, fields


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """`configure_logging` changes process-wide loggers: put them back for the next test."""
    names = ("", "httpx2", "httpcore2", "uvicorn", "uvicorn.error", "uvicorn.access")
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg.level, list(lg.handlers), lg.propagate) for lg in loggers]
    yield
    for logger, (level, handlers, propagate) in zip(loggers, saved, strict=True):
        logger.setLevel(level)
        logger.handlers[:] = handlers
        logger.propagate = propagate


def test_known_values_and_credential_shapes_are_masked() -> None:
    redact = Redactor(["plainsecret123", None, "abc"])  # too short to mask: "abc"
    text = (
        "key plainsecret123; Authorization: Bearer anything-at-all; "
        "minted tr-AbCdEfGh12345678; openai sk-proj-AbCdEf123456; "
        "postgresql://user:pw0rd@db/x; api_key=hunter22 abc"
    )
    assert redact(text) == (
        "key ***; Authorization: Bearer ***; minted tr-***; openai sk-***; "
        "postgresql://***@db/x; api_key=*** abc"
    )


def test_ordinary_text_is_left_alone() -> None:
    text = "turn completed tokens_in=30 tokens_out=12 total_tokens=42 model=fake-model"
    assert Redactor(["fake-model-key"])(text) == text


def test_json_lines_carry_fields_and_are_masked() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", secrets=["s3cr3t-value"], stream=stream)
    logging.getLogger("toolrelay.test").info(
        "hello %s", "s3cr3t-value", extra=fields(turn="msg_1", tokens_in=3)
    )
    logging.getLogger("toolrelay.test").debug("not at INFO")
    lines = [orjson.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert (line["msg"], line["turn"], line["tokens_in"], line["level"]) == (
        "hello ***",
        "msg_1",
        3,
        "INFO",
    )


def test_pretty_lines_are_one_per_record_with_key_values() -> None:
    stream = io.StringIO()
    configure_logging("DEBUG", "pretty", stream=stream)
    logging.getLogger("toolrelay.turn").warning(
        "turn failed", extra=fields(turn="req_1", tool_calls=2, error="two words")
    )
    [line] = stream.getvalue().splitlines()
    assert line.endswith(
        "WARNING toolrelay.turn: turn failed  turn=req_1 tool_calls=2 error='two words'"
    )


def test_a_secret_json_would_escape_is_masked_before_encoding() -> None:
    stream = io.StringIO()
    secret = 'quote"and\\back'
    configure_logging("INFO", "json", secrets=[secret], stream=stream)
    logging.getLogger("toolrelay.test").info("key %s", secret, extra=fields(header=secret))
    line = orjson.loads(stream.getvalue())
    assert (line["msg"], line["header"]) == ("key ***", "***")


def test_httpx2_request_lines_only_at_debug() -> None:
    configure_logging("INFO", "json", stream=io.StringIO())
    assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    configure_logging("DEBUG", "json", stream=io.StringIO())
    assert logging.getLogger("httpx2").isEnabledFor(logging.DEBUG)
