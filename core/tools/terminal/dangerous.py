"""The dangerous-command list: which terminal commands wait for a person's yes, and why.

``classify(command, workspace=..., home=...)`` returns a short reason a person can read,
or None for a command that may run unasked. A command is dangerous when any simple
command in it (every pipeline segment, every ``$(…)``, every ``bash -c '…'`` and ``eval``,
read the way bash would after quotes, backslashes, ``NAME=value`` assignments and
wrappers such as ``command``, ``env``, ``nice``, ``nohup``, ``time``, ``exec``, ``timeout``
and ``xargs`` are taken off, and ``/usr/bin/sudo`` is ``sudo``) is on this list:

======================================  ==============================================================
reason                                  what matches
======================================  ==============================================================
recursive delete outside the workspace  ``rm -r``/``-R``/``-rf``/``--recursive`` of a path outside the
                                        workspace (relative paths are read from the workspace, after
                                        any ``cd`` earlier in the command): ``/``, ``~``, ``..``,
                                        ``$HOME``, ``/*``; also ``find <outside> -delete`` or
                                        ``-exec rm -r``; the workspace itself counts as outside
recursive delete of a path that cannot  ``rm -r`` of a path built from a variable other than
be checked                              ``$HOME``/``$HERMES_HOME``/``$PWD``, a ``$(…)``, or ``xargs``
runs a command as another user          ``sudo``, ``doas``, ``su``, ``pkexec``, ``run0``
formats a filesystem                    ``mkfs``, ``mkfs.*``, ``mke2fs``, ``mkswap``, ``wipefs``
writes to a disk device                 ``dd of=/dev/…``, ``> /dev/sd*`` (and nvme, vd, xvd, hd, mmcblk,
                                        loop, md, dm-, mapper/, disk), ``cp``/``tee`` onto one
chmod -R 777 / permissions of /         ``chmod -R 777`` (or ``a+rwx``); ``chmod``/``chown``/``chgrp``
                                        of ``/`` or, recursively, of a top-level system folder
runs a script downloaded from the       ``curl|wget … | sh`` (bash, zsh, python, perl, ruby, node …
internet                                reading the script from the pipe), ``sh <(curl …)``,
                                        ``bash -c "$(curl …)"``, ``eval "$(wget …)"``, ``source <(…)``
runs a script from a pipe, which        anything but ``echo``/``printf`` piped into a shell that reads
cannot be checked                       its script from stdin (``… | base64 -d | sh``); what ``echo``,
                                        a here-document or a here-string hands a shell is checked as
                                        a command of its own (``bash <<< 'rm -rf ~'``)
force-push                              ``git push --force``/``-f``/``--force-with-lease``/``+ref``
shuts down or reboots the machine       ``shutdown``, ``reboot``, ``halt``, ``poweroff``, ``init 0|1|6``,
                                        ``systemctl``/``loginctl`` ``poweroff|reboot|halt|kexec|…``
kills init or every process             ``kill 1``, ``kill -9 1``, ``kill -9 -1``, ``pkill``/``killall``
                                        of ``init`` or ``systemd``, ``killall5``
writes into ~/.ssh                      a redirection (``>``, ``>>``, ``&>``), ``tee``, ``cp``, ``mv``,
writes into $HERMES_HOME                ``ln``, ``install``, ``rsync``, ``touch``, ``truncate``,
                                        ``mkdir``, ``rm`` or ``dd of=`` whose target is in ``~/.ssh``, or
                                        in ``$HERMES_HOME`` outside the workspace
reads the gateway's secrets or a         a word or ``<`` naming ``$HERMES_HOME/.env*`` or a ``*.db*`` file
private key; copies them whole          there (state.db and its WAL), ``~/.ssh/id_*``, ``*.pem``,
                                        ``*.key`` (``curl -d @…`` too); ``tar``/``zip``/``cp``/``rsync``/
                                        ``scp`` of ``$HERMES_HOME`` or ``~/.ssh`` itself
fork bomb                               a function that pipes into itself or calls itself in the
                                        background (``:(){ :|:& };:`` and renamed variants),
                                        ``fork while fork``, ``while True: os.fork()``
a computed command name                 a command whose name is a ``$(…)`` or backtick
could not be parsed to check it         unbalanced quotes or parentheses, nesting deeper than 5
======================================  ==============================================================

What is not caught: this reads the command's text, it does not run it. A script file the
command runs, an alias, a variable that holds a command (``$X -rf /``), or a program that
deletes things on its own is not seen. It stops the model's obvious accidents and asks a
person about them; it is not a sandbox.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from ._checks import Checker

__all__ = ["UNPARSABLE", "classify"]

UNPARSABLE = "could not be parsed to check it"


def classify(command: str, *, workspace: Path, home: Path, user_home: Path | None = None) -> str | None:
    """Why ``command`` needs a person's approval, or None when it may run.

    ``workspace`` is where it runs, ``home`` is ``$HERMES_HOME``, ``user_home`` is ``~``
    (default: the daemon's own home).
    """
    if _fork_bomb(command):
        return "fork bomb"
    checker = Checker(workspace=_real(workspace), home=_real(home),
                      user_home=_real(user_home if user_home is not None else Path.home()),
                      unparsable=UNPARSABLE)
    return checker.check(command)


def _real(path: Path) -> str:
    return os.path.realpath(os.path.expanduser(path))


#: ``name(){ … }`` and ``function name { … }``
#: (a name starts after a separator and is matched possessively: a long word costs one pass, not
#: one per character)
_FUNCTION = re.compile(
    r"(?:\bfunction\s+(?P<n1>[^\s(){}|&;'\"]++)\s*(?:\(\s*\))?"
    r"|(?<![^\s;&|(){}'\"`])(?P<n2>[^\s(){}|&;<>'\"]++)\s*\(\s*\))"
    r"\s*\{(?P<body>[^{}]*+)\}")
_FORK_LOOPS: Sequence[re.Pattern[str]] = (
    re.compile(r"\bfork\s+while\s+fork\b"),
    re.compile(r"\bwhile\s*\(?\s*(?:1|true|True)\s*\)?\s*[:{]?\s*(?:os\.)?fork\s*\("),
)


def _fork_bomb(command: str) -> bool:
    for match in _FUNCTION.finditer(command):
        name = re.escape(match["n1"] or match["n2"])
        alone = rf"(?<![\w:.\-]){name}(?![\w:.\-])"
        body = match["body"]
        # It pipes into itself (":|:") or starts itself in the background (":&"): exponential.
        if re.search(rf"{alone}\s*\|\s*{alone}", body) or re.search(rf"{alone}\s*&(?!&)", body):
            return True
    return any(p.search(command) for p in _FORK_LOOPS)
