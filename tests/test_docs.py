"""The README is what a user needs in the first hour, and the reference is in docs/: every relative link in
them leads to a file that exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


def test_every_relative_link_in_the_readme_and_docs_leads_somewhere():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    checked = 0
    for page in pages:
        text = re.sub(r"`[^`\n]*`", "", page.read_text(encoding="utf-8"))  # code is not a link: kernel[grid](...)
        for target in LINK.findall(text):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which is not there"
            checked += 1
    assert checked >= 12  # the README's reference table alone links a dozen pages
