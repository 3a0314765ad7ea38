"""Hostile imports (issue 18, finding 5): a file of junk is refused in bounded memory, listing its
first 1,000 problems and counting them all, whatever its size; the streaming reader accepts and
refuses exactly what reading the whole file did; an import in parts still checks duplicates and
relation targets across the whole import.

The peak memory of an import is measured in a process of its own (``ru_maxrss`` of that process
and of the import's workers). MEMBRANE_SECURITY_FULL=1 adds the 200 MB file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from membrane_engine import Membrane
from membrane_engine.transfer import import_writer
from membrane_engine.transfer import json_items
from membrane_engine.errors import AlreadyExistsError, ValidationError
from membrane_engine.transfer.imports import MAX_PROBLEMS, parse_text

from tests.support.security import FULL, T0, dump, forget, simple

MB = 1024 * 1024
PEAK_LIMIT_MB = 1024

_MEASURE = """
import json, resource, sys
from pathlib import Path
from membrane_engine import Membrane
from membrane_engine.errors import ValidationError

if __name__ == "__main__":
    m = Membrane.open(sys.argv[1], load_sample=False)
    out = {}
    try:
        out["imported"] = m.import_file(Path(sys.argv[2]), workers=int(sys.argv[3]))
    except ValidationError as exc:
        out.update(listed=len(exc.problems), total=exc.total, first=exc.problems[:2], message=str(exc)[-300:])
    # VmHWM is this process's own high-water mark since its exec. ru_maxrss is not: Linux carries
    # it over exec from the process that started it (a large pytest process, through vfork), and
    # the workers inherit this small process's at their start, so theirs is theirs.
    own = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out.update(peak_mb=max(own, workers) / 1024, records=m.count())
    print(json.dumps(out))
