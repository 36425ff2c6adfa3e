"""The gallery: figures that the documentation build draws itself from the bundled examples.

Run by mkdocs-gen-files at build time (``mkdocs.yml``, plugin ``gen-files``). Each entry runs
``metricdp`` commands, from this checkout's ``src``, in a scratch folder with a fixed seed,
and puts the figures they draw and the commands that drew them on ``gallery.md``; nothing is
committed. The figures need the ``plot`` extra (matplotlib) and the ``geo`` extra
(GeoNames' places, from which ``experiment ldp`` draws its stand-in check-ins): a command
that fails (an extra missing, a bug) is logged as an error naming the command and its
``error:`` line, which fails ``mkdocs build --strict`` (``mkdocs serve`` still shows the rest).
The entries are small and independent: each runs in its own folder, side by side (about 60 s
together on a 2-core machine under heavy load). Under ``mkdocs serve`` the figures are kept in
a cache folder keyed by the source of ``metricdp`` and of this script, so that editing a page
does not draw them again; ``mkdocs build`` always draws them.

The same build photographs the trade-off page (``metricdp explore``, :data:`EXPLORE`) in
headless Chromium, Debian's ``chromium`` as the tests use it, and puts the picture in
``docs/location.md``'s "choosing eps" section in place of :data:`MARKER` (an HTML comment,
so the page reads the same without it). Without Chromium the build says so in one line and
the page has no picture; with Chromium, a page or a picture that cannot be made is an error.
"""

from __future__ import annotations

import base64
import hashlib
import html
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import mkdocs_gen_files

SRC = Path(__file__).resolve().parent.parent / "src"
log = logging.getLogger("mkdocs.gallery")
_CLI = "import sys; from metricdp.cli import main; sys.argv[0] = 'metricdp'; main()"
_INLINE_PNG = re.compile(r'<img alt="([^"]*)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"')  # report._img


@dataclass(frozen=True)
class Entry:
    """One gallery figure: a title, what it shows, the commands (run in order, in one folder of
    their own), and the files they draw."""

    title: str
    text: str
    commands: tuple[str, ...]
    figures: tuple[str, ...]  # PNG files, or one HTML report whose inline PNGs are shown


ENTRIES = (
    Entry(
        "Check-ins released with planar Laplace",
        "The bundled check-ins (300 rows) released at eps = 0.5 per km, sampled exactly on a 1 m lattice, "
        "kept inside a box over Europe: true fixes and their releases ([Locations](location.md)).",
        (
            "metricdp example checkins --out checkins.csv",
            "metricdp privatize-points checkins.csv --lat lat --lon lon --epsilon 0.5/km --region 34,-25,72,45 "
            "--drop city --keep user --keep time --seed 0 --out released-points.csv --plot released-points.png",
        ),
        ("released-points.png",),
    ),
    Entry(
        "A mechanism report: the exponential mechanism on European capitals, remapped under a prior",
        "The 43 capitals (haversine km) at eps = 0.01 per km, remapped under the bundled prior (same eps, "
        "lower expected loss). `metricdp report` writes one self-contained HTML page; its figures are below.",
        (
            "metricdp example europe-capitals --out capitals.csv",
            "metricdp example capitals-prior --out capitals-prior.csv",
            "metricdp build capitals.csv -m exponential -e 0.01 --remap --prior capitals-prior.csv --out remapped.npz",
            "metricdp report remapped.npz --prior capitals-prior.csv --out report.html",
        ),
        ("report.html",),
    ),
    Entry(
        "Per-person spend in a ledger",
        "The check-ins' cities released with the exponential mechanism on the capitals (eps = 0.01 per km per "
        "row), at most 20 rows per person and a budget of 0.12 per person (the rows past it withheld), recorded "
        "in a ledger; `ledger show --plot` draws what each person has spent ([Per-person budgets](accounting.md)).",
        (
            "metricdp example europe-capitals --out capitals.csv",
            "metricdp example checkins --out checkins.csv",
            "metricdp build capitals.csv -m exponential -e 0.01 --out em.npz",
            "metricdp privatize em.npz checkins.csv --column city --drop lat --drop lon --keep time "
            "--user-column user --max-rows-per-user 20 --budget 0.12 --over-budget drop --ledger ledger.db --seed 0 "
            "--out released-cities.csv",
            "metricdp ledger show ledger.db --plot spent.png",
        ),
        ("spent.png",),
    ),
    Entry(
        "Local DP on a grid: Alvim et al. (CSF 2018), Figure 2, quick run",
        "Distribution estimation (IBU) from k-RR, geometric and planar Laplace releases calibrated to the same "
        "expected distance, on the quick settings (15 x 15 cells, 2 repetitions); the full run and its "
        "comparison with the paper are in [Reproducing the papers](experiments.md).",
        ("metricdp experiment ldp --quick --seed 0 --out ldp",),
        ("ldp/ldp.png",),
    ),
)


