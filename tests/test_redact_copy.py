"""Masking copies only what changes, and ``--json`` streams the one document it prints."""

from __future__ import annotations

import io
import json
from typing import Any

from pooler.cli.commands.common import Context
from pooler.redact import Redactor

ANSWER: dict[str, Any] = {
    "result": True, "message": "ok", "steps": [
        {"num": 1, "detail": {"id": 12, "row": {"sku": "A-1", "tags": ["x", "y"]}}, "tables": {}},
        {"num": 2, "detail": None, "time": {"trip": 8}},
    ],
}


def test_a_value_without_secrets_comes_back_as_the_same_object() -> None:
    redactor = Redactor(["hush-hush"])
    assert redactor.value(ANSWER) is ANSWER
    assert redactor.value(ANSWER["steps"]) is ANSWER["steps"]
    text = "nothing secret"
    assert redactor.value(text) is text
    # No secrets at all: nothing is walked.
    assert Redactor().value(ANSWER) is ANSWER


def test_a_values_json_text_tells_whether_it_may_hold_a_secret_and_any_other_secret_sends_it_the_slow_way(
        ) -> None:
    row = {"name": "Grüße hush-hush", "n": 5}
    for text in (json.dumps(row), json.dumps(row, ensure_ascii=False)):
        assert Redactor(["hush-hush"]).in_json_text(text)
        assert not Redactor(["other"]).in_json_text(text)
        assert not Redactor().in_json_text(text)
        # A secret JSON writes otherwise than as itself (not ASCII, or with a quote) is not looked
        # for in the text: the value is looked at whole.
        assert Redactor(["other", "Grüße"]).in_json_text(text)
        assert Redactor(['say "x"']).in_json_text(text)
    assert Redactor(["Grüße"]).value(row) == {"name": "*** hush-hush", "n": 5}


def test_a_secret_gives_a_masked_copy_sharing_what_did_not_change() -> None:
    redactor = Redactor(["hush-hush"])
    value = {"a": {"keep": [1, 2]}, "b": ["x", "key hush-hush", {"hush-hush": "y"}], "c": 3}
    masked = redactor.value(value)
    assert masked == {"a": {"keep": [1, 2]}, "b": ["x", "key ***", {"***": "y"}], "c": 3}
    # The original is untouched, and the parts with no secret in them are shared, not copied.
    assert value["b"] == ["x", "key hush-hush", {"hush-hush": "y"}]
    assert masked is not value
    assert masked["b"] is not value["b"]
    assert masked["a"] is value["a"]
    assert list(masked) == ["a", "b", "c"]


def test_a_key_that_is_not_text_is_written_as_text() -> None:
    redactor = Redactor(["hush-hush"])
    assert redactor.value({1: "hush-hush", "b": 2}) == {"1": "***", "b": 2}
    assert json.dumps(redactor.value({1: "a", "b": 2})) == '{"1": "a", "b": 2}'


def test_emit_json_writes_the_document_as_json_dumps_would() -> None:
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(out, err, {}, Redactor(["hush-hush"]))
    document = {**ANSWER, "message": "Ünïcode and hush-hush", "list": []}
    ctx.emit_json(document)
    expected = json.dumps({**document, "message": "Ünïcode and ***"}, ensure_ascii=False, indent=2) + "\n"
    assert out.getvalue() == expected
    assert err.getvalue() == ""


def test_secrets_json_writes_otherwise_are_masked_too() -> None:
    # A quote, a backslash and a line break are escaped in JSON text: the quick look cannot see
    # them there, so these values are walked.
    for secret in ('pa"ss', "pa\\ss", "pa\nss"):
        value = {"a": [f"x {secret} y", {"k": secret}], f"key-{secret}": 1}
        assert Redactor([secret]).value(value) == {"a": ["x *** y", {"k": "***"}], "key-***": 1}


def test_a_secret_in_a_number_masks_nothing_and_changes_nothing() -> None:
    value = {"id": 512345, "name": "plain"}
    assert Redactor(["1234"]).value(value) is value


def test_a_value_json_cannot_write_is_walked() -> None:
    value = {"a": ("tok-secret-9", {1, 2}), "b": ["tok-secret-9"]}
    masked = Redactor(["tok-secret-9"]).value(value)
    assert masked["b"] == ["***"]
    assert masked["a"] is value["a"]  # tuples are not JSON lists: left as they are, as before


def test_unicode_secrets_are_found_in_json_text() -> None:
    value = {"name": "Grüße-Ключ-секрет", "list": ["… Ключ-секрет …"]}
    assert Redactor(["Ключ-секрет"]).value(value) == {"name": "Grüße-***", "list": ["… *** …"]}