"""


def _import_measured(tmp_path: Path, path: Path, workers: int = 1) -> dict[str, Any]:
    script = tmp_path / "measure.py"
    script.write_text(_MEASURE)
    done = subprocess.run([sys.executable, str(script), f"sqlite:///{tmp_path / 'measured.db'}", str(path), str(workers)],
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _empty_objects(path: Path, size: int) -> int:
    """``size`` bytes of ``{}`` records (the issue's 20 MB file); returns how many."""
    if path.suffix == ".jsonl":
        n = size // 3
        path.write_bytes(b"{}\n" * n)
    else:
        n = (size - 1) // 3
        path.write_bytes(b"[" + b",".join([b"{}"] * n) + b"]")
    return n


@pytest.mark.parametrize("name, size, workers", [("empty.json", 20 * MB, 1), ("empty.jsonl", 5 * MB, 1),
                                                 ("empty-on-workers.jsonl", 5 * MB, 2)])
def test_a_file_of_empty_objects_is_refused_in_bounded_memory(tmp_path: Path, name: str, size: int, workers: int):
    """Each ``{}`` lacks id, type, sensitivity and payload: 4 problems a record. The old import
    kept every one, gigabytes for 20 MB (bench/README.md)."""
    n = _empty_objects(tmp_path / name, size)
    out = _import_measured(tmp_path, tmp_path / name, workers)
    assert out["records"] == 0 and "imported" not in out
    assert out["listed"] == MAX_PROBLEMS and out["total"] == 4 * n
    assert out["first"] == [["record 0: id", "Field required"], ["record 0: type", "Field required"]]
    assert f"({4 * n} problems in all)" in out["message"]
    assert out["peak_mb"] < PEAK_LIMIT_MB, out


def _junk_200mb(path: Path) -> int:
    """200 MB of three kinds of junk, interleaved: empty objects, objects with nothing but a
    fresh id (so the import cannot keep every id it meets), and full-size records that fail on
    one field. Returns how many items."""
    bad = simple("x", confidence=7)
    bad["payload"]["subject"] = "s" * 1200
    n, written = 0, 0
    with path.open("w", encoding="utf-8") as f:
        f.write("[")
        while written < 200 * MB:
            bad["id"] = f"bad-{n}"
            block = ",".join(["{}"] * 2000 + [json.dumps({"id": f"junk-{n + i}"}) for i in range(500)]
                             + [json.dumps(bad)])
            f.write(("," if n else "") + block)
            written += len(block) + 1
            n += 2501
        f.write("]")
    return n


@pytest.mark.skipif(not FULL, reason="the 200 MB file runs with MEMBRANE_SECURITY_FULL=1")
def test_a_200_mb_file_of_junk_is_refused_under_1_gb(tmp_path: Path):
    n = _junk_200mb(tmp_path / "junk.json")
    assert (tmp_path / "junk.json").stat().st_size >= 200 * MB
    out = _import_measured(tmp_path, tmp_path / "junk.json")
    print(f"\n200 MB of junk ({n} items): peak {out['peak_mb']:.0f} MB, {out['total']} problems")
    assert out["records"] == 0 and out["listed"] == MAX_PROBLEMS and out["total"] >= 4 * 2000
    assert out["peak_mb"] < PEAK_LIMIT_MB, out


# ---------------------------------------------------------------- the problem list


@pytest.fixture
def m(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    membrane = Membrane.open(url, load_sample=False, clock=lambda: T0)
    yield membrane
    membrane.close()
    forget(url)


def test_the_first_1000_problems_are_listed_and_all_counted(m: Membrane):
    with pytest.raises(ValidationError) as info:
        m.import_records([{}] * 3000)
    exc = info.value
    assert len(exc.problems) == MAX_PROBLEMS and exc.total == 12_000
    assert exc.problems[-1][0] == "record 249: payload"  # the first ones, in record order
    assert "(12000 problems in all)" in str(exc) and len(str(exc)) < 20_000
    assert m.count() == 0


def test_a_relation_problem_found_last_is_listed_in_record_order(m: Membrane):
    """Relation targets are known to be missing only at the end of the import; the record
    they belong to may come before a thousand other problems."""
    dangling = simple("d0", relations=[{"predicate": "about", "target_id": "ghost"}])
    with pytest.raises(ValidationError) as info:
        m.import_records([dangling] + [{}] * 2999)
    exc = info.value
    assert exc.problems[0] == ("record 0: relations.0.target_id",
                               "target 'ghost' is neither in the store nor in this import")
    assert exc.problems[1][0] == "record 1: id" and len(exc.problems) == MAX_PROBLEMS
    assert exc.total == 1 + 4 * 2999


def test_repeated_junk_is_reported_per_record(m: Membrane, tmp_path: Path):
    """Short items that failed are recognised by their text: their problems are still
    reported under each record's own number, and a different item is validated afresh."""
    path = tmp_path / "mixed.json"
    items = [{}, {"id": "a"}, {}, simple("ok-1"), {"id": "a"}, 5, 5]
    path.write_text(json.dumps(items))
    with pytest.raises(ValidationError) as info:
        m.import_file(path)
    by_record = {}
    for loc, msg in info.value.problems:
        by_record.setdefault(loc.split(":")[0], []).append(loc.split(": ", 1)[-1])
    assert by_record == {
        "record 0": ["id", "type", "sensitivity", "payload"],
        "record 1": ["type", "sensitivity", "payload"],
        "record 2": ["id", "type", "sensitivity", "payload"],
        "record 4": ["type", "sensitivity", "payload"],
        "record 5": ["record"], "record 6": ["record"],  # "record 5: record": not an object
    }


# ---------------------------------------------------------------- an import in parts is one import


def _records(n: int, prefix: str = "r") -> list[dict[str, Any]]:
    return [simple(f"{prefix}{i}") for i in range(n)]


def test_relations_and_duplicates_are_checked_across_parts(m: Membrane, tmp_path: Path):
    n = 2 * import_writer.PART_ITEMS + 500
    docs = _records(n)
    docs[0]["relations"] = [{"predicate": "about", "target_id": f"r{n - 1}"}]  # a target in a later part
    path = tmp_path / "forward.json"
    path.write_text(json.dumps(docs))
    assert m.import_file(path) == n
    assert [r.target_id for r in m.get("r0").relations] == [f"r{n - 1}"]
    again = _records(n, "s")
    again[n - 1]["id"] = "s3"  # a duplicate in another part
    before = dump(m)
    with pytest.raises(ValidationError) as info:
        m.import_records(iter(again))  # any iterable, read as it goes
    assert info.value.problems == [(f"record {n - 1}: id", "duplicate id 's3' (also record 3)")]
    assert dump(m) == before


def test_an_import_larger_than_the_buffer_is_all_or_nothing(m: Membrane, monkeypatch):
    """Past BUFFER_RECORDS the import writes as it goes, inside its transaction: a problem
    after that rolls everything back; an id already in the store too."""
    monkeypatch.setattr(import_writer, "BUFFER_RECORDS", 100)
    monkeypatch.setattr(import_writer, "PART_ITEMS", 50)
    docs = _records(400)
    docs[350]["confidence"] = 3
    before = dump(m)
    with pytest.raises(ValidationError, match="record 350: confidence"):
        m.import_records(docs)
    assert dump(m) == before
    m.import_records([simple("r390")])
    docs[350]["confidence"] = 0.5
    with pytest.raises(AlreadyExistsError, match="r390"):
        m.import_records(docs)
    docs[390]["id"] = "r390-renamed"
    assert m.import_records(docs) == 400 and m.count() == 401


def test_a_refused_small_import_never_takes_the_write_lock(m: Membrane, monkeypatch):
    opened = []
    real = m.store.bulk_write
    monkeypatch.setattr(m.store, "bulk_write", lambda rows: opened.append(rows) or real(rows))
    with pytest.raises(ValidationError):
        m.import_records(_records(500) + [{}] + _records(500, "t"))
    assert opened == []
    assert m.import_records(_records(10)) == 10 and opened == [10]


def test_the_buffer_counts_what_records_hold_not_only_their_documents(m: Membrane, monkeypatch):
    """A record's stored document leaves its audit log out, and the log may be most of the
    record: the records held before the transaction opens are counted by their audit texts too
    (``import_writer.held_bytes``), so a few hundred such records do not wait in memory as if
    they were small."""
    monkeypatch.setattr(import_writer, "BUFFER_BYTES", 1 << 20)
    monkeypatch.setattr(import_writer, "PART_ITEMS", 10)
    entry = {"action": "create", "actor": "alice", "timestamp": "2026-01-01T00:00:00Z", "rationale": "x" * 3000}
    docs = [simple(f"r{i}", audit_log=[entry] * 20) for i in range(40)]  # 60 KB of audit text each
    opened = []
    real = m.store.bulk_write
    monkeypatch.setattr(m.store, "bulk_write", lambda rows: opened.append(rows) or real(rows))
    parts = []
    real_add = import_writer.ImportWriter.add
    monkeypatch.setattr(import_writer.ImportWriter, "add",
                        lambda self, part: (parts.append(len(opened)), real_add(self, part))[1])
    assert m.import_records(docs) == 40
    # Open after the second part of ten (1.2 MB of audit text), not once all 40 were read.
    assert parts == [0, 0, 1, 1] and len(opened) == 1
    assert m.verify_audit() == []


def test_progress_reaches_the_number_of_records(m: Membrane, tmp_path: Path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_records(4500)))
    seen: list[tuple[int, int]] = []
    assert m.import_file(path, progress=lambda done, total: seen.append((done, total))) == 4500
    assert seen[-1] == (4500, 4500) and [d for d, _ in seen] == sorted(d for d, _ in seen)


# ---------------------------------------------------------------- reading a file in pieces


TEXTS = [
    json.dumps([simple("a"), simple("b\u00e9\U0001f600", tags=["x y", "\u2028"])], indent=2),
    "[ ]", "  [\n]\n", json.dumps(simple("only")), "[1, 2.5e3, -0, true, null, \"s\"]",
    json.dumps([{"n": 12345678901234567890123}, {"s": "\\\"\ud800"}]),
    # refusals
    "", "   ", "[", "[1,", "[1 2]", "[1,]", "[1] x", "[{\"a\": 1} {}]", "{\"a\": tru}", "[NaN]", "[1, -Infinity]",
    "42", "\"text\"", "null", "[{\"a\": \"\n\"}]", "[\n\n  {\"a\": 1},\n  {\"b\": }\n]", "[\"\\uZZZZ\"]",
    "[" * 50_000 + "]" * 50_000,
]


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 20])
def test_the_streaming_reader_reads_what_the_whole_file_reader_read(tmp_path: Path, monkeypatch, block: int):
    """Every text as the old reader (``parse_text``, the whole file at once) took it: the same
    records, or the same refusal with the same line and column, whatever the block size."""
    monkeypatch.setattr(json_items, "BLOCK", block)
    for k, text in enumerate(TEXTS):
        path = tmp_path / f"t{k}.json"
        path.write_text(text, encoding="utf-8")
        try:
            expected: Any = parse_text(text, name=path.name)
        except ValidationError as exc:
            expected = ("refused", str(exc))
        try:
            got: Any = [value for value, _, _ in json_items.FileItems(path)]
        except ValidationError as exc:
            got = ("refused", str(exc))
        assert got == expected, f"text {k} ({text[:40]!r}) with blocks of {block}"


