"""perfgate history plot and report: a valid PNG and SVG, and a static site that opens in headless
Chromium without console errors, every image it shows present and drawn."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from perfgate.__main__ import main
from perfgate.history import config, detect, plot, site, store
from perfgate.history.demo import fake_commit, write_history

# the change-point search and the plots need the `history` extra; the GPU job's env has no use for it
ruptures = pytest.importorskip(
    "ruptures", reason="the `history` extra is not installed (pip install '.[history]')"
)
matplotlib = pytest.importorskip(
    "matplotlib", reason="the `history` extra is not installed (pip install '.[history]')"
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """16 runs of the H200 device selection: m16-n2112-k7168 6% slower from run 10, a new torch
    from run 3 (one segment start)."""
    root = tmp_path_factory.mktemp("history")
    runs = write_history(
        root / "runs",
        runs=16,
        step_at=10,
        step=0.06,
        new_torch_at=3,
        keyword="m16-n2112-k7168",
        max_rounds=20,
    )
    db = root / "h.sqlite"
    assert main(["history", "add", *map(str, runs), "--db", str(db), "--branch", "main"]) == 0
    return db


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_writes_a_valid_png(history, tmp_path):
    out = tmp_path / "h.png"
    assert main(["history", "plot", "--db", str(history), "--out", str(out)]) == 0
    width, height = _png_size(out.read_bytes())
    assert width > 800 and height > 300
    assert out.read_bytes()[-12:-4] == b"\x00\x00\x00\x00IEND"  # complete: ends with IEND


def test_plot_writes_a_valid_svg_with_the_marks(history, tmp_path):
    out = tmp_path / "h.svg"
    assert main(["history", "plot", "--db", str(history), "--out", str(out)]) == 0
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    text = " ".join(t for el in root.iter() if el.tag.endswith("text") for t in el.itertext())
    assert "score: geometric mean of the ranked shapes" in text
    assert "+6." in text  # the change point's label, +6.x%
    assert "new fingerprint: torch" in text
    assert fake_commit(10)[:7] in text  # the slower change's commit on the commit axis
    assert "m16-n2112-k7168" in text  # and the slower benchmark named


def test_plot_bad_input(history, tmp_path, capsys):
    assert main(["history", "plot", "--db", str(history), "--out", str(tmp_path / "h.pdf")]) == 2
    assert "expected a .png or .svg" in capsys.readouterr().err
    assert main(["history", "plot", "--db", str(history), "--out", str(history)]) == 2
    assert (
        main(
            [
                "history",
                "plot",
                "--db",
                str(history),
                "--out",
                str(tmp_path / "x.png"),
                "-k",
                "nothing",
            ]
        )
        == 2
    )
    assert not (tmp_path / "x.png").exists()


def test_score_is_the_geometric_mean_of_the_six_ranked_shapes(history):
    with store.open_store(history, write=False) as s:
        rows = s.rows()
    points = dict(plot.score(rows))
    ranked = [r for r in rows if plot.is_ranked(r)]
    assert len({r.benchmark for r in ranked}) == 6
    run = rows[0].run_id
    ms = [r.median for r in ranked if r.run_id == run]
    expected = 1.0
    for m in ms:
        expected *= m
    assert points[run] == pytest.approx(expected ** (1 / 6), rel=1e-12)


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.refs.append(value)


@pytest.fixture(scope="module")
def report(history, tmp_path_factory):
    out = tmp_path_factory.mktemp("site") / "site"
    # the ranked shapes only (the score needs all six): fewer plots to draw
    assert (
        main(["history", "report", "--db", str(history), "--out", str(out), "-k", "leaderboard"])
        == 0
    )
    return out


def test_report_is_a_complete_static_site(report):
    html = (report / "index.html").read_text()
    parser = _Refs()
    parser.feed(html)
    assert "<script" not in html and "http" not in "".join(parser.refs)  # nothing from outside
    assert parser.refs, "the page links nothing"
    for ref in parser.refs:
        target = report / ref
        assert target.is_file(), ref
        if ref.endswith(".png"):
            _png_size(target.read_bytes())
    assert (report / "nvidia-h200" / "device.png").is_file()  # the stable address CI links
    assert "test_leaderboard[m16-n2112-k7168]" in html and fake_commit(10)[:12] in html
    assert "torch" in html and "2.99.0+demo" in html


def test_report_replaces_an_earlier_report_only(report, history, tmp_path, capsys):
    earlier = tmp_path / "earlier"
    assert (
        main(["history", "report", "--db", str(history), "--out", str(earlier), "-k", "m16"]) == 0
    )
    first = (earlier / "index.html").read_text()
    assert (
        main(["history", "report", "--db", str(history), "--out", str(earlier), "-k", "s14"]) == 0
    )
    second = (earlier / "index.html").read_text()
    assert "m16-n2112-k7168" in first and "m16-n2112-k7168" not in second
    assert len(list((earlier / "series").iterdir())) == 1  # the old report's files are gone
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["history", "report", "--db", str(history), "--out", str(mine)]) == 2
    assert "not an earlier history report" in capsys.readouterr().err
    assert (mine / "notes.txt").read_text() == "keep me"
    assert main(["history", "report", "--db", str(history), "--out", str(history.parent)]) == 2
    assert "holds the input" in capsys.readouterr().err
    assert not list(tmp_path.glob(".earlier.*"))  # no staging left behind


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def _screenshot(browser: str, page: Path, shot: Path, profile: Path) -> list[str]:
    """Open ``page``, save a screenshot; the page's console messages."""
    cmd = [
        browser,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1400,2200",
        f"--user-data-dir={profile}",
        f"--screenshot={shot}",
        page.as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _png_size(shot.read_bytes()) == (1400, 2200)
    return [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def _find(image: Path, shot: Path) -> bool:
    """Whether ``image`` appears, pixel for pixel (within 2/255), somewhere in ``shot``."""
    from matplotlib.image import imread

    img, scr = imread(image)[..., :3], imread(shot)[..., :3]
    h, w = img.shape[:2]
    row = img[h // 2]
    for x in range(scr.shape[1] - w + 1):
        diff = np.abs(scr[:, x : x + w] - row).mean(axis=(1, 2))
        for y in np.flatnonzero(diff < 2 / 255):
            top = y - h // 2
            region = scr[top : top + h, x : x + w]
            if top >= 0 and region.shape == img.shape and np.abs(region - img).mean() < 2 / 255:
                return True
    return False


def test_report_opens_in_headless_chromium_without_errors(report, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no Chromium on PATH (apt-get install chromium): the page was not opened")
    shot = tmp_path / "report.png"
    console = _screenshot(browser, report / "index.html", shot, tmp_path / "profile")
    assert console == [], console  # every console message (errors, warnings) of the page
    if os.environ.get("PERFGATE_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["PERFGATE_KEEP_SCREENSHOT"])
    # the overview plot was loaded and drawn at its own size
    assert _find(report / "nvidia-h200" / "device.png", shot)


def test_site_refuses_a_file_as_out(history, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(site.SiteError, match="is a file"):
        site.check_out_dir(f)


def test_series_figure_marks_its_change(history):
    with store.open_store(history, write=False) as s:
        rows = s.rows(store.Query(keyword="m16-n2112-k7168"))
    found = detect.detect(rows, config.load().steps)
    (change,) = found.changes
    svg = plot.render(plot.series_figure(rows, found), "svg").decode()
    assert f"{change.change:+.1%}" in svg
