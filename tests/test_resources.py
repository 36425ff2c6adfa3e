"""The one memory guard (:mod:`metricdp._resources`): one parser of ``METRICDP_MEMORY_LIMIT``,
a default from the memory this process can really get."""

from __future__ import annotations

from pathlib import Path

import pytest

import metricdp._resources as res
from metricdp import pointspace
from metricdp.errors import ResourceLimitError, ValidationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8GiB", 8 * 2**30),  # README's format
        ("100MiB", 100 * 2**20),
        ("2GB", 2e9),
        ("500kB", 5e5),
        ("1.5GiB", 1.5 * 2**30),
        ("1e9", 1e9),
        ("4096", 4096),
        (" 3 gib ", 3 * 2**30),
        ("8g", 8 * 2**30),
        ("1TiB", 2**40),
        ("12B", 12),
    ],
)
def test_sizes_with_units(monkeypatch: pytest.MonkeyPatch, text: str, expected: float) -> None:
    assert res.parse_bytes(text) == expected
    monkeypatch.setenv(res.ENV_VAR, text)
    assert res.memory_limit() == expected


@pytest.mark.parametrize("text", ["lots", "8 GiBs", "-1", "0", "0.5", "GiB", "1e999", "8GiB4", "nan", "1,000"])
def test_garbage_is_one_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(res.ENV_VAR, text)
    with pytest.raises(ValidationError, match=res.ENV_VAR) as info:
        res.check_allocation(1, "x")
    assert "\n" not in str(info.value) and repr(text) in str(info.value)


def test_there_is_one_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """pointspace (and through it every text command) asks the same guard: 8GiB was refused there."""
    assert pointspace.memory_limit is res.memory_limit
    assert pointspace.check_memory is res.check_allocation
    monkeypatch.setenv(res.ENV_VAR, "8GiB")
    pointspace.check_memory(2**30, "one GiB")
    with pytest.raises(ResourceLimitError, match=r"9 GiB of things need 9.7 GB; the limit is 8.6 GB"):
        pointspace.check_memory(9 * 2**30, "9 GiB of things")
    src = Path(res.__file__).parent
    readers = [p for p in src.rglob("*.py") if "os.environ.get(ENV_VAR)" in p.read_text(encoding="utf-8")
               or 'environ.get("METRICDP_MEMORY_LIMIT")' in p.read_text(encoding="utf-8")]
    assert readers == [Path(res.__file__)]


def test_an_empty_variable_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(res.ENV_VAR, "")
    assert res.memory_limit() == res.SAFETY_FRACTION * res.available_memory()


# ----------------------------------------------------------------------------- the default
@pytest.fixture(autouse=True)
def _fresh_reading():
    res.available_memory.cache_clear()
    yield
    res.available_memory.cache_clear()


def _cgroup(tmp_path: Path, proc: str, files: dict[str, str]) -> tuple[Path, Path]:
    root = tmp_path / "sys"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (tmp_path / "cgroup").write_text(proc)
    return tmp_path / "cgroup", root


def test_cgroup_v2_limit_of_the_group_and_its_ancestors(tmp_path: Path) -> None:
    proc, root = _cgroup(tmp_path, "0::/user.slice/app\n", {
        "cgroup.controllers": "memory\n",
        "memory.max": "max\n",
        "user.slice/memory.max": "3000000000\n",
        "user.slice/app/memory.max": "max\n",
    })
    assert res.cgroup_limit(proc, root) == 3e9  # the parent's limit binds the child
    (root / "user.slice/app/memory.max").write_text("1000000000\n")
    assert res.cgroup_limit(proc, root) == 1e9


def test_cgroup_v2_namespaced_root_and_unlimited(tmp_path: Path) -> None:
    proc, root = _cgroup(tmp_path, "0::/\n", {"cgroup.controllers": "", "memory.max": "2147483648\n"})
    assert res.cgroup_limit(proc, root) == 2**31  # a container whose group is the mount point
    (root / "memory.max").write_text("max\n")
    assert res.cgroup_limit(proc, root) is None


def test_cgroup_v1_limit_and_its_unlimited_value(tmp_path: Path) -> None:
    proc, root = _cgroup(tmp_path, "5:cpu:/\n4:memory:/docker/abc\n0::/\n", {
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
        "memory/docker/abc/memory.limit_in_bytes": "536870912\n",
    })
    assert res.cgroup_limit(proc, root) == 2**29
    (root / "memory/docker/abc/memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert res.cgroup_limit(proc, root) is None
    assert res.cgroup_limit(tmp_path / "absent", root) is None


def test_default_is_a_fraction_of_the_smallest_of_ram_rlimit_and_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(res.ENV_VAR, raising=False)
    monkeypatch.setattr(res, "_physical", lambda: 64e9)
    monkeypatch.setattr(res, "_rlimit_as", lambda: None)
    monkeypatch.setattr(res, "cgroup_limit", lambda: None)
    assert res.memory_limit() == 32e9
    monkeypatch.setattr(res, "_rlimit_as", lambda: 10e9)
    assert res.memory_limit() == 32e9  # read once per process
    res.available_memory.cache_clear()
    assert res.memory_limit() == 5e9
    monkeypatch.setattr(res, "cgroup_limit", lambda: 4e9)
    res.available_memory.cache_clear()
    assert res.memory_limit() == 2e9
    with pytest.raises(ResourceLimitError, match=r"plan need 3 GB; the limit is 2 GB \(set METRICDP_MEMORY_LIMIT"):
        res.check_allocation(3e9, "plan")
    monkeypatch.setattr(res, "_physical", lambda: None)
    monkeypatch.setattr(res, "_rlimit_as", lambda: None)
    monkeypatch.setattr(res, "cgroup_limit", lambda: None)
    res.available_memory.cache_clear()
    assert res.memory_limit() == res.SAFETY_FRACTION * res._FALLBACK


def test_rlimit_as_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    monkeypatch.setattr(resource, "getrlimit", lambda _which: (123_456_789, resource.RLIM_INFINITY))
    assert res._rlimit_as() == 123_456_789
    monkeypatch.setattr(resource, "getrlimit", lambda _which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert res._rlimit_as() is None


def test_a_nan_estimate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(res.ENV_VAR, "1GiB")
    with pytest.raises(ResourceLimitError):
        res.check_allocation(float("nan"), "an overflowed estimate")


@pytest.mark.parametrize(("cpus", "threads"), [(1, 1), (3, 3), (64, res.SCAN_THREADS)])
def test_scan_threads_follow_the_usable_processors(monkeypatch: pytest.MonkeyPatch, cpus: int, threads: int) -> None:
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 128)  # the affinity, not the machine, counts
    assert res.usable_cpus() == cpus
    assert res.scan_threads() == threads
