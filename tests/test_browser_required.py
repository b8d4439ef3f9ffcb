"""``PARIKSHA_REQUIRE_BROWSER`` (set by ``.ci/run``): where Chromium cannot run, the browser tests fail instead of
skipping. Checked on a probe module run by pytest in a subprocess whose PATH has no ``chromium``: one test in a
browser module (``pytestmark = BROWSER``), one that asks for the ``chromium`` fixture."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROBE = '''
import pytest

from tests.support.browser import BROWSER

pytestmark = BROWSER


def test_a_page(page):
    page.goto("about:blank")


@pytest.mark.usefixtures("chromium")
def test_chromium_itself():
    pass
'''


def _pytest_without_chromium(tmp_path: Path, require: str | None) -> subprocess.CompletedProcess:
    probe = tmp_path / "probe"
    (probe / "bin").mkdir(parents=True)  # the whole PATH: no chromium on it
    (probe / "conftest.py").write_text("from tests.conftest import browser, chromium, page, viewport  # noqa: F401\n",
                                       encoding="utf-8")
    (probe / "test_probe.py").write_text(PROBE, encoding="utf-8")
    env = {**os.environ, "PATH": str(probe / "bin"), "PYTHONPATH": str(REPO)}
    env.pop("PARIKSHA_REQUIRE_BROWSER", None)
    if require is not None:
        env["PARIKSHA_REQUIRE_BROWSER"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", str(probe)],
                          cwd=probe, env=env, capture_output=True, text=True, timeout=300)


def test_without_chromium_browser_tests_fail_when_required(tmp_path: Path) -> None:
    result = _pytest_without_chromium(tmp_path, "1")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "2 errors" in out and "passed" not in out and "skipped" not in out, out
    assert out.count("PARIKSHA_REQUIRE_BROWSER is set and no `chromium` on PATH") >= 2, out


@pytest.mark.parametrize("require", [None, "", "0"])
def test_without_chromium_browser_tests_skip_when_not_required(tmp_path: Path, require: str | None) -> None:
    result = _pytest_without_chromium(tmp_path, require)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "2 skipped" in out and "no `chromium` on PATH" in out, out


def test_ci_requires_the_browser() -> None:
    """.ci/run sets the variable before it runs the tests."""
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    exported = [i for i, line in enumerate(script) if line.startswith("export PARIKSHA_REQUIRE_BROWSER=1")]
    tested = [i for i, line in enumerate(script) if line.strip() == "make test"]
    assert exported and tested and exported[0] < tested[0]
