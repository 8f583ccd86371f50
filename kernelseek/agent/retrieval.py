"""BM25 retrieval over a documentation folder the user supplies (for the equipped arm), with bm25s.

Files (.md, .txt, .rst, .html, .htm) are cut into passages at headings, then into pieces of at most
`size` characters; `Docs(folder).search(query, k)` returns the best passages with file and score.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

EXTS = (".md", ".txt", ".rst", ".html", ".htm")
_HEADING = re.compile(r"^(#{1,6} |\S.*\n[=\-~^]{3,}$)", re.M)
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Passage:
    file: str
    text: str
    score: float = 0.0


def passages(path: Path, size: int = 1500) -> list[Passage]:
    text = path.read_text(errors="replace")
    if path.suffix in (".html", ".htm"):
        text = re.sub(r"\s+\n", "\n", _TAG.sub(" ", text))
    starts = [m.start() for m in _HEADING.finditer(text)]
    cuts = sorted({0, *starts, len(text)})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        chunk = text[a:b].strip()
        while chunk:
            piece, chunk = chunk[:size], chunk[size:]
            if piece.strip():
                out.append(Passage(str(path), piece.strip()))
    return out


class Docs:
    """A BM25 index over every passage of a folder."""

    def __init__(self, folder, size: int = 1500):
        import bm25s
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"documentation folder {folder}: not found")
        files = sorted(p for p in self.folder.rglob("*") if p.is_file() and p.suffix.lower() in EXTS)
        self.passages = [x for f in files for x in passages(f, size)]
        self._bm25s = bm25s
        self.index = None
        if self.passages:
            tokens = bm25s.tokenize([p.text for p in self.passages], stopwords="en", show_progress=False)
            self.index = bm25s.BM25()
            self.index.index(tokens, show_progress=False)

    def search(self, query: str, k: int = 3) -> list[Passage]:
        if self.index is None or not query.strip():
            return []
        q = self._bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not any(len(ids) for ids in q.ids):
            return []
        k = min(k, len(self.passages))
        idx, scores = self.index.retrieve(q, k=k, show_progress=False)
        out = []
        for i, s in zip(idx[0], scores[0]):
            if s > 0:
                p = self.passages[int(i)]
                out.append(Passage(p.file, p.text, float(s)))
        return out
