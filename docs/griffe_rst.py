"""A griffe extension for the API reference: the reStructuredText markup of the docstrings as Markdown.

metricdp's docstrings are numpydoc, with Sphinx roles (``:func:`name```, ``:math:`x```) and
``.. math::`` blocks, which Markdown would show verbatim. Loaded by mkdocstrings
(``mkdocs.yml``, handler option ``extensions``), this rewrites each docstring as it is loaded,
in the site only (the source is untouched):

* ``:math:`x``` becomes inline math ``$x$`` and a ``.. math::`` block display math
  (``$$ ... $$``), both rendered by ``pymdownx.arithmatex`` and MathJax;
* every other role (``:func:``, ``:class:``, ``:mod:``, ``:meth:``, ``:data:``, ``:attr:``,
  ...) becomes a code span of its target, ``~`` keeping the last component only, as Sphinx shows it,
  linked to the target's entry in the reference where the target resolves (a full ``metricdp.``
  path, a name relative to the package, or a name in the docstring's scope) and is shown there.
  The link is an *optional* cross-reference of mkdocs-autorefs: a target that is not shown (a
  private module, a name that does not resolve) leaves the code span unlinked, with no warning.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
_TITLED = re.compile(r"(.*?)\s*<([^<>]+)>")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<first>.*)$")


def _target(obj: griffe.Object | None, name: str) -> str | None:
    """The full path that ``name`` (a role's target) names from ``obj``'s docstring, if any."""
    name = name.removesuffix("()")
    if name.split(".")[0] == "metricdp":
        return name
    if obj is None:
        return None
    if name.startswith("."):
        module = obj if obj.is_module else obj.module
        base = module.path if module.is_package else module.path.rsplit(".", 1)[0]
        dots = len(name) - len(name.lstrip("."))
        base = base.rsplit(".", dots - 1)[0] if dots > 1 else base
        return f"{base}.{name.lstrip('.')}"
    head, _, rest = name.partition(".")
    try:
        path = obj.resolve(head)
    except Exception:  # griffe's NameResolutionError, or an alias it cannot follow
        return None
    return f"{path}.{rest}" if rest else path


def _role(match: re.Match[str], obj: griffe.Object | None = None) -> str:
    tilde, name = match.groups()
    if titled := _TITLED.fullmatch(name):  # Sphinx's "title <target>"
        shown, name = titled.groups()
    else:
        shown = name.rsplit(".", 1)[-1] if tilde else name
    target = _target(obj, name)
    if target is None or not _PATH.fullmatch(target):
        return f"`{shown}`"
    return f'<autoref identifier="{target}" optional><code>{shown}</code></autoref>'


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


def markdown(text: str, obj: griffe.Object | None = None) -> str:
    """``text`` (``obj``'s docstring) with its reStructuredText roles and math directives in Markdown."""
    text = _math_blocks(text)
    text = _MATH_ROLE.sub(lambda m: f"${m[1]}$", text)
    return _ROLE.sub(lambda m: _role(m, obj), text)


class RstToMarkdown(griffe.Extension):
    """Rewrite every loaded docstring with :func:`markdown`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value, obj)
