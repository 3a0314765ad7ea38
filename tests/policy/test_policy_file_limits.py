"""Reading hostile policy files (SPEC 11): linear in the file's size, deep nesting and bytes that
are not UTF-8 refused as PolicyError naming the line and the key, files over the size limit
refused before they are parsed, and snapshot files that are not snapshots refused by line.

The long-input tests carry a pytest-timeout as a guard, not as a measure: the line reader these
replace backtracked in time cubic in a line's length (minutes on a few KB, bench/README.md), so
on a megabyte it never ends, while a linear reader finishes in a fraction of the bound on a
loaded machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from membrane_engine.errors import ValidationError
from membrane_engine.policy.check import PolicyError, load_policy, parse_policy
from membrane_engine.rules.policy_file import MAX_NESTING, MAX_POLICY_BYTES, MAX_PROBLEMS
from membrane_engine.policy.snapshots import FORMAT, read

HEAD = '[profiles.a]\nmax_sensitivity = "low"\n'
MB = 1_000_000


def described(body: str) -> str:
    """A valid file whose profile description is ``body``: text the line reader must skip."""
    return HEAD + 'description = """\n' + body + '"""\n\n[[assert]]\nprofile = "a"\nexpect = "full"\n'


# What made the old header pattern ([^\]]+? between two \s*) backtrack: a line that opens a
# bracket and then runs on in blanks without closing it.
HOSTILE = {
    "bracket then blanks": lambda n: "[" + " " * n,
    "double bracket, blanks and tabs": lambda n: "[[" + " \t" * (n // 2) + "x",
    "many such lines": lambda n: ("[" + " " * 200 + "\n") * (n // 202),
    "dotted key of blanks": lambda n: "a" + " ." * (n // 2),
    "quotes and escapes": lambda n: '\\"' * (n // 2),
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("size", [3_500, 8_000, MB], ids=["3.5KB", "8KB", "1MB"])
@pytest.mark.parametrize("shape", list(HOSTILE))
def test_a_hostile_file_is_read_in_linear_time(shape: str, size: int) -> None:
    body = HOSTILE[shape](size) + "\n"
    policy = parse_policy(described(body), "hostile.toml")
    assert policy.profiles["a"].description and len(policy.assertions) == 1
    assert policy.lines == (len(described(body).splitlines()) - 2,)  # the [[assert]] after the text


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", [
    "x = " + "[1]," * (MB // 4),  # a syntax error (no closing bracket) after a megabyte of values
    'x = "' + " " * MB,  # a string that never closes
    "".join(f"[t{i}]\n" for i in range(MB // 10)),  # a hundred thousand unknown tables
    "[" + "a." * (MB // 2) + "b]\n",  # a dotted header half a million parts long
    "x = {" + "a." * (MB // 2) + "b = 1}\n",  # the same inside an inline table
], ids=["open array", "open string", "unknown tables", "long header", "long inline key"])
def test_a_megabyte_of_errors_is_refused_in_linear_time_with_a_bounded_list(text: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "big.toml")
    located = info.value.located
    assert 1 <= len(located) <= MAX_PROBLEMS + 1 and len(str(info.value)) < 100 * MAX_PROBLEMS * 2


def nested(depth: int) -> str:
    """A file whose assertion's ids sit ``depth`` levels deep (assert, item, records, ids: 4 of
    them before the first bracket)."""
    brackets = depth - 4
    return (HEAD + '\n[[assert]]\nprofile = "a"\nexpect = "full"\nrecords = { ids = '
            + "[" * brackets + '"x"' + "]" * brackets + " }\n")


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 1_000, 100_000])
def test_deep_nesting_is_refused_with_the_line_and_key(depth: int) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(nested(depth), "deep.toml")
    (line, key, message), = info.value.located
    assert (line, key) == (7, "assert[0].records.ids") and f"more than {MAX_NESTING} levels" in message
    assert "deep.toml:7: assert[0].records.ids: nested" in str(info.value)


def test_nesting_up_to_the_bound_is_read() -> None:
    with pytest.raises(PolicyError) as info:  # deep enough, and still a list of ids of lists
        parse_policy(nested(MAX_NESTING), "deep.toml")
    assert "levels" not in str(info.value) and info.value.located[0][:2] == (7, "assert[0].records.ids[0]")


@pytest.mark.parametrize("text,line,key", [
    ("[" + "a." * 1_000 + "b]\n", 1, "a." * MAX_NESTING + "a"),
    (HEAD + "x" + ".y" * 1_000 + " = 1\n", 3, "profiles.a.x" + ".y" * (MAX_NESTING - 2)),
    (HEAD + "\nz = { " + "k." * 1_000 + "v = 1 }\n", 4, "profiles.a.z" + ".k" * (MAX_NESTING - 2)),
    (HEAD + "\nz = " + "{ k = " * 1_000 + "1" + " }" * 1_000 + "\n", 4, "profiles.a.z" + ".k" * (MAX_NESTING - 2)),
], ids=["header", "dotted key", "dotted key in an inline table", "inline tables"])
def test_every_kind_of_nesting_counts(text: str, line: int, key: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "deep.toml")
    assert info.value.located[0][:2] == (line, key), info.value.located


def test_text_inside_strings_is_not_read_as_tables() -> None:
    # The [[assert]] inside the description is text: the real first assertion is assert[0], on
    # line 9, and its bad verdict is on line 11.
    text = HEAD + 'description = """\n[[assert]]\nexpect = "x"\n"""\nactor_id = \'[x]\'\n' \
        '\n[[assert]]\nprofile = "a"\nexpect = "hiden"\n'
    with pytest.raises(PolicyError) as info:
        parse_policy(text, "p.toml")
    assert info.value.located[0][:2] == (11, "assert[0].expect"), info.value.located


def test_bytes_that_are_not_utf8_name_their_line(tmp_path: Path) -> None:
    data = HEAD.encode() + b'description = "caf\xe9"\n'
    with pytest.raises(PolicyError) as info:
        parse_policy(data, "latin1.toml")
    assert info.value.located == [(3, "(file)", "not UTF-8: byte 0xe9 at line 3, column 19")]
    path = tmp_path / "latin1.toml"
    path.write_bytes(data)
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    assert f"{path}:3: (file): not UTF-8" in str(info.value)


def test_a_file_over_the_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    lines = ("# " + "x" * 97 + "\n") * (MAX_POLICY_BYTES // 100 + 2)  # comments: valid TOML but too big
    path.write_text(HEAD + lines)
    size = path.stat().st_size
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    (line, key, message), = info.value.located
    assert key == "(file)" and f"{size:,} bytes" in message and f"at most {MAX_POLICY_BYTES:,} bytes" in message
    assert line == 3 + (MAX_POLICY_BYTES - len(HEAD)) // 100  # the line holding the first byte over the limit
    with pytest.raises(PolicyError):
        parse_policy(HEAD + lines)
    assert parse_policy(HEAD + lines[:MAX_POLICY_BYTES // 2]).profiles["a"].max_sensitivity.value == "low"


@pytest.mark.parametrize("line,why", [
    ("[" * 100_000, "nested too deeply"),
    ('{"profile": "a", "id": "caf\xe9"}'.encode("latin-1"), "not UTF-8"),
], ids=["deep JSON", "latin-1"])
def test_a_snapshot_that_is_not_one_names_its_line(tmp_path: Path, line: str | bytes, why: str) -> None:
    path = tmp_path / "seen.jsonl"
    header = f'{{"format": "{FORMAT}", "profiles": {{"a": {{"max_sensitivity": "low", "scopes": []}}}}}}\n'
    path.write_bytes(header.encode() + (line.encode() if isinstance(line, str) else line) + b"\n")
    with pytest.raises(ValidationError) as info:
        read(path)
    assert str(info.value).startswith(f"{path}:2: {why}")
