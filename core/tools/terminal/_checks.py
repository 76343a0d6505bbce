"""The rules of the dangerous list, one simple command at a time (the list itself: ``dangerous``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from ._shell import WRITE_REDIRECTS, Pipeline, SimpleCommand, Unparsable, parse
from ._words import SHELLS, downloads, expand, reads_script_from_stdin, strip_prefixes

_MAX_DEPTH = 5

RM_OUTSIDE = "recursive delete outside the workspace"
RM_UNKNOWN = "recursive delete of a path that cannot be checked (it comes from a variable or another command)"
AS_ROOT = "runs a command as another user ({name})"
DOWNLOAD_SCRIPT = "runs a script downloaded from the internet"
DISK_DEVICE = "writes to a disk device"

_AS_ROOT = frozenset({"sudo", "doas", "su", "pkexec", "run0"})
_MKFS = frozenset({"mkfs", "mke2fs", "mkswap", "wipefs", "mkntfs", "mkdosfs"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
_SYSTEMCTL_POWER = frozenset({"poweroff", "reboot", "halt", "kexec", "rescue", "emergency"})
_INIT_NAMES = frozenset({"init", "systemd", "1"})
_MODE_777 = frozenset({"777", "0777", "a+rwx", "a=rwx", "ugo+rwx", "ugo=rwx"})
_SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc",
                          "/root", "/sbin", "/srv", "/sys", "/usr", "/var"})
_DISK = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|loop|md|dm-|mapper/|disk)")
#: commands whose non-option arguments are all files they write
_WRITES_ALL = frozenset({"tee", "touch", "truncate", "mkdir"})
#: commands whose last argument (or ``-t DIR``) is where they write
_WRITES_LAST = frozenset({"cp", "mv", "ln", "install", "rsync", "scp"})
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
#: commands that carry a whole folder somewhere else
_COPIES = frozenset({"tar", "zip", "cp", "rsync", "scp", "7z", "cpio"})


class Checker:
    """Checks one command line; ``base`` is the folder relative paths are read from (None: unknown)."""

    def __init__(self, *, workspace: str, home: str, user_home: str, unparsable: str) -> None:
        self.workspace = workspace
        self.home = home
        self.user_home = user_home
        self.unparsable = unparsable
        self._rules: dict[str, Callable[[str, list[str], str | None, bool], str | None]] = {
            "rm": self._rm, "find": self._find, "dd": self._dd, "chmod": self._chmod, "chown": self._chmod,
            "chgrp": self._chmod, "git": self._git, "kill": self._kill, "pkill": self._pkill,
            "killall": self._pkill, "init": self._init, "telinit": self._init, "systemctl": self._systemctl,
            "loginctl": self._systemctl,
        }

    def check(self, text: str, base: str | None = None, depth: int = 0) -> str | None:
        if depth >= _MAX_DEPTH:
            return self.unparsable
        try:
            pipelines = parse(text)
        except Unparsable:
            return self.unparsable
        base = self.workspace if base is None and depth == 0 else base
        for pipeline in pipelines:
            for position, command in enumerate(pipeline):
                reason = self._simple(command, pipeline[:position], base, depth)
                if reason:
                    return reason
                base = self._after_cd(command, base)
        return None

    # ------------------------------------------------------------------ one simple command

    def _simple(self, command: SimpleCommand, before: Pipeline, base: str | None, depth: int) -> str | None:
        for inner in command.subs:
            if reason := self.check(inner, base, depth + 1):
                return reason
        for redirect in command.redirects:
            if redirect.op in WRITE_REDIRECTS and (reason := self._write(redirect.target.text, base)):
                return reason
        words, via_xargs = strip_prefixes([w.text for w in command.words])
        if not words:
            return self._reads_secrets("", [r.target.text for r in command.redirects], base)
        if "$(" in words[0]:
            return "the command's name is computed by another command, so it cannot be checked"
        name, args = os.path.basename(words[0]), words[1:]
        if name in _AS_ROOT:
            return AS_ROOT.format(name=name)
        if name in _MKFS or name.startswith("mkfs."):
            return f"formats a filesystem ({name})"
        if name in _POWER:
            return "shuts down or reboots the machine"
        if name == "killall5":
            return "kills init or every process"
        if reason := self._interpreter(name, args, command, before, base, depth):
            return reason
        if name in SHELLS:
            code = _dash_c(args)
            if code is not None:
                return self.check(code, base, depth + 1)
        if name in _WRITES_ALL or name in _WRITES_LAST:
            if reason := self._writes(name, args, base):
                return reason
        if name in ("eval", "watch"):
            return self.check(" ".join(_watch_args(args) if name == "watch" else args), base, depth + 1)
        rule = self._rules.get(name)
        if rule is not None and (reason := rule(name, args, base, via_xargs)):
            return reason
        if name in ("cd", "pushd"):
            return None  # going there reads nothing; what runs there is checked with that base
        return self._reads_secrets(name, [*args, *(r.target.text for r in command.redirects)], base)

    def _reads_secrets(self, name: str, words: list[str], base: str | None) -> str | None:
        for word in words:
            if reason := self._secrets(word.partition("=")[2] if word.startswith("-") else word, base, name):
                return reason
        return None

    def _interpreter(self, name: str, args: list[str], command: SimpleCommand, before: Pipeline,
                     base: str | None, depth: int) -> str | None:
        """What an interpreter reads as its program: a download piped or handed to it (``<(…)``,
        ``$(…)``), or, for a shell, text piped, here-document or here-string."""
        stdin_script = reads_script_from_stdin(name, args)
        if before and stdin_script:
            earlier = [strip_prefixes([w.text for w in c.words])[0] for c in before]
            if any(words and downloads(os.path.basename(words[0])) for words in earlier):
                return DOWNLOAD_SCRIPT
            if name in SHELLS:
                last = earlier[-1]
                if last and os.path.basename(last[0]) in ("echo", "printf"):
                    texts = [a for a in last[1:] if not a.startswith("-")]
                    return next(filter(None, (self.check(t, base, depth + 1) for t in [*texts, " ".join(texts)])),
                                None)
                return "runs a script from a pipe, which cannot be checked"
        if stdin_script and name in SHELLS:
            for redirect in command.redirects:
                script = redirect.target.heredoc if redirect.op in ("<<", "<<-") else (
                    redirect.target.text if redirect.op == "<<<" else None)
                if script is not None and (reason := self.check(script, base, depth + 1)):
                    return reason
        if stdin_script is not None or name in ("eval", "source", "."):
            for word in command.words[1:]:
                if any(re.search(r"\b(?:curl|wget|fetch|aria2c)\b", inner) for inner in word.subs):
                    return DOWNLOAD_SCRIPT
        return None

    def _after_cd(self, command: SimpleCommand, base: str | None) -> str | None:
        words, _ = strip_prefixes([w.text for w in command.words])
        if not words or words[0] not in ("cd", "pushd"):
            return base
        targets = [a for a in words[1:] if not a.startswith("-") or a == "-"]
        if not targets:
            return self.user_home
        if targets[0] == "-":
            return None
        return self._path(targets[0], base)

    # ------------------------------------------------------------------ paths

    def _path(self, text: str, base: str | None) -> str | None:
        """The real path ``text`` names (a glob: the folder it is in), or None when it cannot be known."""
        return expand(text, base=base, home=self.home, user_home=self.user_home)

    def _outside(self, path: str, *, glob: bool) -> bool:
        """True unless ``path`` is inside the workspace (the workspace itself is outside; its contents
        through a glob are inside)."""
        if path == self.workspace:
            return not glob
        return not path.startswith(self.workspace.rstrip("/") + "/")

    def _secrets(self, word: str, base: str | None, name: str) -> str | None:
        """A read of the gateway's secrets (.env, state.db) or of a private key is as good as a leak
        of them (``curl -d @~/.hermes/.env …``), so it is asked about; so is copying or archiving
        $HERMES_HOME or ~/.ssh whole. Reading config.yaml or ~/.ssh/config is not."""
        word = word.lstrip("@")  # curl -d @file
        if not word or not any(c in word for c in "/~$.") or _DISK.match(word):
            return None
        path = self._path(word, base)
        if path is None:
            return None
        ssh = os.path.join(self.user_home, ".ssh")
        home = self.home.rstrip("/")
        if path in (ssh, home):
            return f"copies {'~/.ssh' if path == ssh else '$HERMES_HOME'} whole" if name in _COPIES else None
        folder, _, leaf = path.rpartition("/")
        if folder == ssh and not leaf.endswith(".pub") and (leaf.startswith("id_") or leaf.endswith((".pem", ".key"))):
            return "reads a private key in ~/.ssh"
        if folder == home and (leaf.startswith(".env") or ".db" in leaf):
            return "reads the gateway's secrets or conversations ($HERMES_HOME/.env, state.db)"
        return None

    def _write(self, target: str, base: str | None) -> str | None:
        """Why writing to ``target`` is dangerous, or None."""
        if _DISK.match(target):
            return DISK_DEVICE
        path = self._path(target, base)
        if path is None:
            return None  # a variable: too common in harmless commands to ask about
        if _DISK.match(path):
            return DISK_DEVICE
        ssh = os.path.join(self.user_home, ".ssh")
        if path == ssh or path.startswith(ssh + "/"):
            return "writes into ~/.ssh"
        in_home = path == self.home or path.startswith(self.home.rstrip("/") + "/")
        in_workspace = path == self.workspace or path.startswith(self.workspace.rstrip("/") + "/")
        if in_home and not in_workspace:
            return "writes into $HERMES_HOME (the gateway's own files)"
        return None

    def _writes(self, name: str, args: list[str], base: str | None) -> str | None:
        operands = _operands(args, with_value={"-t", "--target-directory", "-S", "--suffix", "-m", "--mode",
                                               "-o", "--owner", "-g", "--group", "-s", "--size", "-r",
                                               "--reference", "-e"})
        if name in _WRITES_ALL:
            targets = operands
        else:
            # the destination: "-t DIR", or the last of two or more operands
            targets = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "--target-directory")]
            targets += [a.split("=", 1)[1] for a in args if a.startswith("--target-directory=")]
            if not targets and len(operands) >= 2:
                targets = operands[-1:]
        for target in targets:
            if reason := self._write(target, base):
                return reason
        return None

    # ------------------------------------------------------------------ the rules

    def _rm(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        recursive, targets, options_done = False, [], False
        for arg in args:
            if not options_done and arg == "--":
                options_done = True
            elif not options_done and arg.startswith("--"):
                recursive = recursive or arg in ("--recursive", "--no-preserve-root")
            elif not options_done and arg.startswith("-") and len(arg) > 1:
                recursive = recursive or bool(set(arg[1:]) & {"r", "R"})
            else:
                targets.append(arg)
        if recursive:
            if via_xargs and not targets:
                return RM_UNKNOWN
            if reason := self._tree_targets(targets, base):
                return reason
        for target in targets:
            if reason := self._write(target, base):
                return reason
        return None

    def _tree_targets(self, targets: list[str], base: str | None, *, contents: bool = False) -> str | None:
        for target in targets:
            path = self._path(target, base)
            if path is None:
                return RM_UNKNOWN
            if self._outside(path, glob=contents or _is_glob(target)):
                return RM_OUTSIDE
        return None

    def _find(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        starts = []
        for arg in args:
            if arg.startswith("-") or arg in ("(", "!"):
                break
            starts.append(arg)
        starts = starts or ["."]
        if "-delete" in args:
            # find deletes what it finds under its start folders, never the start folder itself
            return self._tree_targets(starts, base, contents=True)
        for i, arg in enumerate(args):
            if arg in _FIND_EXEC:
                end = next((j for j in range(i + 1, len(args)) if args[j] in (";", "+")), len(args))
                for start in starts:
                    # "{}" is something under the start folder: check the command as if run on it
                    inner = [a.replace("{}", start.rstrip("/") + "/_") for a in args[i + 1:end]]
                    if inner and (reason := self._exec_words(inner, base)):
                        return reason
        return None

    def _exec_words(self, words: list[str], base: str | None) -> str | None:
        words, _ = strip_prefixes(words)
        if not words:
            return None
        name = os.path.basename(words[0])
        if name in _AS_ROOT:
            return AS_ROOT.format(name=name)
        rule = self._rules.get(name)
        if rule is None or name == "find":
            return None
        return rule(name, words[1:], base, False)

    def _dd(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        for arg in args:
            if arg.startswith("of=") and (reason := self._write(arg[3:], base)):
                return reason if reason != DISK_DEVICE else "dd writes to a disk device"
        return None

    def _chmod(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        recursive = any(a == "--recursive" or (a.startswith("-") and not a.startswith("--") and "R" in a)
                        for a in args)
        operands = _operands(args, with_value={"--reference"})
        if not operands:
            return None
        mode, targets = operands[0], operands[1:]
        if name == "chmod" and recursive and mode in _MODE_777:
            return "chmod -R 777 (makes every file writable by everyone)"
        for target in targets:
            path = self._path(target, base)
            if path == "/" or (recursive and path in _SYSTEM_DIRS):
                return f"{name} of a system folder ({path})"
        return None

    def _git(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
        if i >= len(args) or args[i] != "push":
            return None
        for arg in args[i + 1:]:
            if (arg in ("--force", "--mirror") or arg.startswith("--force-with-lease")
                    or (re.fullmatch(r"-[a-zA-Z]+", arg) and "f" in arg) or (arg.startswith("+") and len(arg) > 1)):
                return "force-push (rewrites the remote's history)"
        return None

    def _kill(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        signal_given, pids, i = False, [], 0
        while i < len(args):
            arg = args[i]
            if arg in ("-s", "-n", "--signal"):
                signal_given, i = True, i + 2
                continue
            if arg == "--":
                pids.extend(args[i + 1:])
                break
            if arg.startswith("-") and not signal_given and arg not in ("-l", "-L"):
                signal_given = True  # "-9", "-KILL": the signal; a later "-1" is a pid
            else:
                pids.append(arg)
            i += 1
        if any(p in ("1", "-1") for p in pids):
            return "kills init or every process"
        return None

    def _pkill(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        if any(a in _INIT_NAMES for a in args if not a.startswith("-")):
            return "kills init or every process"
        return None

    def _init(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        if any(a in ("0", "1", "6", "s", "S") for a in args):
            return "shuts down or reboots the machine"
        return None

    def _systemctl(self, name: str, args: list[str], base: str | None, via_xargs: bool) -> str | None:
        if any(a in _SYSTEMCTL_POWER for a in args):
            return "shuts down or reboots the machine"
        return None


def _dash_c(args: list[str]) -> str | None:
    """The code of ``sh -c CODE`` (``-c`` may be in a cluster: ``-ec``, ``-lc``), or None."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return None
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            rest = [a for a in args[i + 1:] if not (a.startswith("-") or a.startswith("+"))]
            return rest[0] if rest else None
        if not arg.startswith(("-", "+")):
            return None
        i += 2 if arg in ("-o", "-O", "+o", "+O") else 1
    return None


def _watch_args(args: list[str]) -> list[str]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in ("-n", "--interval", "-d", "-q") and not args[i].startswith("--differences") else 1
    return args[i:]


def _operands(args: list[str], *, with_value: set[str]) -> list[str]:
    """The non-option arguments (an option in ``with_value`` takes the next argument)."""
    found, i, options_done = [], 0, False
    while i < len(args):
        arg = args[i]
        if not options_done and arg == "--":
            options_done = True
        elif not options_done and arg in with_value:
            i += 1
        elif options_done or not arg.startswith("-") or arg == "-":
            found.append(arg)
        i += 1
    return found


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[{")
