"""The Policies page (AppTest) on the sample store with the bundled policy file, the profile
presets of the trust forms, the what-if URL, and "who gains access?" on Curate and Import: a
widening change cannot be applied without its confirmation, even by a click on Apply."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from console.components.audit_table import record_link
from membrane_engine import Membrane
from membrane_engine.rules.roles import Operator
from tests.support.sessions import sign_in

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "console" / "app_pages"
SAMPLE = ROOT / "sample_data" / "membrane_sample.json"
TIMEOUT = 60
AWS_KEY = "4bd4e60f-41ba-508a-b7d1-a8b178a6aa8b"  # semantic, hyper, infra-ops, tagged secret
PREFS_RULE = "3badbecb-2cdd-5bcd-87a7-a7924117c2e4"  # semantic, low, user-prefs


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'policies.db'}"
    m = Membrane.open(url, load_sample=False)
    m.import_file(SAMPLE)
    m.close()
    monkeypatch.setenv("MEMBRANE_DB_URL", url)
    monkeypatch.delenv("MEMBRANE_POLICIES", raising=False)
    st.cache_resource.clear()
    yield url
    st.cache_resource.clear()


def signed_in(at: AppTest, level: str = "hyper", scopes: tuple[str, ...] = (), role: str = "admin") -> AppTest:
    return sign_in(at, Operator(name="ann", role=role, max_sensitivity=level, scopes=scopes))


def run(target) -> AppTest:
    """Run the app (``target`` is the AppTest, or a widget whose value was just set)."""
    at = target.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


COLUMNS = {  # AppTest does not expose a dataframe's key: each table is known by its columns
    "pol_asserts": "status", "pol_profiles": "wider than your clearance", "pol_cov": "not covered",
    "pol_errors": "problem", "pol_fail": "reasons (explain)", "exposure_summary": "gains", "exposure_rows": "access",
}


def frame(at: AppTest, key: str):
    column = next(c for k, c in COLUMNS.items() if key.startswith(k) or key.endswith(k))
    return next(d.value for d in at.dataframe if column in d.value.columns)


def page_text(at: AppTest) -> str:
    parts = [str(e.value) for kind in ("markdown", "caption", "text", "error", "warning", "success", "info")
             for e in getattr(at, kind)]
    parts += [d.value.to_csv() for d in at.dataframe]
    return "\n".join(parts)


def reclassify(url: str, rid: str, **kw) -> None:
    m = Membrane.open(url, load_sample=False)
    m.reclassify(rid, "tester", "test", **kw)
    m.close()


def test_every_assertion_of_the_sample_policy_holds(store: str) -> None:
    at = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    asserts = frame(at, "pol_asserts")
    assert len(asserts) == 13 and set(asserts["status"]) == {"holds"}
    assert "Every assertion holds" in page_text(at) and not at.error
    profiles = frame(at, "pol_profiles")
    assert list(profiles["profile"]) == sorted(["docs-bot", "alpha-agent", "orion-agent", "ops-agent",
                                                "prefs-assistant", "kestrel"])
    kestrel = profiles[profiles["profile"] == "kestrel"].iloc[0]
    assert (kestrel["full"], kestrel["redacted"], kestrel["hidden"]) == (221, 0, 0)
    cov = frame(at, "pol_cov")
    assert set(cov["not covered"]) == {0} and "sample_data/policies.toml" in page_text(at)


def test_a_failing_assertion_is_drawn_with_its_records_and_reasons(store: str) -> None:
    reclassify(store, AWS_KEY, sensitivity="low", scope="")
    at = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    asserts = frame(at, "pol_asserts")
    failing = asserts[asserts["status"] == "FAILS"]
    assert "no secret reaches docs-bot in any form" in set(failing["assertion"])
    errors = " ".join(e.value for e in at.error)
    assert "Fails: no secret reaches docs" in errors.replace("\\", "")
    rows = next(d.value for d in at.dataframe
                if "reasons (explain)" in d.value.columns and record_link(AWS_KEY) in set(d.value["id"]))
    row = rows[rows["id"] == record_link(AWS_KEY)].iloc[0]  # the id opens the record in the explorer
    assert row["verdict"] == "redacted" and row["tags"] == "secret, aws, ci"
    assert "sensitivity low is one level above max public: redacted" in row["reasons (explain)"]
    assert "FAKE" not in page_text(at)  # no payload on this page (not even as a label)


def test_records_above_the_operators_clearance_are_not_checked_nor_counted_on_the_page(store: str) -> None:
    reclassify(store, AWS_KEY, sensitivity="high")  # ops-agent now reads it in full: its assertion fails
    admin = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    asserts = frame(admin, "pol_asserts")
    assert "FAILS" in set(asserts[asserts["assertion"].str.startswith("ops-agent never")]["status"])
    at = run(sign_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT),
                     Operator(name="low-viewer", role="viewer", max_sensitivity="low", scopes=("project-alpha",))))
    # One door (SPEC 10): the check runs over the records the clearance sees; whether an assertion
    # fails because of a record beyond it would tell something about that record.
    asserts = frame(at, "pol_asserts")
    ops = asserts[asserts["assertion"].str.startswith("ops-agent never")].iloc[0]
    # It names the record by id: to this clearance that id is as absent as one not in the store.
    assert ops["matched"] == 0 and "not in the store or beyond your clearance" in ops["result"]
    listed = [d.value for d in at.dataframe if "reasons (explain)" in d.value.columns]
    assert not any(AWS_KEY in " ".join(rows["id"]) for rows in listed)  # (the file itself names it: that is no leak)
    text = page_text(at)
    assert "beyond your clearance were not checked here" in text and "would exit 0" not in text
    assert "infra-ops" not in " ".join(d.value.to_csv() for d in at.dataframe if "not covered" in d.value.columns)
    profiles = frame(at, "pol_profiles")
    assert set(profiles[profiles["profile"] == "kestrel"]["wider than your clearance"]) == \
        {"yes: counted over what you see"}


def test_an_invalid_policy_file_shows_the_line_and_key(store: str, tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[profiles.a]\nmax_sensitivity = "low"\n\n[[assert]]\nprofile = "a"\nexpect = "vissible"\n')
    monkeypatch.setenv("MEMBRANE_POLICIES", str(bad))
    at = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    problems = frame(at, "pol_errors")
    assert (int(problems.iloc[0]["line"]), problems.iloc[0]["key"]) == (6, "assert[0].expect")
    assert "exits 2" in " ".join(e.value for e in at.error)


def test_profiles_are_presets_of_the_trust_forms(store: str) -> None:
    at = run(signed_in(AppTest.from_file(str(PAGES / "selector.py"), default_timeout=TIMEOUT)))
    preset = at.selectbox(key="sel_preset")
    assert "Profile: ops-agent" in preset.options
    run(preset.set_value("Profile: ops-agent"))
    assert at.select_slider(key="sel_max_sensitivity").value == "high"
    assert at.multiselect(key="sel_scopes").value == ["infra-ops"]


def test_what_if_keeps_both_contexts_in_its_url(store: str) -> None:
    at = AppTest.from_file(str(PAGES / "what_if.py"), default_timeout=TIMEOUT)
    at.query_params.update({"a_max_sensitivity": "low", "a_scopes": "user-prefs", "b_max_sensitivity": "high",
                            "b_scopes": "infra-ops,user-prefs", "b_actor_id": "ops"})
    run(signed_in(at))
    assert at.select_slider(key="wa_max_sensitivity").value == "low"
    assert at.multiselect(key="wb_scopes").value == ["infra-ops", "user-prefs"]
    run(at.select_slider(key="wa_max_sensitivity").set_value("medium"))
    assert at.query_params["a_max_sensitivity"] == ["medium"] or at.query_params["a_max_sensitivity"] == "medium"
    b = at.query_params["b_scopes"]
    assert (b if isinstance(b, str) else b[0]) == "infra-ops,user-prefs"


def _curate(store: str, rid: str) -> AppTest:
    at = AppTest.from_file(str(PAGES / "curate.py"), default_timeout=TIMEOUT)
    run(signed_in(at))
    run(at.selectbox(key="curate_op").set_value("reclassify"))  # a new operation starts with no record chosen
    run(at.text_input(key="curate_query").set_value(rid[:13]))
    run(at.multiselect(key="curate_ids").set_value([rid]))
    return run(at.text_area(key="curate_rationale").set_value("test"))


def test_curate_a_widening_reclassify_needs_its_own_confirmation(store: str) -> None:
    at = _curate(store, PREFS_RULE)
    run(at.selectbox(key="curate_sens").set_value("public"))  # docs-bot now reads it
    rows = frame(at, "curate_exposure_rows")
    assert {(r.profile, r.before, r.after) for r in rows.itertuples()} >= {("docs-bot", "redacted", "full")}
    summary = frame(at, "curate_exposure_summary")
    assert int(summary[summary["profile"] == "docs-bot"]["gains"].iloc[0]) == 1
    assert at.button(key="curate_apply").disabled
    run(at.checkbox(key="curate_widen").check())
    assert not at.button(key="curate_apply").disabled

    # A wider change sent together with Apply (one browser round trip): the confirmation was for
    # another widening, so the run that would apply does not, whatever the button looked like.
    at.checkbox(key="curate_scope_on").check()  # scope "" = unscoped: every project agent gains it
    run(at.button(key="curate_apply").click())
    assert not at.success
    m = Membrane.open(store, load_sample=False)
    assert (m.get(PREFS_RULE).sensitivity.value, m.get(PREFS_RULE).scope) == ("low", "user-prefs")
    m.close()

    summary = frame(at, "curate_exposure_summary")
    assert int(summary[summary["profile"] == "alpha-agent"]["gains"].iloc[0]) == 1
    assert at.button(key="curate_apply").disabled and not at.checkbox(key="curate_widen").value
    run(at.checkbox(key="curate_widen").check())
    run(at.button(key="curate_apply").click())
    m = Membrane.open(store, load_sample=False)
    assert (m.get(PREFS_RULE).sensitivity.value, m.get(PREFS_RULE).scope) == ("public", "")
    m.close()


def test_curate_a_narrowing_reclassify_needs_no_confirmation(store: str) -> None:
    at = _curate(store, PREFS_RULE)
    run(at.selectbox(key="curate_sens").set_value("high"))
    summary = frame(at, "curate_exposure_summary")
    assert set(summary["gains"]) == {0} and summary["losses"].sum() >= 1
    assert not [c for c in at.checkbox if c.key == "curate_widen"]
    assert not at.button(key="curate_apply").disabled


def test_import_lists_who_would_see_the_new_records(store: str) -> None:
    sample = json.loads(SAMPLE.read_text())
    aws = next(r for r in sample if r["id"] == AWS_KEY)
    new = dict(aws, id="new-key", audit_log=[], relations=[])
    at = run(signed_in(AppTest.from_file(str(PAGES / "import_export.py"), default_timeout=TIMEOUT)))
    run(at.file_uploader(key="ie_upload").set_value(("one.json", json.dumps([new]).encode(), "application/json")))
    rows = frame(at, "ie_exposure_rows")
    assert {(r.profile, r.after) for r in rows.itertuples()} == {("kestrel", "full"), ("ops-agent", "redacted")}
    assert at.button(key="ie_import").disabled
    run(at.checkbox(key="ie_widen").check())
    assert not at.button(key="ie_import").disabled

    # Another file with Apply in the same round trip: the confirmation was for the first one.
    wider = dict(new, id="new-public", sensitivity="public", scope="")
    at.file_uploader(key="ie_upload").set_value(("two.json", json.dumps([wider]).encode(), "application/json"))
    run(at.button(key="ie_import").click())
    assert not at.success
    m = Membrane.open(store, load_sample=False)
    assert "new-public" not in m.ids() and "new-key" not in m.ids()
    m.close()


def test_an_uploaded_policy_file_is_used_for_the_session(store: str) -> None:
    text = '[profiles.nobody]\nmax_sensitivity = "public"\nscopes = ["none"]\n\n[[assert]]\nprofile = "nobody"\nexpect = "full"\n'
    at = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    run(at.file_uploader(key="policy_file").set_value(("mine.toml", text.encode(), "application/toml")))
    assert "uploaded file mine.toml" in page_text(at)
    asserts = frame(at, "pol_asserts")
    assert list(asserts["status"]) == ["FAILS"] and list(frame(at, "pol_profiles")["profile"]) == ["nobody"]
    run(at.file_uploader(key="policy_file").set_value(None))
    assert "sample_data/policies.toml" in page_text(at)


def test_a_change_to_the_store_is_checked_on_the_next_run(store: str) -> None:
    at = run(signed_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT)))
    assert set(frame(at, "pol_asserts")["status"]) == {"holds"}
    reclassify(store, AWS_KEY, sensitivity="low", scope="")  # by another process's engine
    run(at)
    assert "FAILS" in set(frame(at, "pol_asserts")["status"])


# ----------------------------------------------------------------------------- uploads (SPEC 11)

PROBE = "parse-once-probe"  # a profile name only the uploaded files below hold
MINE = f'[profiles.{PROBE}]\nmax_sensitivity = "public"\n\n[[assert]]\nprofile = "{PROBE}"\nexpect = "hidden"\n'


def policies_page(role: str = "admin", name: str = "ann") -> AppTest:
    return run(sign_in(AppTest.from_file(str(PAGES / "policies.py"), default_timeout=TIMEOUT),
                       Operator(name=name, role=role, max_sensitivity="hyper")))


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    return run(at.file_uploader(key="policy_file").set_value((name, data, "application/toml")))


def unescaped(at: AppTest) -> str:
    return page_text(at).replace("\\", "")


def test_a_viewer_has_no_upload_and_is_told_why(store: str) -> None:
    at = policies_page(role="viewer")
    assert not at.get("file_uploader")
    text = unescaped(at)
    assert "Only a curator or an admin can use another policy file" in text
    assert "replace_policy needs the curator role; ann is a viewer" in text
    assert "sample_data/policies.toml" in text and len(frame(at, "pol_asserts")) == 13  # the checks still run


def test_a_curator_uploads_and_loses_the_upload_on_demotion(store: str) -> None:
    at = policies_page(role="curator")
    upload(at, "mine.toml", MINE.encode())
    assert "uploaded file mine.toml" in page_text(at) and list(frame(at, "pol_profiles")["profile"]) == [PROBE]

    from console import auth

    m = Membrane.open(store, load_sample=False)
    m.operators.set("ann", actor="test", role="viewer")
    demoted = m.operators.get("ann")
    m.close()
    session = at.session_state[auth.SESSION_KEY]  # as the console's gate adopts it from the store each run
    at.session_state[auth.SESSION_KEY] = auth.Session(demoted, session.expires_at)
    run(at)
    assert "sample_data/policies.toml" in page_text(at) and "uploaded file" not in page_text(at)
    assert not at.get("file_uploader")


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every TOML text holding PROBE that is parsed from now on."""
    import tomllib

    parsed: list[str] = []
    loads = tomllib.loads

    def counting(text: str, *args, **kwargs):
        if PROBE in text:
            parsed.append(text)
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counting)
    return parsed


