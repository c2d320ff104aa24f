"""mkdocs hook (mkdocs.yml): every repository path a page names in a code
span (`modeling/backend.py`, `bench/glue.py`, `tests/testdata/cls_mrpc`)
must exist, or the strict build fails naming the page and the path.

mkdocs itself checks the links between pages and their anchors; these
paths are not links (the pages are read on GitHub and in the built site
alike), so this hook checks them.
"""

import logging
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Top-level folders and files of the repository a page may name.
_TOP = sorted(
    p.name
    for p in ROOT.iterdir()
    if not p.name.startswith(".") and p.name not in ("site",)
)
# A code span whose first path component is one of them: `bench/glue.py`,
# `modeling/training/jax_steps.py`, `setup.py`, `README.md`.
_SPAN = re.compile(r"`([^`\s]+)`")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
log = logging.getLogger("mkdocs.plugins.repository_paths")


def _named_paths(markdown):
    text = _FENCE.sub("", markdown)
    for span in _SPAN.findall(text):
        path = span.rstrip(".,:;")
        first = path.split("/")[0]
        if first not in _TOP or any(c in path for c in "*<>{}=$…"):
            continue
        if "/" not in path and "." not in path:
            continue  # a bare word that happens to be a folder's name
        yield path


def on_page_markdown(markdown, page, config, files):
    for path in _named_paths(markdown):
        if not (ROOT / path).exists():
            # A warning fails the strict build.
            log.warning(
                "Doc file '%s' names '%s', which is not in the repository.",
                page.file.src_uri,
                path,
            )
    return markdown
