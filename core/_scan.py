"""A basic scan of text the agent wants to store: credentials, and (for skills) shell injection.

Memory entries and skills end up in every future prompt and on disk in plain
text, so obvious secrets are refused before they are written. This is a net for
accidents (a pasted .env, a key in an example), not a guarantee. The reasons it
returns name the kind of secret and the line, never the secret itself.

Skills are also instructions a later agent follows, so a skill may not teach it
to run code nobody has seen: a download piped into a shell or interpreter
(``curl ... | sh``, ``bash -c "$(curl ...)"``), or ``eval`` of input (a
variable, an argument, ``input()``). ``eval "$(ssh-agent -s)"``, the usual
shell idiom, evaluates a known program's output and passes.
"""

from __future__ import annotations

import re

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("an AWS access key id", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA)[0-9A-Z]{16}\b")),
    (
        "an AWS secret access key",
        re.compile(r"(?i)aws_?secret_?(?:access_?)?key\W{0,5}[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])"),
    ),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("a Slack token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    ("an OpenAI/Anthropic-style API key", re.compile(r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{20,}")),
    ("a Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("a Stripe key", re.compile(r"\b[rsp]k_live_[0-9A-Za-z]{20,}")),
    ("a Telegram bot token", re.compile(r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b")),
    ("a JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")),
)

# user:password@ in a URL; only random-looking passwords count ("user:password@localhost" is documentation).
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<value>[^\s:/@]{8,})@[^\s/]+", re.IGNORECASE)

# key = value where the value is long, random-looking and not a placeholder.
_ASSIGNMENT = re.compile(
    r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|bearer|private[_-]?key)"
    r"[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9/+_\-.]{20,})"
)


def _looks_random(value: str) -> bool:
    # Placeholders ("your_password_here", "${TOKEN}") are words; secrets mix digits, letters and many symbols.
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    return has_digit and has_alpha and len(set(value)) >= 10


def find_credential(text: str) -> str | None:
    """A sentence naming the first credential-like thing in ``text``, or None."""
    for kind, pattern in _PATTERNS:
        m = pattern.search(text)
        if m is not None:
            return f"{kind} (line {text.count(chr(10), 0, m.start()) + 1})"
    for kind, pattern in (("a URL with an embedded password", _URL_PASSWORD),
                          ("a hard-coded secret value", _ASSIGNMENT)):
        for m in pattern.finditer(text):
            if _looks_random(m.group("value")):
                return f"{kind} (line {text.count(chr(10), 0, m.start()) + 1})"
    return None


_DOWNLOAD = r"(?:curl|wget|fetch|iwr|irm|Invoke-WebRequest|Invoke-RestMethod)"
_RUNNER = r"(?:sudo\s+(?:-\S+\s+)*)?(?:(?:ba|z|da|k|fi|tc)?sh|python[0-9.]*|perl|ruby|node|php|iex|Invoke-Expression)"
_INJECTION: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a download piped into a shell", re.compile(rf"(?i)\b{_DOWNLOAD}\b[^\n|]*\|\s*{_RUNNER}\b")),
    ("a download run by a shell",
     re.compile(rf"(?i)(?:\b(?:(?:ba|z|da|k)?sh|source)|(?:^|(?<=\s))\.)\s+(?:-c\s+)?[\"']?(?:\$\(|<\()\s*{_DOWNLOAD}\b")),
    ("eval of a download", re.compile(rf"(?i)\beval\s+[\"']?(?:\$\(|`)\s*{_DOWNLOAD}\b")),
    ("eval of input", re.compile(r"\beval\s+[\"']?\$(?:\{?[A-Za-z_][A-Za-z0-9_]*|\{?[0-9@*])")),
    ("eval of input", re.compile(r"\b(?:eval|exec)\s*\(\s*(?:input|raw_input|sys\.argv|sys\.stdin|os\.environ|"
                                 r"os\.getenv|request\b|req\.)")),
)


def find_shell_injection(text: str) -> str | None:
    """A sentence naming the first shell-injection pattern in ``text`` and its line, or None."""
    for kind, pattern in _INJECTION:
        m = pattern.search(text)
        if m is not None:
            return f"{kind} (line {text.count(chr(10), 0, m.start()) + 1})"
    return None
