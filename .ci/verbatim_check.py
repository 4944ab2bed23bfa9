#!/usr/bin/env python3
"""Finds sentences of the upstream Resource Plane specification carried over verbatim into the repository.

Usage: verbatim_check.py [--repo DIR] [--spec FILE] [--min-words N]

--repo   the repository to check (default: this script's repository); its tracked files are
         the ones `git ls-files` names.
--spec   the upstream specification (default: ../shared/spec/resource-plane.md relative to the
         repository root). When it is absent the check is skipped: a note on stderr, exit 0.

Each prose sentence of the specification (paragraphs, list items, blockquotes and table cells,
split at `.`, `!`, `?` or `:` followed by white space) counts when it has at least N words
(default 8) and at least 4 words outside code spans, so headings, code blocks, table separators
and bare lists of identifiers are never checked. A sentence is reported when it appears in a
tracked text file, compared case-sensitively after normalising both sides the same way: white
space collapsed, a comment marker at the start of each line dropped (`///`, `//!`, `//`, `#`,
`*`, `>`, `--`), Markdown links reduced to their text, and backticks and asterisks removed, so a
sentence re-wrapped into a doc comment or stripped of its formatting is still found. Binary files
and proptest regression files are skipped.

Prints one `path:line: sentence` line per finding, then a count per file, and exits 1 when there
is any finding, 0 when there is none.
"""

import argparse
import bisect
import re
import subprocess
import sys
from pathlib import Path

COMMENT_MARKER = re.compile(r"^\s*(?:///|//!|//|#+|\*+|>+|--)?\s?")
LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")
TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’_-]*")


def canonical(text):
    """The form both sides are compared in: links as their text, no backticks or asterisks
    (code spans, bold, italics), white space collapsed."""
    text = LINK.sub(r"\1", text)
    text = text.replace("*", "").replace("`", "")
    return " ".join(text.split())


def prose_units(spec_text):
    """The specification's prose: one string per paragraph, list item, blockquote paragraph or
    table cell; front matter, headings, code blocks and table separators left out."""
    lines = spec_text.splitlines()
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
        lines = lines[end + 1 :]
    units, current, fenced = [], [], False

    def close():
        if current:
            units.append(" ".join(current))
            current.clear()

    for line in lines:
        stripped = line.strip()
        if stripped.startswith("```"):
            close()
            fenced = not fenced
            continue
        if fenced:
            continue
        if stripped.startswith(">"):
            stripped = stripped.lstrip(">").strip()
        if not stripped or stripped.startswith("#") or stripped == "---":
            close()
            continue
        if stripped.startswith("|"):
            close()
            if not TABLE_SEPARATOR.match(stripped):
                units.extend(cell.strip() for cell in re.split(r"(?<!\\)\|", stripped))
            continue
        if LIST_ITEM.match(stripped):
            close()
            stripped = LIST_ITEM.sub("", stripped, count=1)
        current.append(stripped)
    close()
    return units


def sentences(unit):
    """`unit` split after `.`, `!`, `?` or `:` followed by white space, outside code spans (a
    bold or italic sentence's closing asterisks are dropped first, so it ends at its stop)."""
    unit = unit.replace("*", "")
    out, start, in_code = [], 0, False
    for i, ch in enumerate(unit):
        if ch == "`":
            in_code = not in_code
        elif (
            not in_code
            and ch in ".!?:"
            and i + 1 < len(unit)
            and unit[i + 1].isspace()
        ):
            out.append(unit[start : i + 1])
            start = i + 1
    out.append(unit[start:])
    return [s.strip() for s in out if s.strip()]


def worth_checking(sentence, min_words):
    if len(WORD.findall(canonical(sentence))) < min_words:
        return False
    prose = re.sub(r"`[^`]*`", " ", sentence)
    return len(re.findall(r"[A-Za-z]{2,}", LINK.sub(r"\1", prose))) >= 4


def spec_sentences(spec_text, min_words):
    seen, out = set(), []
    for unit in prose_units(spec_text):
        for sentence in sentences(unit):
            if not worth_checking(sentence, min_words):
                continue
            key = canonical(sentence)
            if key not in seen:
                seen.add(key)
                out.append((key, " ".join(sentence.split())))
    return out


def tracked_text_files(repo):
    names = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z"],
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in names:
        if not name:
            continue
        path = name.decode("utf-8", "surrogateescape")
        if path.endswith(".proptest-regressions") or "proptest-regressions/" in path:
            continue
        full = repo / path
        try:
            data = full.read_bytes()
        except (IsADirectoryError, FileNotFoundError, PermissionError):
            continue
        if b"\0" in data[:8192]:
            continue
        try:
            yield path, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def searchable(text):
    """The file's canonical text and, for each line, where it starts in that text."""
    parts, starts, offset = [], [], 0
    for line in text.splitlines():
        piece = canonical(COMMENT_MARKER.sub("", line, count=1))
        starts.append(offset)
        if piece:
            parts.append(piece)
            offset += len(piece) + 1
    return " ".join(parts), starts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--spec", type=Path)
    parser.add_argument("--min-words", type=int, default=8)
    args = parser.parse_args()
    repo = args.repo.resolve()
    spec = args.spec or repo / ".." / "shared" / "spec" / "resource-plane.md"
    if not spec.is_file():
        print(f"verbatim_check: no upstream specification at {spec}; skipped", file=sys.stderr)
        return 0

    wanted = spec_sentences(spec.read_text(encoding="utf-8"), args.min_words)
    findings = {}
    for path, text in tracked_text_files(repo):
        haystack, starts = searchable(text)
        for key, sentence in wanted:
            at = haystack.find(key)
            while at != -1:
                line = bisect.bisect_right(starts, at)
                findings.setdefault(path, []).append((line, sentence))
                at = haystack.find(key, at + 1)

    for path in sorted(findings):
        for line, sentence in sorted(findings[path]):
            print(f"{path}:{line}: {sentence}")
    if findings:
        print(f"\n{sum(map(len, findings.values()))} verbatim sentence(s) of {spec.name} "
              f"({len(wanted)} checked):")
        for path in sorted(findings):
            print(f"  {path}: {len(findings[path])}")
        return 1
    print(f"verbatim_check: none of the {len(wanted)} sentences of {spec.name} checked "
          f"appears verbatim in {repo.name}'s tracked files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
