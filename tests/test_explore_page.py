"""The trade-off page: self-contained, small, and interactive in headless Chromium with no request leaving it."""

from __future__ import annotations

import json
import re
import subprocess
from importlib import resources

import numpy as np
import pytest

from metricdp.explore import FIGURES, Exploration, explore
from metricdp.explore_page import MAX_HEAT_N, heat_bytes, render_page, render_png
from metricdp.io import read_points
from tests.helpers import needs, program

CAPITALS = resources.files("metricdp") / "data" / "examples" / "europe-capitals.csv"
CHROMIUM = program("chromium")


@pytest.fixture(scope="module")
def capitals():
    space = read_points(CAPITALS)
    ex = explore(space, ["exponential", "krr"], [0.001, 0.005, 0.02, 0.1])
    commands = {f: [f"metricdp build caps.csv --mechanism {f} --epsilon {e!r} --out m.npz" for e in ex.epsilons]
                for f in ex.families}
    return ex, commands


def _fake(n: int, families: int, k: int, labels: tuple[str, ...] | None = None) -> Exploration:
    """An exploration with random stochastic matrices: the page's size depends on n, families and k only."""
    g = np.random.default_rng(0)
    names = tuple(f"family{j}" for j in range(families))
    eps = tuple(float(e) for e in np.geomspace(0.1, 10, k))

    def matrix():
        m = g.random((n, n)) ** 8
        return m / m.sum(axis=1, keepdims=True)

    return Exploration(
        families=names, epsilons=eps, quantile=0.95, unit="km", labels=labels or tuple(f"p{i}" for i in range(n)),
        prior=False, figures={f: {key: [float(g.random()) for _ in eps] for key in FIGURES} for f in names},
        failures={f: [None] * k for f in names}, lower_bound=[0.0] * k, lower_bound_quantile=[0.0] * k,
        matrices={f: [matrix() for _ in eps] for f in names})


def _self_contained(text: str) -> None:
    assert "http://" not in text and "https://" not in text
    assert not re.search(r"\b(src|href)\s*=", text, re.IGNORECASE)
    assert "@import" not in text and "url(" not in text


def test_page_is_self_contained_and_under_2_mb_for_4_families_20_epsilons_43_points():
    ex = _fake(43, 4, 20)
    commands = {f: [f"metricdp build caps.csv --mechanism {f} --epsilon {e!r} --out {f}.npz" for e in ex.epsilons]
                for f in ex.families}
    page = render_page(ex, commands=commands, settings="settings\n  mechanism: x\n")
    _self_contained(page)
    assert len(page.encode()) < 2_000_000
    assert page.count("<script") == 2  # the data and the code


def test_a_label_cannot_close_the_data_block():
    ex = _fake(3, 1, 2, labels=("a</script><script>alert(1)</script>", "b", "c&d"))
    page = render_page(ex, settings="<b>")
    assert page.count("</script>") == 2 and "alert(1)</script>" not in page
    data = page.split('<script type="application/json" id="data">')[1].split("</script>")[0]
    assert json.loads(data)["n"] == 3
    assert "&lt;b&gt;" in page


def test_heat_bytes_scale():
    assert list(heat_bytes(np.array([[1.0, 1e-6, 1e-7, 0.0, 1e-3]]))) == [255, 1, 0, 0, 128]


def test_large_spaces_get_no_heat_map():
    page = render_page(_fake(MAX_HEAT_N + 1, 1, 2))
    assert f"more than {MAX_HEAT_N}" in page


def test_commands_must_cover_every_epsilon():
    ex = _fake(3, 1, 2)
    with pytest.raises(ValueError, match="one command per epsilon"):
        render_page(ex, commands={"family0": ["only one"]})


@needs("plot")
def test_png_is_drawn(capitals):
    png = render_png(capitals[0])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# ---------------------------------------------------------------------------- headless Chromium
#: Appended to a copy of the page: reads what is shown, moves the slider and changes the family as a
#: user does (the same DOM events), and writes what it saw, and every resource the page loaded, into the DOM.
_PROBE = """<script>
(function(){
function shown(){ return {eps: document.getElementById("epsval").textContent,
  now: document.getElementById("now").textContent, cmd: document.getElementById("cmd").textContent,
  loss: document.getElementById("chart-loss").innerHTML, ri: document.getElementById("chart-ri").innerHTML,
  heat: document.getElementById("heat").toDataURL()}; }
const out = {first: shown()};
const s = document.getElementById("eps"); s.value = s.max; s.dispatchEvent(new Event("input"));
out.moved = shown();
const f = document.getElementById("family"); f.selectedIndex = 1; f.dispatchEvent(new Event("change"));
out.family = shown();
out.resources = performance.getEntriesByType("resource").map(e => e.name);
const pre = document.createElement("pre"); pre.id = "probe"; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
})();
</script></body>"""


def _chromium(page, tmp_path, name):
    """(DOM after the scripts ran, console lines, URLs the page itself requested)."""
    net = tmp_path / f"{name}-net.json"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--enable-logging=stderr", "--v=0", f"--user-data-dir={tmp_path / ('profile-' + name)}",
         "--host-resolver-rules=MAP * ~NOTFOUND", f"--log-net-log={net}", "--virtual-time-budget=5000",
         "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(net.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    # the browser's own background requests carry no origin; a request the page makes carries the page's
    requested = [e["params"]["url"] for e in log["events"] if e["type"] == start
                 and e.get("params", {}).get("initiator", "not an origin") != "not an origin"]
    return proc.stdout, console, requested


@pytest.mark.slow
@needs("chromium")
def test_moving_the_slider_changes_the_figures_in_headless_chromium(capitals, tmp_path):
    ex, commands = capitals
    page = tmp_path / "explore.html"
    page.write_text(render_page(ex, commands=commands, settings="settings\n").replace("</body>", _PROBE))
    dom, console, requested = _chromium(page, tmp_path, "page")
    assert console == [], console
    assert requested == []
    probe = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert probe is not None, dom[-3000:]
    import html

    seen = json.loads(html.unescape(probe.group(1)))
    assert seen["resources"] == []
    first, moved, family = seen["first"], seen["moved"], seen["family"]
    assert first["cmd"] == commands["exponential"][(len(ex.epsilons) - 1) // 2]
    assert moved["cmd"] == commands["exponential"][-1] and family["cmd"] == commands["krr"][-1]
    for key in ("eps", "now", "loss", "ri", "heat"):
        assert first[key] != moved[key], key  # the slider moved every figure
    for key in ("now", "loss", "ri", "heat"):
        assert moved[key] != family[key], key  # so did the family
    assert f"{ex.figures['krr']['adversary_reidentification'][-1]:.4g}" in family["now"]


@pytest.mark.slow
@needs("chromium")
def test_the_chromium_checks_can_fail(tmp_path):
    """Negative control: a console error and a request the page makes are both seen."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="http://example.invalid/x.png"><script>console.error("boom");'
                   'fetch("https://example.invalid/y").catch(() => 0)</script></body></html>')
    _, console, requested = _chromium(bad, tmp_path, "bad")
    assert any("boom" in line for line in console)
    assert set(requested) == {"http://example.invalid/x.png", "https://example.invalid/y"}