#: The trade-off page shown in docs/location.md: three families on the capitals (the doc's own command has four
#: families x 20 eps; the fewer here keep the build short), photographed at the eps in the middle of the slider.
EXPLORE = Entry(
    "The trade-off page",
    "",
    (
        "metricdp example europe-capitals --out capitals.csv",
        "metricdp example capitals-prior --out capitals-prior.csv",
        "metricdp explore capitals.csv --prior capitals-prior.csv --mechanisms exponential,krr,optimal "
        "--epsilons 0.001:0.1:12 --out explore.html",
    ),
    ("explore.html",),
)
#: Where the picture goes in docs/location.md, and what it is called in the site.
MARKER, SHOT = "<!-- explore-screenshot -->", "img/explore-page.png"
#: The browser's window: the whole page, from the settings to the heat map and the build command.
WINDOW = "1200,1700"
#: Seconds the browser may take (about 3 s on a loaded 2-core machine).
CHROMIUM_SECONDS = 300


def chromium() -> str | None:
    """The Chromium on PATH (the names Debian and others give it), or None."""
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def photograph(folder: Path) -> bool:
    """Draw :data:`EXPLORE` in ``folder`` and photograph its page into ``folder/explore.png``; whether it is there.

    No Chromium: one line says so and there is no picture. A command or a browser that fails is an error.
    """
    browser = chromium()
    if browser is None:
        log.info("explore screenshot: no Chromium on PATH (apt-get install chromium); location.md has no picture")
        return False
    if not draw(EXPLORE, folder):
        return False
    shot = folder / "explore.png"
    if shot.exists():
        return True
    with tempfile.TemporaryDirectory(prefix="metricdp-chromium-") as profile:
        part = Path(profile) / "explore.png"
        try:
            done = subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", f"--window-size={WINDOW}",
                 f"--screenshot={part}", (folder / "explore.html").resolve().as_uri()],
                capture_output=True, text=True, timeout=CHROMIUM_SECONDS, check=False,
            )
        except subprocess.TimeoutExpired:
            log.error("explore screenshot: %s did not finish in %d s", browser, CHROMIUM_SECONDS)
            return False
        if done.returncode != 0 or not part.is_file() or part.stat().st_size == 0:
            reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            log.error("explore screenshot: %s failed (exit %d): %s", browser, done.returncode, reason)
            return False
        shutil.move(part, shot.with_suffix(".part"))
        os.replace(shot.with_suffix(".part"), shot)  # atomic: a cached picture is always whole
    return True


def place_screenshot(folder: Path) -> None:
    """Copy the picture into the site and show it in location.md in place of :data:`MARKER`."""
    with mkdocs_gen_files.open(SHOT, "wb") as fh:
        fh.write((folder / "explore.png").read_bytes())
    with mkdocs_gen_files.open("location.md", "r+") as fh:
        text = fh.read()
        if MARKER not in text:
            log.error("explore screenshot: docs/location.md has no %s to replace", MARKER)
            return
        figure = (f"![The trade-off page of metricdp explore on the capitals]({SHOT})\n\n"
                  f"*Drawn by the documentation build (`{EXPLORE.commands[-1]}`) and photographed in headless "
                  "Chromium.*")
        fh.seek(0)
        fh.write(text.replace(MARKER, figure, 1))
        fh.truncate()


