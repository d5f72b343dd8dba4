#!/usr/bin/env python3
"""Checks the relative links of the Markdown docs: every linked file exists, and every `#anchor`
names a heading of its file, spelled as GitHub spells heading anchors.

Usage: scripts/check-doc-links.py [FILE.md ...]   (default: README.md and docs/**/*.md)
Prints one line per dead link (`file:line: target: why`) and exits 1 when there is one.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# A Markdown link or image: `[text](target)`; targets with a scheme are not checked.
LINK = re.compile(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def lines_outside_code(path):
    """(line number, text) of every line that is not inside a fenced code block."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading):
    """The anchor GitHub gives a heading: its rendered text, lower-cased, without punctuation
    (letters, digits, `-` and `_` stay), spaces turned into `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)  # emphasis markers
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    """Every heading anchor of a file, duplicates numbered `-1`, `-2` as GitHub numbers them."""
    if path not in cache:
        seen = {}
        found = set()
        for _, line in lines_outside_code(path):
            match = HEADING.match(line)
            if not match:
                continue
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[path] = found
    return cache[path]


def dead_links(path):
    for number, line in lines_outside_code(path):
        # Inline code spans are not links.
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                yield number, target, "no such file"
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                yield number, target, f"no heading with the anchor #{anchor}"


def main(args):
    files = [Path(a).resolve() for a in args] or [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    dead = 0
    for path in files:
        for number, target, why in dead_links(path):
            print(f"{path.relative_to(ROOT)}:{number}: {target}: {why}")
            dead += 1
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
