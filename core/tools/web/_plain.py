"""HTML to plain text: the fallback when trafilatura finds no article, and the cheap pre-pass
that drops scripts and styles before it runs.

Everything here is linear in the page's length whatever the markup: a page is the choice of
whoever wrote it, including pages built to make a parser slow. (The standard library's
``HTMLParser`` is not: 60 KB of ``<a `` takes it 45 s. So the fallback parses with lxml,
which trafilatura has loaded already, and a tag-stripping pass when even lxml gives up.)
"""

from __future__ import annotations

import html
import re

__all__ = ["crude_text", "html_title", "plain_text", "strip_invisible"]

#: elements whose content is never text a person reads
_HIDDEN = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object")
_HIDDEN_OPEN = re.compile(r"<(" + "|".join(_HIDDEN) + r")\b|<!--", re.I)
_CLOSE = {name: re.compile(rf"</{name}\s*>", re.I) for name in _HIDDEN}
_COMMENT_CLOSE = re.compile(r"-->")
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure",
    "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p",
    "pre", "section", "table", "tr", "ul",
})
_TITLE_OPEN = re.compile(r"<title\b[^<>]{0,200}>", re.I)
_TITLE_CLOSE = re.compile(r"</title\s*>", re.I)
#: a tag, for the last-resort pass; ``[^<>]`` keeps a page of lone ``<`` linear
_TAG = re.compile(r"<[^<>]{0,2000}>")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def strip_invisible(page: str) -> str:
    """``page`` without comments and the content of scripts, styles and the like.

    One pass: each opening is followed by a search for its own close from there, and the scan
    goes on after it; an element never closed hides the rest of the page (as in a browser).
    """
    out: list[str] = []
    pos = 0
    while (opening := _HIDDEN_OPEN.search(page, pos)) is not None:
        out.append(page[pos:opening.start()])
        name = opening.group(1)
        closer = _CLOSE[name.lower()] if name else _COMMENT_CLOSE
        closing = closer.search(page, opening.end())
        if closing is None:
            return "".join(out)
        pos = closing.end()
    out.append(page[pos:])
    return "".join(out)


def html_title(page: str) -> str | None:
    """The page's ``<title>``, unescaped and on one line."""
    opening = _TITLE_OPEN.search(page, 0, 200_000)
    if opening is None:
        return None
    closing = _TITLE_CLOSE.search(page, opening.end(), opening.end() + 2000)
    raw = page[opening.end():closing.start() if closing else opening.end() + 300]
    title = _SPACES.sub(" ", html.unescape(raw).replace("\n", " ")).strip()
    return title[:300] or None


def _tidy(text: str) -> str:
    lines = (_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def crude_text(page: str) -> str:
    """Tags dropped, entities read: for a page no parser makes sense of."""
    return _tidy(html.unescape(_TAG.sub(" ", page)))


def plain_text(page: str) -> str:
    """The text a person would read on ``page`` (scripts already stripped), paragraphs on lines of
    their own. Needs trafilatura's lxml: call it where trafilatura was imported (a worker thread)."""
    from trafilatura.utils import load_html

    tree = load_html(page)
    if tree is None:
        return crude_text(page)
    for element in list(tree.iter("title")):  # the title is given on a line of its own
        if element.getparent() is not None:
            element.drop_tree()
    for element in tree.iter(*_BLOCKS):
        element.tail = "\n" + (element.tail or "")
        element.text = "\n" + (element.text or "")
    return _tidy(str(tree.text_content()))
