"""``pooler call UNIT COMMAND``: tool_run from the shell, against the real reference store."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import Store, answer_of, pooler, start_store

from pooler.exits import ExitStatus
from pooler.run.lock import OutLock, lock_dir


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One store for the refusals: none of them may reach it, so they cannot disturb each other."""
    s = start_store(tmp_path_factory.mktemp("refusals"))
    yield s
    s.stop()


def call(store: Store, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return pooler("call", *args, "--store", store.url, "--out", str(tmp_path / "out"),
                  env={"POOLER_TOKEN": store.token}, cwd=tmp_path)


def test_answer_has_the_seed_shape_and_the_table_file(store: Store, tmp_path: Path) -> None:
    proc = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdTable", "--params", '{"rows": 5, "width": 4}',
                "--json")
    assert proc.returncode == 0, proc.stderr
    answer = answer_of(proc)
    assert list(answer) == ["result", "message", "detail", "tables", "files", "time"]
    assert answer["result"] is True
    table = answer["tables"]["rows"]
    path = tmp_path / "out" / "tables" / "MELBIS_AGENT_TEST.CmdTable.rows.jsonl"
    assert table["file"] == str(path)
    assert table["rows"] == 5
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"n": n, "text": "abcd"} for n in range(1, 6)]
    assert table["head"] == lines[:3]
    assert {"server", "module", "trip"} <= set(answer["time"])
    assert proc.stderr == ""


def test_into_appends_to_the_job_file(store: Store, tmp_path: Path) -> None:
    for expected in (2, 4):
        answer = answer_of(call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdTable", "--params", '{"rows": 2}',
                                "--into", "nightly", "--json"))
        assert answer["tables"]["rows"]["job"] == str(tmp_path / "out" / "nightly.rows.jsonl")
        assert answer["tables"]["rows"]["job_rows"] == expected
    assert len((tmp_path / "out" / "nightly.rows.jsonl").read_text().splitlines()) == 4


def test_params_source_and_debug(store: Store, tmp_path: Path) -> None:
    (tmp_path / "fields.json").write_text('{"skey": "GBP", "name": "Pound"}')
    answer = answer_of(call(store, tmp_path, "MELBIS_AGENT_CURRENCY", "CmdAdd", "--params-source",
                            "fields.json", "--debug", "--json"))
    assert answer["result"] is True
    assert isinstance(answer["detail"]["id"], int)
    assert {"sql", "sql_ms"} <= set(answer["time"])
    assert store.ops()[0]["params"]["name"] == "Pound"


def test_a_refusal_of_the_store_exits_1_with_its_message(store: Store, tmp_path: Path) -> None:
    proc = call(store, tmp_path, "MELBIS_AGENT_CURRENCY", "CmdNope", "--json")
    assert proc.returncode == 1
    answer = answer_of(proc)
    assert answer["result"] is False
    assert answer["message"].startswith("Unknown command [CmdNope]. The tool has: CmdList, CmdAdd")
    human = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdFail")
    assert human.returncode == 1
    assert human.stdout.startswith("refused: ")


def test_a_crash_is_a_refusal_as_text(store: Store, tmp_path: Path) -> None:
    proc = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdCrash", "--json")
    assert proc.returncode == 1
    assert answer_of(proc)["message"].startswith("MELBIS_AGENT_TEST\\CmdCrash failed: ")


