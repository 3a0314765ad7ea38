"""Exporting through the browser: the Export tab prepares a file through the engine's streaming
export and offers it for download; preparing again replaces it. A screenshot is kept."""

from __future__ import annotations

import json

import pytest

from membrane_engine import Membrane

pytestmark = pytest.mark.e2e


def test_export_tab_prepares_a_download_of_the_whole_store(console, sample_store_url):
    m = Membrane.open(sample_store_url, load_sample=False)
    try:
        ids = sorted(m.ids())
    finally:
        m.close()
    con = console.open("import-export")
    con.act(lambda: con.page.get_by_role("tab", name="Export").click())
    prepare = con.page.get_by_role("button", name="Prepare the export file")
    con.act(lambda: prepare.click())
    con.act(lambda: con.page.get_by_text("jsonl", exact=True).click())
    con.act(lambda: prepare.click())  # again, as JSON Lines: replaces the first file
    con.screenshot("sample-export-prepared")
    con.assert_healthy()
    assert con.page.locator("[data-testid=stAlert]", has_text=f"Export ready: {len(ids):,} record{'' if len(ids) == 1 else 's'},").count() == 1
    download = con.page.get_by_role("button", name="Download membrane_export.jsonl")
    with con.page.expect_download() as caught:  # the file is made on click (a deferred download)
        download.click()
    saved = caught.value
    assert saved.suggested_filename == "membrane_export.jsonl"
    docs = [json.loads(line) for line in open(saved.path(), encoding="utf-8") if line.strip()]
    assert sorted(d["id"] for d in docs) == ids
