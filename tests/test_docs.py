"""The documentation's links and citations point at files the repository holds."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")  # [text](target#anchor)
CITED_PAGE = re.compile(r"\b((?:docs/[\w-]+|README)\.md)\b")


def _local_links(page: Path) -> list[str]:
    targets = LINK.findall(page.read_text())
    return [t for t in targets if "://" not in t and not t.startswith("mailto:")]


def test_every_local_link_of_the_readme_and_docs_resolves() -> None:
    broken = [
        f"{page.relative_to(REPO)} -> {target}"
        for page in PAGES
        for target in _local_links(page)
        if not (page.parent / target).exists()
    ]
    assert broken == []


def test_the_readme_stays_a_few_screens() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) <= 200


def test_code_cites_only_pages_in_the_repository() -> None:
    sources = [*REPO.joinpath("astune").rglob("*.py"), *REPO.joinpath("tests").glob("*.py")]
    sources.remove(Path(__file__).resolve())
    design = "DESIGN" + ".md"  # the project's design notes live outside the repository
    assert [str(p.relative_to(REPO)) for p in sources if design in p.read_text()] == []
    missing = sorted(
        f"{p.relative_to(REPO)}: {page}"
        for p in sources
        for page in set(CITED_PAGE.findall(p.read_text()))
        if not (REPO / page).is_file()
    )
    assert missing == []


def _documented_commands() -> list[tuple[str, list[str]]]:
    """Every ``python -m astune ...`` command of a fenced block in the README and docs/, as
    ``(page:line, argv after "astune")``, continued lines joined, ``&&`` lists split and comments
    dropped."""
    found = []
    for page in PAGES:
        lines, fenced = page.read_text().splitlines(), False
        for number, line in enumerate(lines, 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if not fenced or "python -m astune " not in line:
                continue
            text, at = line, number
            while text.endswith("\\"):
                text = text[:-1] + " " + lines[at]
                at += 1
            where = f"{page.relative_to(REPO)}:{number}"
            for part in text.split(" && "):  # a list of commands on one line
                if "python -m astune " in part:
                    command = part[part.index("python -m astune ") :]
                    found.append((where, shlex.split(command, comments=True)))
    return found


def test_every_documented_command_parses() -> None:
    from astune.cli.parser import build_parser

    commands = _documented_commands()
    assert len(commands) >= 20  # the walk finds the pages' commands
    refused = []
    for where, argv in commands:
        try:
            build_parser().parse_args(argv[3:])
        except SystemExit:
            refused.append(f"{where}: {shlex.join(argv)}")
    assert refused == []


def test_the_readmes_layout_names_every_package() -> None:
    """Each package under astune/ (a folder with an __init__.py) appears in the README's layout
    block as ``name/``: the block is how a reader finds where a job lives."""
    readme = (REPO / "README.md").read_text()
    layout = readme[readme.index("## Layout") :].split("```")[1]
    packages = sorted(p.parent.name for p in (REPO / "astune").glob("*/__init__.py"))
    assert len(packages) >= 15  # the glob finds the packages
    assert [name for name in packages if f"{name}/" not in layout] == []
