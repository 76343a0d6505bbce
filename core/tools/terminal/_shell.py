"""Reading a shell command well enough to check it: simple commands, pipelines, redirections.

This is not a shell. It knows as much POSIX sh / bash syntax as ``dangerous`` needs to
see every simple command the way bash would run it: quotes and backslashes removed
(``s"u"do`` and ``\\rm`` are ``sudo`` and ``rm``), the operators that separate commands
(``; && || | |& & ( )`` and newlines, outside quotes), redirections with their targets,
comments, here-documents (their bodies are data, not commands), and the inner text of
every ``$(…)``, backtick, ``<(…)`` and ``>(…)``, which the checker reads as commands of
their own. Variables are left as written (``$HOME``); the checker decides what it can
expand. Text bash itself could not parse (an unbalanced quote or parenthesis) raises
``Unparsable``: a command nobody can read is one a person must look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._base import ToolError

#: separate commands; "|" and "|&" keep the pipeline going
_OPERATORS = ("&&", "||", "|&", ";;", "|", ";", "&", "(", ")")
#: longest first, so ">>" is not read as ">" twice
_REDIRECTS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<>", "<&", ">", "<")
#: the characters that may start something other than a plain word character
_SPECIAL = frozenset(" \t\r\n#\\'\"$`<>|&;()")
#: redirections that write to their target
WRITE_REDIRECTS = frozenset({"&>>", "&>", ">>", ">|", ">", "<>", ">&"})


class Unparsable(ToolError):
    """The command is not valid shell syntax (an unbalanced quote, ``$(`` or backtick)."""


@dataclass
class Word:
    """One word after quote removal; ``subs`` are the commands substituted inside it."""

    text: str
    subs: list[str] = field(default_factory=list)
    #: for the delimiter of a here-document: the document's text (the input of its command)
    heredoc: str | None = None


@dataclass
class Redirect:
    op: str
    target: Word


@dataclass
class SimpleCommand:
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    @property
    def subs(self) -> list[str]:
        """Every substituted command in its words and redirection targets."""
        found = [s for w in self.words for s in w.subs]
        return found + [s for r in self.redirects for s in r.target.subs]


#: a pipeline: its simple commands in order (the output of each goes into the next)
Pipeline = list[SimpleCommand]


def parse(text: str) -> list[Pipeline]:
    """The pipelines of ``text`` in order; raises ``Unparsable``."""
    pipelines: list[Pipeline] = []
    pipeline: Pipeline = []
    command = SimpleCommand()
    redirect_op: str | None = None
    for kind, value in _Lexer(text).tokens():
        if kind == "word":
            assert isinstance(value, Word)
            if redirect_op is not None:
                command.redirects.append(Redirect(redirect_op, value))
                redirect_op = None
            else:
                command.words.append(value)
            continue
        if redirect_op is not None:
            raise Unparsable(f"a redirection ({redirect_op}) without a target")
        if kind == "redirect":
            assert isinstance(value, str)
            redirect_op = value
            continue
        if command.words or command.redirects:
            pipeline.append(command)
        command = SimpleCommand()
        if value not in ("|", "|&") and pipeline:
            pipelines.append(pipeline)
            pipeline = []
    if redirect_op is not None:
        raise Unparsable(f"a redirection ({redirect_op}) without a target")
    if command.words or command.redirects:
        pipeline.append(command)
    if pipeline:
        pipelines.append(pipeline)
    return pipelines


class _Lexer:
    """Turns text into ("word", Word), ("op", str) and ("redirect", str) tokens."""

    def __init__(self, text: str) -> None:
        self._s = text
        self._i = 0
        self._out: list[tuple[str, Word | str]] = []
        self._buf: list[str] = []
        self._subs: list[str] = []
        self._in_word = False
        #: here-documents whose bodies start at the next newline: (delimiter, strip tabs)
        self._heredocs: list[tuple[Word, bool]] = []
        self._heredoc_op: str | None = None

    def tokens(self) -> list[tuple[str, Word | str]]:
        s = self._s
        while self._i < len(s):
            c = s[self._i]
            if c not in _SPECIAL:  # most characters: one set lookup, not a dozen startswith calls
                self._add(c)
                self._i += 1
            elif c in " \t\r":
                self._flush()
                self._i += 1
            elif c == "\n":
                self._flush()
                self._out.append(("op", ";"))
                self._i += 1
                self._skip_heredoc_bodies()
            elif c == "#" and not self._in_word:
                end = s.find("\n", self._i)
                self._i = len(s) if end < 0 else end
            elif c == "\\":
                self._backslash()
            elif c == "'":
                end = s.find("'", self._i + 1)
                if end < 0:
                    raise Unparsable("an unbalanced single quote")
                self._add(s[self._i + 1:end])
                self._i = end + 1
            elif c == '"':
                self._double_quoted()
            elif c == "$" or c == "`":
                self._dollar_or_backtick()
            elif c in "<>" and s.startswith("(", self._i + 1):
                inner = self._balanced(self._i + 2)
                self._subs.append(inner)
                self._add(f"{c}({inner})")
            elif (op := self._match(_REDIRECTS)) is not None:
                if self._buf and "".join(self._buf).isdigit():
                    self._buf.clear()  # "2>": the number names a file descriptor
                    self._in_word = False
                self._flush()
                self._out.append(("redirect", op))
                self._i += len(op)
                if op in ("<<", "<<-"):
                    self._heredoc_op = op
            elif (op := self._match(_OPERATORS)) is not None:
                self._flush()
                self._out.append(("op", op))
                self._i += len(op)
            else:
                self._add(c)
                self._i += 1
        self._flush()
        return self._out

    def _match(self, options: tuple[str, ...]) -> str | None:
        return next((o for o in options if self._s.startswith(o, self._i)), None)

    def _add(self, text: str) -> None:
        self._buf.append(text)
        self._in_word = True

    def _flush(self) -> None:
        if not self._in_word:
            return
        word = Word("".join(self._buf), self._subs)
        self._buf, self._subs, self._in_word = [], [], False
        if self._heredoc_op is not None:
            self._heredocs.append((word, self._heredoc_op == "<<-"))
            self._heredoc_op = None
        self._out.append(("word", word))

    def _backslash(self) -> None:
        nxt = self._s[self._i + 1:self._i + 2]
        if nxt == "\n":  # a line continuation joins the lines
            self._i += 2
            return
        self._add(nxt)
        self._i += 2

    def _double_quoted(self) -> None:
        s = self._s
        self._i += 1
        self._in_word = True
        while True:
            if self._i >= len(s):
                raise Unparsable("an unbalanced double quote")
            c = s[self._i]
            if c == '"':
                self._i += 1
                return
            if c == "\\" and s[self._i + 1:self._i + 2] in ('"', "\\", "$", "`", "\n"):
                if s[self._i + 1] != "\n":
                    self._add(s[self._i + 1])
                self._i += 2
            elif c in "$`":
                self._dollar_or_backtick()
            else:
                self._add(c)
                self._i += 1

    def _dollar_or_backtick(self) -> None:
        s, i = self._s, self._i
        if s.startswith("$(", i):
            inner = self._balanced(i + 2)
            self._subs.append(inner)
            self._add(f"$({inner})")
        elif s[i] == "`":
            end = i + 1
            while end < len(s) and s[end] != "`":
                end += 2 if s[end] == "\\" else 1
            if end >= len(s):
                raise Unparsable("an unbalanced backtick")
            inner = s[i + 1:end].replace("\\`", "`")
            self._subs.append(inner)
            self._add(f"$({inner})")
            self._i = end + 1
        elif s.startswith("${", i):
            end = s.find("}", i)
            if end < 0:
                raise Unparsable("an unbalanced ${")
            self._add(s[i:end + 1])
            self._i = end + 1
        else:
            self._add("$")
            self._i += 1

    def _balanced(self, start: int) -> str:
        """The text from ``start`` to the ``)`` that closes the ``(`` before it; moves past it."""
        s, depth, i = self._s, 1, start
        while i < len(s):
            c = s[i]
            if c == "\\":
                i += 2
                continue
            if c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    raise Unparsable("an unbalanced single quote")
                i = end + 1
                continue
            if c == '"':
                i += 1
                while i < len(s) and s[i] != '"':
                    i += 2 if s[i] == "\\" else 1
                if i >= len(s):
                    raise Unparsable("an unbalanced double quote")
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    self._i = i + 1
                    return s[start:i]
            i += 1
        raise Unparsable("an unbalanced parenthesis")

    def _skip_heredoc_bodies(self) -> None:
        """Here-document bodies are input for a command, not commands: kept on their delimiter word
        (a shell reading one runs it: the checker reads it then), skipped by the lexer."""
        s = self._s
        for word, strip_tabs in self._heredocs:
            lines: list[str] = []
            while self._i < len(s):
                end = s.find("\n", self._i)
                line = s[self._i:] if end < 0 else s[self._i:end]
                self._i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == word.text:
                    break
                lines.append(line)
            word.heredoc = "\n".join(lines)
        self._heredocs.clear()
