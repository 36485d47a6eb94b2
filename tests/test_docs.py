"""The project's own documentation: it is in the repository, and what the code cites exists.

Code comments point to ``docs/architecture.md``, ``docs/observational-memory.md``,
``docs/configuration.md`` and ``docs/studio.md`` by anchor
(``docs/observational-memory.md#decision-order``); every anchor cited must be a heading of
that document, every link of the README and of docs/ must
reach a file of the repository (and a heading of it, when it names one), and nothing
tracked cites a document outside the repository (the contracts the project was built
against are not in a user's clone).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = ("architecture.md", "observational-memory.md", "configuration.md", "studio.md", "om-conformance.md",
        "install.md")
CITATION = re.compile(r"docs/([a-z-]+\.md)((?:#[a-z0-9-]+(?:, )?)*)")
ANCHOR = re.compile(r"#([a-z0-9-]+)")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
OUTSIDE = re.compile(r"\.\./shared|/work/shared|OBSERVATIONAL-MEMORY\.md|STUDIO-REST\.md|UI-MESSAGE-STREAM\.md"
                     r"|DESIGN\.md|STYLE\.md|design notes")


def tracked(*patterns: str) -> list[Path]:
    names = subprocess.run(["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    return [REPO / name for name in names if (REPO / name).is_file()]


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    found = set()
    for line in doc.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return found


def test_the_documents_the_code_cites_are_in_the_repository() -> None:
    for name in DOCS:
        assert (REPO / "docs" / name).stat().st_size > 1000, name


def test_every_anchor_the_code_cites_is_a_heading_of_its_document() -> None:
    known = {name: anchors(REPO / "docs" / name) for name in DOCS}
    cited = 0
    for path in tracked("dev_server", "tests/*.py", "bench", "migrations"):
        if path.suffix not in (".py", ".sql"):
            continue
        for match in CITATION.finditer(path.read_text()):
            assert match.group(1) in known, f"{path.relative_to(REPO)} cites docs/{match.group(1)}"
            for anchor in ANCHOR.findall(match.group(2)):
                cited += 1
                assert anchor in known[match.group(1)], f"{path.relative_to(REPO)}: docs/{match.group(1)}#{anchor}"
    assert cited >= 40  # the OM modules cite the OM document throughout


def test_every_link_of_the_readme_and_the_docs_reaches_a_file_and_its_heading() -> None:
    checked = 0
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in MARKDOWN_LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.exists(), f"{page.relative_to(REPO)} links to {target}, which is not there"
            if anchor:
                assert anchor in anchors(linked), f"{page.relative_to(REPO)} links to {target}: no such heading"
            checked += 1
    assert checked >= 20


def test_nothing_tracked_cites_a_document_outside_the_repository() -> None:
    offenders = [f"{path.relative_to(REPO)}:{n}" for path in tracked("dev_server", "tests", "bench", "migrations",
                                                                      "docs", "README.md", "Makefile", "scripts")
                 if path.suffix in (".py", ".sql", ".md", ".mjs", ".sh", "") and path != Path(__file__)
                 for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert offenders == []
