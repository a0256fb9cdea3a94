"""Attachments: laid out on disk with a row each, checked, refused, cleared away when not taken."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
from helpers import STORE_TOKEN, Store
from storekit import FILES, TEST, add_goods, data_of, files_on_disk, request_of, upload


def test_files_are_laid_out_with_a_row_each(shared: Store) -> None:
    gid = add_goods(shared)
    entries = [
        {"part": "data_1", "entity": "store", "elem_id": gid, "real_name": "Front view", "angle": 30},
        {"part": "data_2", "entity": "store", "elem_id": str(gid), "kind_key": "kGallery"},
    ]
    got = data_of(
        upload(
            shared,
            request_of(entries, "catalog"),
            {"data_1": ("front.JPG", b"\xff\xd8jpeg" * 100), "data_2": ("back.png", b"png")},
        )
    )
    assert got["result"] is True
    assert got["detail"] == {"taken": 2}
    first, second = got["files"]
    assert first["entity"] == "store"
    assert first["elem_id"] == gid
    assert first["kind_key"] == "kBase"
    assert first["real_name"] == "Front view"
    assert first["angle"] == 30  # a field the store does not know travels in the row
    assert first["size"] == 600
    assert first["pos"] == 1
    assert first["file_name"] == f"files_store_1_{first['id']}.jpg"
    assert first["path"].startswith("files/")
    assert first["path"].endswith("/")
    parts = first["path"].split("/")
    assert [len(p) for p in parts[1:4]] == [4, 5, 5]  # YYYY/MM_DD/HH_MM
    assert (second["kind_key"], second["real_name"], second["pos"]) == ("kGallery", "back.png", 1)
    on_disk = shared.root / first["path"] / first["file_name"]
    assert on_disk.read_bytes() == b"\xff\xd8jpeg" * 100
    assert (shared.root / second["path"] / second["file_name"]).read_bytes() == b"png"
    again = data_of(
        upload(
            shared,
            request_of([{"part": "data_1", "entity": "store", "elem_id": gid}]),
            {"data_1": ("more.jpg", b"x")},
        )
    )
    assert again["files"][0]["pos"] == 2  # the next of the element's kBase files
    ops = shared.ops()
    assert ops[-1]["params"]["files"][0]["file_name"] == again["files"][0]["file_name"]
    assert ops[-1]["params"]["profile"] == "catalog"  # the default


def test_files_not_taken_are_cleared_away(shared: Store) -> None:
    gid = add_goods(shared)
    before = files_on_disk(shared)
    entries = [
        {"part": "data_1", "entity": "store", "elem_id": gid},
        {"part": "data_2", "entity": "store", "elem_id": gid},
        {"part": "data_3", "entity": "store", "elem_id": gid},
    ]
    got = data_of(
        upload(
            shared,
            request_of(entries, "images"),
            {"data_1": ("a.jpg", b"1"), "data_2": ("b.txt", b"2"), "data_3": ("c.pdf", b"3")},
        )
    )
    assert got["result"] is True
    assert (
        got["message"] == "1 of 3 files taken (images). The 2 file(s) sent with this call are gone: the "
        "command [CmdAdd] did not take them."
    )
    assert [f["real_name"] for f in got["files"]] == ["a.jpg"]
    assert files_on_disk(shared) - before == {
        shared.root / got["files"][0]["path"] / got["files"][0]["file_name"]
    }


def test_a_refusing_command_takes_no_files(shared: Store) -> None:
    gid = add_goods(shared)
    before = files_on_disk(shared)
    got = data_of(
        upload(
            shared,
            request_of([{"part": "data_1", "entity": "store", "elem_id": gid}], "bogus"),
            {"data_1": ("a.jpg", b"1")},
        )
    )
    assert got["result"] is False
    assert (
        got["message"] == "Unknown profile [bogus] - the profiles: catalog, images. The 1 file(s) sent with "
        "this call are gone: the command [CmdAdd] did not take them."
    )
    assert files_on_disk(shared) == before


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"part": "data_1", "entity": "shop", "elem_id": 1}, "Unknown element entity: shop"),
        (
            {"part": "data_1", "entity": "store", "elem_id": 987654321},
            "Element not found: store id 987654321",
        ),
        (
            {"part": "data_1", "entity": "store", "elem_id": "GID", "kind_key": "kPhoto"},
            "No group [kPhoto] among the files of store - its groups: kBase, kGallery, kDoc.",
        ),
        (
            {"part": "data_1", "elem_id": "GID"},
            "The entry 1 of files needs entity - the table that owns the file: store.",
        ),
        (
            {"part": "data_1", "entity": "store"},
            "The entry 1 of files needs elem_id - the id of the row the file belongs to, a number.",
        ),
        (
            {"entity": "store", "elem_id": "GID"},
            (
                'The entry 1 of files names no part - it needs "part": the name of the request part that '
                "holds the file's bytes."
            ),
        ),
        (
            {"part": "data_9", "entity": "store", "elem_id": "GID"},
            (
                "The entry 1 of files names the part [data_9], and the call carries no such part - nothing "
                "was written."
            ),
        ),
    ],
)
def test_attachment_refusals_write_nothing(shared: Store, entry: dict[str, Any], message: str) -> None:
    gid = add_goods(shared)
    entry = {k: (gid if v == "GID" else v) for k, v in entry.items()}
    before = files_on_disk(shared)
    ops = len(shared.ops())
    got = data_of(upload(shared, request_of([entry]), {"data_1": ("a.jpg", b"bytes")}))
    assert got["result"] is False
    assert got["message"] == message
    assert files_on_disk(shared) == before
    assert len(shared.ops()) == ops


def test_an_entry_that_is_not_an_object_and_two_on_one_part(shared: Store) -> None:
    gid = add_goods(shared)
    got = data_of(upload(shared, request_of(["data_1"]), {"data_1": ("a.jpg", b"1")}))
    assert (
        got["message"]
        == 'The entry 1 of files is not an object - each entry is {"part": "data_1", "entity": '
        '"store", "elem_id": <id>}.'
    )
    two = [
        {"part": "data_1", "entity": "store", "elem_id": gid},
        {"part": "data_1", "entity": "store", "elem_id": gid},
    ]
    got = data_of(upload(shared, request_of(two), {"data_1": ("a.jpg", b"1")}))
    assert (
        got["message"]
        == "The entries 1 and 2 of files name the same part [data_1] - each file travels in its "
        "own part."
    )


def test_a_missing_second_part_leaves_the_first_unwritten(shared: Store) -> None:
    gid = add_goods(shared)
    before = files_on_disk(shared)
    entries = [
        {"part": "data_1", "entity": "store", "elem_id": gid},
        {"part": "data_2", "entity": "store", "elem_id": gid},
    ]
    got = data_of(upload(shared, request_of(entries), {"data_1": ("a.jpg", b"1")}))
    assert (
        got["message"] == "The entry 2 of files names the part [data_2], and the call carries no such part - "
        "nothing was written."
    )
    assert files_on_disk(shared) == before


def test_files_sent_to_a_command_that_takes_none(shared: Store) -> None:
    gid = add_goods(shared)
    got = data_of(
        upload(
            shared,
            request_of([{"part": "data_1", "entity": "store", "elem_id": gid}], unit=TEST, command="CmdEcho"),
            {"data_1": ("a.jpg", b"1")},
        )
    )
    assert (
        got["message"] == "The command [CmdEcho] takes no files - send the call without attachments, or to a "
        "command with a files field."
    )


def test_a_command_that_carries_files_gets_none(shared: Store) -> None:
    message = (
        "The command [CmdAdd] carries the files themselves - attach them to the call, one entry of files "
        "for each."
    )
    got = data_of(shared.call(FILES, "CmdAdd", {}, files=[]))
    assert got["message"] == message
    resp = shared.call(FILES, "CmdAdd", {"profile": "catalog"})
    assert resp.json()["data"]["message"] == message
    resp = shared.call(FILES, "CmdAdd", {"files": [{"part": "data_1"}]})
    assert (
        resp.json()["data"]["message"]
        == "The field [files] of the command [CmdAdd] takes files: send them as "
        "attachments of the call, not in params."
    )


def test_a_file_part_before_the_request_part(shared: Store) -> None:
    gid = add_goods(shared)
    body = {
        "unit": FILES,
        "command": "CmdAdd",
        "files": [{"part": "data_1", "entity": "store", "elem_id": gid}],
    }
    resp = requests.post(
        f"{shared.url}/tool_run",
        timeout=10,
        headers={"Authorization": f"Bearer {STORE_TOKEN}"},
        files=[("data_1", ("early.jpg", b"early")), ("request", (None, json.dumps(body)))],
    )
    got = data_of(resp)
    assert got["result"] is True
    assert (shared.root / got["files"][0]["path"] / got["files"][0]["file_name"]).read_bytes() == b"early"


def test_files_stay_when_the_module_is_missing_or_crashes(typed: Store) -> None:
    gid = add_goods(typed)
    entry = [{"part": "data_1", "entity": "store", "elem_id": gid}]
    resp = upload(
        typed,
        {"unit": "ACME_WIDGETS", "command": "CmdAdd", "params": {"name": "w"}, "files": entry},
        {"data_1": ("w.jpg", b"widget")},
    )
    assert resp.status_code == 500
    assert resp.text == "Module not found! [units/acme_widgets.php]"
    resp = upload(
        typed, {"unit": TEST, "command": "CmdCrash", "files": entry}, {"data_1": ("c.jpg", b"crashed")}
    )
    assert resp.status_code == 500
    assert resp.text == "MELBIS_AGENT_TEST\\CmdCrash failed: CmdCrash broke off, as it always does"
    contents = {p.read_bytes() for p in files_on_disk(typed)}
    assert {b"widget", b"crashed"} <= contents


def test_several_files_over_the_limit_are_refused_one_passes(store_factory: Any) -> None:
    store = store_factory("--max-file-kb", "1")
    gid = add_goods(store)
    two = [
        {"part": "data_1", "entity": "store", "elem_id": gid},
        {"part": "data_2", "entity": "store", "elem_id": gid},
    ]
    got = data_of(
        upload(store, request_of(two), {"data_1": ("a.jpg", b"a" * 600), "data_2": ("b.jpg", b"b" * 600)})
    )
    assert got["result"] is False
    assert (
        got["message"] == "These files come to more than 1 KB together - if the command takes every file "
        "separately, send them in smaller batches; otherwise raise --max-file-kb."
    )
    assert files_on_disk(store) == set()
    one = data_of(upload(store, request_of(two[:1]), {"data_1": ("big.jpg", b"z" * 5000)}))
    assert one["result"] is True
    assert one["files"][0]["size"] == 5000
    under = data_of(
        upload(store, request_of(two), {"data_1": ("a.jpg", b"a" * 500), "data_2": ("b.jpg", b"b" * 500)})
    )
    assert under["detail"] == {"taken": 2}