@pytest.mark.parametrize(("args", "text"), [
    (["--params", "[1, 2]"],
     'pooler: params is an object of fields - write it as {"field": value, ...}, not as a list.'),
    (["--params", "{}", "--params-source", "p.json"],
     ("pooler: params or params_source, not both - write the fields in params or in the file "
      "params_source names, and drop the other.")),
    (["--files", "[]", "--files-source", "f.json"],
     ("pooler: files or files_source, not both - list the attachments in files or in the file "
      "files_source names, and drop the other.")),
    (["--into", "a.b"],
     ("pooler: into is the bare name of a job - 'a.b' holds a dot; write one word with no path and no "
      "dots, like photos.")),
    (["--into", "../up"],
     ("pooler: into is the bare name of a job - '../up' holds a path; write one word with no path and no "
      "dots, like photos.")),
    (["--files", '[{"entity": "store", "elem_id": 1}]'],
     "pooler: Every entry needs file - a path on this machine. Entry 1 of files has none."),
    (["--files", '{"file": "x"}'],
     ('pooler: files is a list of entries - write it as [{"file": "photos/1.jpg", "entity": "store", '
      '"elem_id": 1532}, ...], not as an object.')),
    (["--params", "{oops"],
     ("pooler: --params is not JSON: Expecting property name enclosed in double quotes at column 2 - "
      "quote it for the shell, e.g. --params '{\"id\": 1}'")),
])
def test_client_side_refusals_exit_2_with_the_seed_text(shared_store: Store, tmp_path: Path,
                                                        args: list[str], text: str) -> None:
    proc = call(shared_store, tmp_path, "MELBIS_AGENT_TEST", "CmdEcho", *args)
    assert proc.returncode == 2
    assert proc.stderr.strip() == text
    assert proc.stdout == ""
    assert shared_store.ops() == []


def test_missing_and_broken_source_files(shared_store: Store, tmp_path: Path) -> None:
    store = shared_store
    proc = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdEcho", "--params-source", "nope.json")
    assert (proc.returncode, proc.stderr.strip()) == (2, f"pooler: No such file: {tmp_path / 'nope.json'}")
    (tmp_path / "cut.json").write_text('{"a": ')
    proc = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdEcho", "--params-source", "cut.json")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"pooler: {tmp_path / 'cut.json'} is not whole json - ")
    (tmp_path / "list.json").write_text("[1]")
    proc = call(store, tmp_path, "MELBIS_AGENT_TEST", "CmdEcho", "--params-source", "list.json")
    assert proc.stderr.strip() == (f"pooler: {tmp_path / 'list.json'} holds no object of fields - it holds a "
                                   'list; write {"field": value, ...}.')
    assert store.ops() == []


def test_an_attachment_reaches_the_store(store: Store, tmp_path: Path) -> None:
    goods = answer_of(call(store, tmp_path, "MELBIS_AGENT_STORE", "CmdAdd", "--params",
                           '{"sku": "P-1", "name": "Pot"}', "--json"))
    (tmp_path / "front.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    (tmp_path / "files.json").write_text(json.dumps(
        [{"file": "front.jpg", "entity": "store", "elem_id": goods["detail"]["id"], "real_name": "Front"}]))
    proc = call(store, tmp_path, "MELBIS_AGENT_IMPORT_FILES", "CmdAdd", "--files-source", "files.json",
                "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    answer = answer_of(proc)
    assert answer["detail"] == {"taken": 1}
    assert answer["files"][0]["real_name"] == "Front"
    assert str(tmp_path) not in json.dumps(store.ops())  # the local path never reaches the store


def test_an_unreachable_store_exits_1(tmp_path: Path) -> None:
    proc = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", "http://127.0.0.1:9")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "pooler: cannot reach the store at http://127.0.0.1:9/: connection refused"


def test_a_call_into_the_out_of_a_running_pool_is_refused_unsent(store: Store, tmp_path: Path) -> None:
    # A run holds the --out lock while it writes its tables; a call would write between them.
    state = {"XDG_STATE_HOME": str(tmp_path / "state")}
    with OutLock(tmp_path / "out", lock_dir(state)):
        proc = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", store.url, "--out",
                      str(tmp_path / "out"), env={"POOLER_TOKEN": store.token, **state}, cwd=tmp_path)
    assert proc.returncode == ExitStatus.LOCKED, proc.stderr
    assert f"another run writes its tables to --out {tmp_path / 'out'} (pid {os.getpid()}, " in proc.stderr
    assert "this call sent nothing - give it an --out of its own, or wait for that run to end." in proc.stderr
    assert store.ops() == []
    # Once the run has ended, the call goes.
    again = pooler("call", "MELBIS_AGENT_TEST", "CmdEcho", "--store", store.url, "--out",
                   str(tmp_path / "out"), env={"POOLER_TOKEN": store.token, **state}, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(store.ops()) == 1