def test_a_file_that_is_not_utf8_is_named_with_its_byte_offset(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(json_items, "BLOCK", 4)
    path = tmp_path / "latin.json"
    path.write_bytes(b'[{"id": "caf\xe9"}]')
    with pytest.raises(ValidationError, match=r"latin.json: not UTF-8 text \(byte 0xe9 at offset 12\)"):
        list(json_items.FileItems(path))
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps([simple("b1")]).encode())
    assert [v["id"] for v, _, _ in json_items.FileItems(bom)] == ["b1"]  # as the console's upload reads it


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_an_item_longer_than_the_limit_is_refused_without_holding_it(tmp_path: Path, monkeypatch, suffix: str):
    monkeypatch.setattr(json_items, "MAX_ITEM_CHARS", 10_000)
    monkeypatch.setattr(json_items, "BLOCK", 1000)
    path = tmp_path / f"long{suffix}"
    long = json.dumps(simple("long", tags=["t" * 50_000]))
    text = f"[{json.dumps(simple('short'))},\n{long}]" if suffix == ".json" else f"{json.dumps(simple('short'))}\n{long}\n"
    path.write_text(text)
    with pytest.raises(ValidationError) as info:
        list(json_items.FileItems(path))
    assert "line 2" in str(info.value) and "10000" in str(info.value)
