"""What the dangerous-list rules need to know about words: wrappers, interpreters, paths."""

from __future__ import annotations

import os
import re

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_SCRIPTING = re.compile(r"(?:python[0-9.]*|pypy[0-9.]*|perl|ruby|node|nodejs|php|deno|bun|pwsh|lua)")
#: options with which an interpreter takes its code from an argument, not from stdin
_CODE_OPTIONS = frozenset({"-c", "-m", "-e", "-E", "-r", "-p", "--eval", "--print", "--command"})
_DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "GET"})
_PATH_MAX = 4096
_VARIABLE = re.compile(r"\$\{?(HOME|HERMES_HOME|PWD)\b\}?")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=.*", re.DOTALL)

#: wrappers that run the rest of the line as a command: name -> options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "command": frozenset(), "builtin": frozenset(), "nohup": frozenset(), "time": frozenset(),
    "exec": frozenset({"-a"}), "!": frozenset(), "{": frozenset(), "then": frozenset(), "do": frozenset(),
    "else": frozenset(), "elif": frozenset(), "if": frozenset(), "while": frozenset(), "until": frozenset(),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "--pgid", "-u", "--uid"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "xargs": frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "-I", "-L", "--max-lines", "-n",
                        "--max-args", "-P", "--max-procs", "-s", "--max-chars", "--process-slot-var"}),
    "chronic": frozenset(), "unbuffer": frozenset(), "setsid": frozenset(), "flock": frozenset({"-w", "-E"}),
}


def strip_prefixes(words: list[str]) -> tuple[list[str], bool]:
    """The words from the command that actually runs: assignments and wrappers taken off.

    Also says whether ``xargs`` was among them (its command gets more arguments from input).
    ``command -v x`` only looks ``x`` up, so it is no command at all.
    """
    i, via_xargs = 0, False
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.fullmatch(word):
            i += 1
            continue
        name = os.path.basename(word)
        takes_value = _WRAPPERS.get(name)
        if takes_value is None:
            break
        i += 1
        if name == "command" and i < len(words) and words[i] in ("-v", "-V"):
            return [], False
        via_xargs = via_xargs or name == "xargs"
        while i < len(words):
            arg = words[i]
            if arg in takes_value:
                i += 2
            elif (arg.startswith("-") and len(arg) > 1) or (name == "env" and _ASSIGNMENT.fullmatch(arg)):
                i += 1
            else:
                break
        if name == "timeout" and i < len(words):
            i += 1  # the duration
        if name == "flock" and i < len(words):
            i += 1  # the lock file
    return words[i:], via_xargs


def downloads(name: str) -> bool:
    return name in _DOWNLOADERS


def reads_script_from_stdin(name: str, args: list[str]) -> bool | None:
    """None when ``name`` is no interpreter; else whether it reads its program from stdin
    (no code given with ``-c``/``-e``/``-m``, no script file, or ``-``/``-s``)."""
    if name in SHELLS:
        for i, arg in enumerate(args):
            if arg in ("-", "-s") or (arg.startswith("-") and not arg.startswith("--") and "s" in arg[1:]):
                return True
            if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
                return False
            if arg in ("-o", "-O", "+o", "+O"):
                continue
            if not arg.startswith(("-", "+")) and (i == 0 or args[i - 1] not in ("-o", "-O", "+o", "+O")):
                return False  # a script file
        return True
    if not _SCRIPTING.fullmatch(name):
        return None
    for arg in args:
        if arg == "-":
            return True
        if arg in _CODE_OPTIONS or any(arg.startswith(o + "=") for o in _CODE_OPTIONS if o.startswith("--")):
            return False
        if not arg.startswith("-"):
            return False  # a script file
    return True


def expand(text: str, *, base: str | None, home: str, user_home: str) -> str | None:
    """The real path a word names, or None when it depends on something unknown.

    ``~``, ``$HOME``, ``$HERMES_HOME`` and ``$PWD`` are expanded; any other variable or a
    ``$(…)`` makes it unknown. A glob names the folder its first wildcard is in.
    """
    if len(text) > _PATH_MAX:
        return None  # no such path can exist, and resolving it would cost time quadratic in its length
    if text == "~" or text.startswith("~/"):
        text = user_home + text[1:]
    elif text.startswith("~"):
        return None  # ~user
    known = {"HOME": user_home, "HERMES_HOME": home, "PWD": base}
    if any(known.get(name, "") is None for name in _VARIABLE.findall(text)):
        return None  # $PWD after a "cd" that could not be followed
    text = _VARIABLE.sub(lambda m: known.get(m[1]) or m[0], text)
    if "$" in text or "`" in text:
        return None
    wild = min((text.find(c) for c in "*?[{" if c in text), default=-1)
    if wild >= 0:
        text = text[:wild].rsplit("/", 1)[0] + "/" if "/" in text[:wild] else ""
    if not os.path.isabs(text):
        if base is None:
            return None
        text = os.path.join(base, text)
    return os.path.realpath(text)
