"""TableWriter: file names, head, into jobs, names kept inside out, owner-only files."""

from __future__ import annotations

import hashlib
import json
import stat
import threading
from pathlib import Path

import pytest

from pooler.errors import InputError
from pooler.run.tables import TableWriter, safe_name

CURRENCY = [
    {"id": "1", "skey": "USD", "name": "Dollar"},
    {"id": "2", "skey": "EUR", "name": "Euro"},
    {"id": "3", "skey": "UAH", "name": "Гривня"},
    {"id": "4", "skey": "PLN", "name": "Złoty"},
]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_names_the_file_and_gives_rows_and_head(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    got = w.write("step3.MELBIS_AGENT_CURRENCY.CmdList", {"currency": CURRENCY})
    path = tmp_path / "tables" / "step3.MELBIS_AGENT_CURRENCY.CmdList.currency.jsonl"
    assert got == {"currency": {
        "rows": 4,
        "file": str(path),
        "head": ['{"id":"1","skey":"USD","name":"Dollar"}', '{"id":"2","skey":"EUR","name":"Euro"}',
                 '{"id":"3","skey":"UAH","name":"Гривня"}'],
    }}
    assert lines(path) == [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in CURRENCY]
    assert w.path_for("step3.MELBIS_AGENT_CURRENCY.CmdList", "currency") == path


def test_a_second_write_overwrites_and_append_adds(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    w.write("step1.U.C", {"t": CURRENCY})
    got = w.write("step1.U.C", {"t": CURRENCY[:1]})
    path = w.path_for("step1.U.C", "t")
    assert got["t"]["rows"] == 1
    assert len(lines(path)) == 1
    more = w.write("step1.U.C", {"t": CURRENCY[1:]}, append=True)
    assert more["t"]["rows"] == 3
    assert more["t"]["head"][0] == '{"id":"2","skey":"EUR","name":"Euro"}'
    assert [json.loads(x)["id"] for x in lines(path)] == ["1", "2", "3", "4"]


def test_head_is_cut_to_300_characters(tmp_path: Path) -> None:
    long_row = {"text": "x" * 1000}
    got = TableWriter(tmp_path).write("p", {"t": [long_row, {"a": 1}]})
    head = got["t"]["head"]
    assert [len(h) for h in head] == [300, 7]
    assert head[0] == '{"text":"' + "x" * 291
    assert len(lines(Path(got["t"]["file"]))[0]) == 1011


def test_empty_tables_and_empty_table(tmp_path: Path) -> None:
    w = TableWriter(tmp_path / "out")
    assert w.write("p", {}) == {}
    assert not (tmp_path / "out").exists()
    got = w.write("p", {"none": []})
    assert got == {"none": {"rows": 0, "file": str(w.path_for("p", "none")), "head": []}}
    assert w.path_for("p", "none").read_bytes() == b""


def test_into_appends_to_the_job_across_writes(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    first = w.write("step1.MELBIS_AGENT_CURRENCY.CmdList", {"currency": CURRENCY[:3]}, into="cur")
    job = tmp_path / "cur.currency.jsonl"
    assert first["currency"]["job"] == str(job)
    assert first["currency"]["job_rows"] == 3
    second = w.write("step2.MELBIS_AGENT_CURRENCY.CmdList", {"currency": CURRENCY[3:]}, into="cur")
    assert second["currency"]["job_rows"] == 4
    assert second["currency"]["rows"] == 1
    assert [json.loads(x)["skey"] for x in lines(job)] == ["USD", "EUR", "UAH", "PLN"]
    # A new writer (a new run) counts what the job already holds.
    third = TableWriter(tmp_path).write("step1.X.Y", {"currency": CURRENCY}, into="cur")
    assert third["currency"]["job_rows"] == 8
    assert len(lines(job)) == 8


def test_two_writers_of_one_job_count_each_others_rows(tmp_path: Path) -> None:
    """The MCP server's tool_run and tool_pool each have a writer; both append to one job."""
    runs, pools = TableWriter(tmp_path), TableWriter(tmp_path)
    job = tmp_path / "cur.currency.jsonl"
    assert runs.write("A.CmdList", {"currency": CURRENCY[:2]}, into="cur")["currency"]["job_rows"] == 2
    assert pools.write("step1.A.CmdList", {"currency": CURRENCY}, into="cur")["currency"]["job_rows"] == 6
    assert runs.write("A.CmdList", {"currency": CURRENCY[:1]}, into="cur")["currency"]["job_rows"] == 7
    assert pools.write("step1.A.CmdList", {"currency": CURRENCY[:1]}, into="cur")["currency"]["job_rows"] == 8
    assert len(lines(job)) == 8
    # A job emptied by hand is counted anew, not from what the writer knew of it.
    job.write_text("", encoding="utf-8")
    assert runs.write("A.CmdList", {"currency": CURRENCY[:1]}, into="cur")["currency"]["job_rows"] == 1


def test_a_job_whose_last_line_was_cut_loses_the_broken_line_before_appending(tmp_path: Path) -> None:
    job = tmp_path / "goods.rows.jsonl"
    job.write_text('{"a":1}\n{"a":', encoding="utf-8")
    got = TableWriter(tmp_path).write("step1.U.C", {"rows": [{"a": 3}]}, into="goods")
    assert got["rows"]["job_rows"] == 2
    assert lines(job) == ['{"a":1}', '{"a":3}']


def test_an_append_left_open_in_the_ledger_is_cut_back_and_a_call_is_appended_once(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    first = w.write("step1.U.C", {"rows": [{"a": 1}]}, into="goods", call="c1")
    assert first["rows"]["job_rows"] == 1
    job = Path(first["rows"]["job"])
    # What a kill halfway through the next call's rows leaves: the ledger opened its append.
    ledger = tmp_path / ".goods.rows.jsonl.calls"
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"at": job.stat().st_size, "call": "c2"}) + "\n")
    with job.open("a", encoding="utf-8") as fh:
        fh.write('{"b":1}\n{"b":2}\n{"b"')
    again = TableWriter(tmp_path)
    got = again.write("step1.U.C", {"rows": [{"b": 1}, {"b": 2}, {"b": 3}]}, into="goods", call="c2")
    assert got["rows"]["job_rows"] == 4
    # The same call once more (sent again, answered from its key): its rows are not added twice.
    assert TableWriter(tmp_path).write("step1.U.C", {"rows": [{"b": 1}, {"b": 2}, {"b": 3}]}, into="goods",
                                       call="c2")["rows"]["job_rows"] == 4
    assert lines(job) == ['{"a":1}', '{"b":1}', '{"b":2}', '{"b":3}']
    assert mode(ledger) == 0o600


def test_parallel_appends_to_one_job_keep_whole_rows(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    rows = [{"n": i, "pad": "y" * 200} for i in range(500)]
    results: list[int] = []
    lock = threading.Lock()

    def work(step: int) -> None:
        got = w.write(f"step{step}.U.C", {"t": rows}, into="job")
        with lock:
            results.append(got["t"]["job_rows"])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [500 * i for i in range(1, 9)]
    held = lines(tmp_path / "job.t.jsonl")
    assert len(held) == 4000
    assert all(json.loads(x)["pad"] == "y" * 200 for x in held)


@pytest.mark.parametrize(("table", "name"), [
    ("../../x", "__.._x"),
    ("a/b", "a_b"),
    ("a\x00b", "a_b"),
    ("..", "_"),
    ("...hidden", "_hidden"),
    ("", "_"),
    ("C:\\win", "C__win"),
    ("ünï code", "ünï_code"),
])
def test_unsafe_table_names_stay_inside_out(tmp_path: Path, table: str, name: str) -> None:
    out = tmp_path / "out"
    w = TableWriter(out)
    got = w.write("../step1.U/../C", {table: [{"a": 1}]}, into="job")
    written = Path(got[table]["file"])
    # A name that had to change carries a short hash of itself: two such names never meet.
    name = f"{name}~{hashlib.sha256(table.encode()).hexdigest()[:10]}"
    prefix = f"__step1.U_.._C~{hashlib.sha256(b'../step1.U/../C').hexdigest()[:10]}"
    assert written.name == f"{prefix}.{name}.jsonl"
    assert written.parent == out / "tables"
    assert Path(got[table]["job"]) == out / f"job.{name}.jsonl"
    everything = {p for p in tmp_path.rglob("*") if p.is_file()}
    assert everything == {written, out / f"job.{name}.jsonl", out / f".job.{name}.jsonl.calls"}


def test_safe_name() -> None:
    assert safe_name("MELBIS_AGENT_CURRENCY.CmdList") == "MELBIS_AGENT_CURRENCY.CmdList"
    assert safe_name("товары") == "товары"
    assert safe_name("/etc/passwd").startswith("_etc_passwd~")
    assert safe_name("a/b") != safe_name("a_b") == "a_b"
    assert safe_name("a/b") != safe_name("a\\b")
    assert len(safe_name("a" * 1000).encode()) == 111
    assert len(safe_name("я" * 1000).encode()) == 111


def test_a_bad_into_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        TableWriter(tmp_path).write("p", {"t": [{}]}, into="../x")
    assert info.value.message == (
        "into is the bare name of a job - '../x' holds a path;"
        " write one word with no path and no dots, like photos."
    )


def test_files_and_folders_are_owner_only(tmp_path: Path) -> None:
    out = tmp_path / "out"
    got = TableWriter(out).write("step1.U.C", {"t": [{"a": 1}]}, into="job")
    assert mode(out) == 0o700
    assert mode(out / "tables") == 0o700
    assert mode(Path(got["t"]["file"])) == 0o600
    assert mode(Path(got["t"]["job"])) == 0o600


def test_a_symlink_in_place_of_a_table_file_is_not_followed(tmp_path: Path) -> None:
    w = TableWriter(tmp_path / "out")
    target = tmp_path / "precious.txt"
    target.write_text("keep me", encoding="utf-8")
    w.write("p", {"t": [{"a": 1}]})
    link = w.path_for("p", "t")
    link.unlink()
    link.symlink_to(target)
    with pytest.raises(InputError, match=r"cannot write .*p\.t\.jsonl"):
        w.write("p", {"t": [{"a": 2}]})
    assert target.read_text(encoding="utf-8") == "keep me"


def test_clear_step_tables_removes_only_step_files(tmp_path: Path) -> None:
    w = TableWriter(tmp_path)
    w.clear_step_tables()  # nothing written yet: nothing to do
    w.write("step1.U.C", {"t": [{"a": 1}]}, into="job")
    w.write("step12.U.C", {"t": [{"a": 1}]})
    w.write("MELBIS_AGENT_CURRENCY.CmdList", {"currency": CURRENCY})
    w.clear_step_tables()
    left = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert left == ["MELBIS_AGENT_CURRENCY.CmdList.currency.jsonl"]
    assert (tmp_path / "job.t.jsonl").exists()


def test_200k_rows_are_written_and_counted(tmp_path: Path) -> None:
    rows = [{"id": str(i), "skey": f"K{i}", "name": "Name"} for i in range(200_000)]
    got = TableWriter(tmp_path).write("step1.U.C", {"big": rows}, into="bulk")
    assert got["big"]["rows"] == 200_000
    assert got["big"]["job_rows"] == 200_000
    with Path(got["big"]["file"]).open("rb") as fh:
        assert sum(1 for _ in fh) == 200_000


def test_a_table_that_is_not_a_list_is_written_as_one_row(tmp_path: Path) -> None:
    got = TableWriter(tmp_path).write("p", {"one": {"id": 1}})  # type: ignore[dict-item]
    assert got["one"]["rows"] == 1
    assert got["one"]["head"] == ['{"id":1}']
