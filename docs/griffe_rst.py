"""A griffe extension for the API reference: the reStructuredText markup of the docstrings as Markdown.

metricdp's docstrings are numpydoc, with Sphinx roles (``:func:`name```, ``:math:`x```) and
``.. math::`` blocks, which Markdown would show verbatim. Loaded by mkdocstrings
(``mkdocs.yml``, handler option ``extensions``), this rewrites each docstring as it is loaded,
in the site only (the source is untouched):

* ``:math:`x``` becomes inline math ``$x$`` and a ``.. math::`` block display math
  (``$$ ... $$``), both rendered by ``pymdownx.arithmatex`` and MathJax;
* every other role (``:func:``, ``:class:``, ``:mod:``, ``:meth:``, ``:data:``, ``:attr:``,
  ...) becomes a code span of its target, ``~`` keeping the last component only, as Sphinx shows it.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
_MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<first>.*)$")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    if tilde:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def _math_blocks(text: str) -> str:
    """``.. math::`` directives (an expression on the line and/or an indented block) as ``$$`` blocks."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _MATH_BLOCK.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match["indent"]
        body = [match["first"].strip()] if match["first"].strip() else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i].strip())
            i += 1
        while body and not body[-1]:
            body.pop()
        out += ["", f"{indent}$$", *(f"{indent}{line}" for line in body if line), f"{indent}$$", ""]
    return "\n".join(out)


def markdown(text: str) -> str:
    """``text`` (a docstring) with its reStructuredText roles and math directives in Markdown."""
    text = _math_blocks(text)
    text = _MATH_ROLE.sub(lambda m: f"${m[1]}$", text)
    return _ROLE.sub(_role, text)


class RstToMarkdown(griffe.Extension):
    """Rewrite every loaded docstring with :func:`markdown`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
