"""The API reference: one page per public module of ``metricdp``, found by walking the package.

Run by mkdocs-gen-files at build time (``mkdocs.yml``, plugin ``gen-files``); nothing it writes
is committed. Modules are found on disk (:func:`pkgutil.iter_modules` on each package's
folder), so nothing is imported and no module path is written here: a module that moves,
appears or goes away changes the reference with no edit. A module or package whose name
starts with an underscore is private and left out, with everything below it.
mkdocstrings renders each page from the docstrings (numpy style, ``mkdocs.yml``).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Iterator
from pathlib import Path

import mkdocs_gen_files

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "metricdp"


def public_modules(folder: Path, name: str) -> Iterator[tuple[str, bool]]:
    """``(dotted name, is_package)`` of ``name`` and of every public module below it, depth first."""
    yield name, True
    for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        dotted = f"{name}.{info.name}"
        if info.ispkg:
            yield from public_modules(folder / info.name, dotted)
        else:
            yield dotted, False


nav = mkdocs_gen_files.Nav()
for dotted, is_package in public_modules(SRC / PACKAGE, PACKAGE):
    parts = tuple(dotted.split("."))
    # a package's page is its folder's index, so that its modules' pages sit below it in the nav
    doc = Path(*parts, "index.md") if is_package else Path(*parts).with_suffix(".md")
    nav[parts] = doc.as_posix()
    with mkdocs_gen_files.open(Path("reference", doc), "w") as fh:
        # mkdocstrings writes the page's heading (the module's path, its anchor for cross-references)
        fh.write(f"::: {dotted}\n")

with mkdocs_gen_files.open("reference/SUMMARY.md", "w") as fh:
    fh.writelines(nav.build_literate_nav())
