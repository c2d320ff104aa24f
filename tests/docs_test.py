"""The documentation: docs/ builds strictly with mkdocs, and the build
fails on what a reader would trip over (a link to a missing page or anchor,
a repository path that does not exist); the README's links resolve."""

import re
import subprocess
import sys

import pytest
from constants import REPO_ROOT

pytest.importorskip("mkdocs", reason="mkdocs is not installed (the docs extra)")


def _build(config, site):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(config),
            "--site-dir",
            str(site),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_docs_build_strictly(tmp_path):
    proc = _build(REPO_ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pages = sorted(p.stem for p in (REPO_ROOT / "docs").glob("*.md"))
    built = sorted(p.stem for p in (tmp_path / "site").glob("*.html"))
    assert set(pages) <= set(built)


@pytest.mark.parametrize(
    "planted, named",
    [
        ("[a page](no-such-page.md)", "no-such-page.md"),
        ("[an anchor](scripts.md#no-such-section)", "no-such-section"),
        ("`modeling/no_such_module.py`", "modeling/no_such_module.py"),
    ],
    ids=["page", "anchor", "path"],
)
def test_a_broken_reference_fails_the_build(tmp_path, planted, named):
    """A copy of docs/ with one broken reference planted in a page: the
    strict build stops, naming it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for page in (REPO_ROOT / "docs").glob("*.md"):
        text = page.read_text()
        if page.name == "benchmarks.md":
            text += f"\nPlanted: {planted}\n"
        (docs / page.name).write_text(text)
    config = (REPO_ROOT / "mkdocs.yml").read_text()
    config = config.replace("docs_dir: docs", f"docs_dir: {docs}")
    config = config.replace(
        "scripts/docs_hooks.py", str(REPO_ROOT / "scripts" / "docs_hooks.py")
    )
    (tmp_path / "mkdocs.yml").write_text(config)
    proc = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Aborted" in output and named in output, output


def test_the_readme_links_resolve():
    """The README's relative links (to the docs pages) name files that
    exist; it stays short, the pages hold the rest."""
    text = (REPO_ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not link.startswith("http")]
    assert local
    for link in local:
        assert (REPO_ROOT / link).exists(), link
    assert len(text.splitlines()) <= 250