def test_an_upload_over_the_limit_is_refused_naming_limit_and_size(store: str, monkeypatch) -> None:
    from console.components.policy_source import MAX_UPLOAD_BYTES

    parsed = count_parses(monkeypatch)
    at = policies_page()
    big = (MINE + "#" * MAX_UPLOAD_BYTES + "\n").encode()
    upload(at, "big.toml", big)
    errors = " ".join(e.value for e in at.error).replace("\\", "")
    assert (f"big.toml is not used: it is {len(big):,} bytes, and an uploaded policy file may be at most "
            f"{MAX_UPLOAD_BYTES:,} bytes (256 KB)") in errors
    assert parsed == [] and "sample_data/policies.toml" in page_text(at)  # refused unread; the policy stays
    assert set(frame(at, "pol_asserts")["status"]) == {"holds"}

    upload(at, "mine.toml", MINE.encode())  # a file within the limit is taken, and the refusal goes
    assert "uploaded file mine.toml" in page_text(at) and "is not used" not in " ".join(e.value for e in at.error)


def test_an_upload_is_parsed_once_whatever_the_reruns(store: str, monkeypatch) -> None:
    parsed = count_parses(monkeypatch)
    at = policies_page()
    upload(at, "mine.toml", MINE.encode())
    assert len(parsed) == 1 and "uploaded file mine.toml" in page_text(at)
    for _ in range(3):
        run(at)
    run(at.file_uploader(key="policy_file").set_value(("mine.toml", MINE.encode(), "application/toml")))  # sent again
    assert len(parsed) == 1 and list(frame(at, "pol_profiles")["profile"]) == [PROBE]
    upload(at, "mine.toml", (MINE + "# changed\n").encode())  # new bytes: parsed, once
    run(at)
    assert len(parsed) == 2


def test_an_uploaded_file_that_is_not_utf8_shows_the_line(store: str) -> None:
    at = policies_page()
    upload(at, "latin1.toml", MINE.encode() + b'name = "caf\xe9"\n')
    problems = frame(at, "pol_errors")
    assert (int(problems.iloc[0]["line"]), problems.iloc[0]["key"]) == (7, "(file)")
    assert "not UTF-8: byte 0xe9" in problems.iloc[0]["problem"]