def run(command: str, cwd: Path) -> bool:
    """Run one ``metricdp ...`` command line in ``cwd``; log an error naming it when it fails."""
    argv = shlex.split(command)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(SRC), os.environ.get("PYTHONPATH")))))
    done = subprocess.run([sys.executable, "-c", _CLI, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return True
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    reason = errors[-1] if errors else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    log.error("gallery: `%s` failed (exit %d): %s", command, done.returncode, reason)
    return False


def draw(entry: Entry, folder: Path) -> bool:
    """Run the entry's commands in ``folder`` (made, or reused from the cache); whether all succeeded."""
    if (folder / ".drawn").exists():
        return True
    with tempfile.TemporaryDirectory(prefix="metricdp-gallery-") as tmp:
        work = Path(tmp)
        if not all(run(command, work) for command in entry.commands):
            return False
        (work / ".drawn").touch()
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(work, folder)  # atomic: a folder in the cache is always complete
        except OSError:
            if not (folder / ".drawn").exists():
                raise
        else:
            os.mkdir(work)  # for TemporaryDirectory's clean-up
    return True


def figure_markdown(entry: Entry, work: Path) -> list[str]:
    """The entry's figures copied into the site, as Markdown images (a report: its inline PNGs)."""
    lines = []
    for name in entry.figures:
        path = work / name
        if path.suffix == ".html":
            page = path.read_text(encoding="utf-8")
            with mkdocs_gen_files.open(f"gallery/{path.name}", "w") as fh:
                fh.write(page)
            lines.append(f"The page itself: [{path.name}](gallery/{path.name}).\n")
            for k, (alt, data) in enumerate(_INLINE_PNG.findall(page)):
                target = f"gallery/{path.stem}-{k}.png"
                with mkdocs_gen_files.open(target, "wb") as fh:
                    fh.write(base64.b64decode(data))
                lines.append(f"![{html.unescape(alt).replace(']', ')')}]({target})")
        else:
            target = f"gallery/{path.name}"
            with mkdocs_gen_files.open(target, "wb") as fh:
                fh.write(path.read_bytes())
            lines.append(f"![{entry.title}]({target})")
    return lines


def source_key() -> str:
    """A digest of every file of ``src/metricdp`` and of this script: what the figures depend on."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(p for p in (SRC / "metricdp").rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(SRC).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def main() -> None:
    """Draw every entry and write ``gallery.md``."""
    start = time.monotonic()
    serving = sys.argv[1:2] == ["serve"]
    scratch = None if serving else tempfile.TemporaryDirectory(prefix="metricdp-gallery-")
    root = Path(scratch.name) if scratch else Path(tempfile.gettempdir()) / f"metricdp-gallery-{source_key()}"
    folders = [root / f"entry-{k}" for k in range(len(ENTRIES))]
    with ThreadPoolExecutor(max_workers=min(len(ENTRIES), os.cpu_count() or 1)) as pool:
        photo = pool.submit(photograph, root / "explore")
        drawn = list(pool.map(draw, ENTRIES, folders))
        if photo.result():
            place_screenshot(root / "explore")
    page = [
        "# Gallery",
        "",
        "Every figure on this page is drawn by the documentation build itself, by the commands shown under it, "
        "from the examples bundled with metricdp and a fixed seed (`--seed 0`: reproducible, and therefore not "
        "private, which is right for a picture and wrong for real data). They need the `plot` and `geo` extras: "
        "`pip install -e '.[docs,plot,geo]'`.",
    ]
    for entry, folder, ok in zip(ENTRIES, folders, drawn, strict=True):
        page += ["", f"## {entry.title}", "", entry.text, "", "```sh", *entry.commands, "```", ""]
        if ok:
            page += figure_markdown(entry, folder)
        else:
            page.append("*This figure could not be drawn; the build log names the command that failed.*")
    with mkdocs_gen_files.open("gallery.md", "w") as fh:
        fh.write("\n".join(page) + "\n")
    if scratch:
        scratch.cleanup()
    log.info("gallery: %d entries drawn in %.1f s", sum(drawn), time.monotonic() - start)


main()
