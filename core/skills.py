"""Skills: procedural memory in ``$HERMES_HOME/skills/**/SKILL.md``.

A skill is a folder holding ``SKILL.md`` (YAML frontmatter with ``name`` and
``description``, then markdown instructions) and optionally supporting files
in ``references/``, ``templates/``, ``scripts/`` and ``assets/``. Folders above
a skill are categories (``skills/devops/deploy-docker/SKILL.md``).

The model edits skills through ``skill_manage``, so everything here treats
names, paths and contents as untrusted: file paths are confined to the four
supporting folders of one skill (no absolute paths, no ``..``, no symlinks on
the way), writes are atomic and bounded to 100k characters, and a basic scan
refuses content that carries obvious credentials or shell injection (a download
piped into a shell, ``eval`` of input). Every refusal is a ``SkillError`` whose
message tells the model what to do instead.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import structlog
import yaml

from storage.errors import GatewayError

from ._files import atomic_write_text, folder_lock, read_text
from ._scan import find_credential, find_shell_injection
from ._skill_needs import SkillNeeds as SkillNeeds  # re-exported: the tools and the runtime build it

log = structlog.get_logger(__name__)

SKILL_FILE = "SKILL.md"
ALLOWED_SUBDIRS = ("references", "templates", "scripts", "assets")
MAX_SKILL_CHARS = 100_000
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_MAX_PATH_CHARS = 255
_PLATFORM = {"linux": "linux", "darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)


class SkillError(GatewayError):
    """A skill operation was refused or failed; the message says what to do instead."""


class SkillNotFoundError(SkillError):
    """No skill has that name."""


@dataclass(frozen=True)
class SkillMeta:
    """What the prompt's skill index and ``skills_list`` show; never the body."""

    name: str
    description: str
    #: the skill's SKILL.md
    path: Path
    #: the folders between skills/ and the skill, joined by "/"; None at top level
    category: str | None = None


def parse_frontmatter(text: str) -> tuple[dict[str, Any] | None, str]:
    """(frontmatter mapping or None when absent/broken, body)."""
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        return None, text
    end = text.find("\n---", 3)
    while end != -1 and text[end + 4 : end + 5] not in ("", "\n"):
        end = text.find("\n---", end + 4)
    if end == -1:
        return None, text
    try:
        meta = yaml.safe_load(text[4:end])
    except yaml.YAMLError:
        return None, text
    body = text[end + 4 :].lstrip("\n")
    return (meta if isinstance(meta, dict) else None), body


def _check_name(name: object, what: str = "name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SkillError(
            f"Invalid skill {what} {name!r}: use 1-64 characters of lowercase letters, digits, '-', '_' or "
            "'.', starting with a letter or digit (e.g. 'deploy-docker')."
        )
    return name


def _check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise SkillError(f"{what} is required and must be text.")
    if len(text) > MAX_SKILL_CHARS:
        raise SkillError(
            f"{what} is {len(text):,} characters; the limit is {MAX_SKILL_CHARS:,}. Keep SKILL.md focused and "
            "move long material into files under references/."
        )
    if "\x00" in text:
        raise SkillError(f"{what} contains a NUL character; skills are text files.")
    found = find_credential(text)
    if found is not None:
        raise SkillError(
            f"Refused: {what} looks like it contains {found}. Never store secrets in skills; refer to an "
            "environment variable or a secret store by name instead."
        )
    injection = find_shell_injection(text)
    if injection is not None:
        raise SkillError(
            f"Refused: {what} contains {injection}. A skill must not run code it has not seen: download to a "
            "file, inspect it, then run it; pass input as arguments, never through eval."
        )
    return text


def _check_skill_md(name: str, content: str) -> None:
    meta, body = parse_frontmatter(content)
    example = f"---\nname: {name}\ndescription: One line saying when to use this skill\n---\n# Title\n..."
    if meta is None:
        raise SkillError(f"SKILL.md must start with YAML frontmatter between '---' lines, like:\n{example}")
    if meta.get("name") != name:
        raise SkillError(f"The frontmatter 'name' must be {name!r} (the skill's name), like:\n{example}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"The frontmatter needs a non-empty 'description' string, like:\n{example}")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"The description is {len(description):,} characters; keep it under "
                         f"{MAX_DESCRIPTION_CHARS:,}.")
    if not body.strip():
        raise SkillError("SKILL.md needs instructions after the frontmatter.")


def _platform_ok(meta: dict[str, Any]) -> bool:
    platforms = meta.get("platforms")
    if not isinstance(platforms, list) or not platforms:
        return True
    return _PLATFORM in {str(p).lower() for p in platforms}


class SkillStore:
    """The skills of one ``$HERMES_HOME``, as one chat's agent sees them.

    ``needs`` says what that agent has; the skills it cannot follow (a toolset
    or an environment variable their frontmatter requires is missing) are left
    out of ``index`` and ``categories`` and refused by ``view``. Writes see
    every skill, so a hidden one is never overwritten by a namesake.
    """

    def __init__(self, home: Path, needs: SkillNeeds | None = None) -> None:
        self.root = Path(home) / "skills"
        self.needs = needs or SkillNeeds()

    # ------------------------------------------------------------------ read

    def index(self, category: str | None = None) -> list[SkillMeta]:
        """Every usable skill's metadata, sorted by name; ``category`` keeps one subtree."""
        metas = [meta for meta, front in self._skills().values() if not self.needs.unmet(front)]
        if category:
            prefix = category.strip("/")
            metas = [m for m in metas if m.category == prefix or (m.category or "").startswith(prefix + "/")]
        return sorted(metas, key=lambda m: m.name)

    def categories(self) -> dict[str | None, int]:
        """Category -> how many usable skills it holds (None: skills outside any category), sorted."""
        counts: dict[str | None, int] = {}
        for meta in self.index():
            counts[meta.category] = counts.get(meta.category, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or "")))

    def view(self, name: str, file_path: str | None = None) -> str:
        """SKILL.md, or one file inside the skill's supporting folders."""
        meta = self._get(name)
        missing = self.needs.unmet(self._skills()[meta.name][1])
        if missing:
            raise SkillError(f"Skill {meta.name!r} cannot be used here: it needs {' and '.join(missing)}.")
        path = meta.path if file_path in (None, "", SKILL_FILE) else self._confine(meta.path.parent, file_path)
        if meta.path.is_symlink() or not path.is_file():
            raise SkillError(f"Skill {meta.name!r} has no file {file_path!r}. Files: {self.files(name) or 'none'}.")
        text = read_text(path)
        if len(text) > MAX_SKILL_CHARS:
            text = text[:MAX_SKILL_CHARS] + f"\n[... cut at {MAX_SKILL_CHARS:,} characters]"
        return text

    def files(self, name: str) -> list[str]:
        """The skill's supporting files, as paths relative to its folder."""
        skill_dir = self._get(name).path.parent
        out: list[str] = []
        for sub in ALLOWED_SUBDIRS:
            base = skill_dir / sub
            if base.is_symlink() or not base.is_dir():
                continue
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if not (Path(dirpath) / d).is_symlink())
                for fn in sorted(filenames):
                    full = Path(dirpath) / fn
                    if full.is_file() and not full.is_symlink():
                        out.append(full.relative_to(skill_dir).as_posix())
        return out

    # ----------------------------------------------------------------- write

    def create(self, name: str, content: str, category: str | None = None) -> Path:
        name = _check_name(name)
        content = _check_text(content, "content")
        _check_skill_md(name, content)
        parts = [] if category in (None, "") else [_check_name(c, "category") for c in str(category).split("/")]
        with folder_lock(self.root):
            existing = self._skills().get(name)
            if existing is not None:
                raise SkillError(f"A skill named {name!r} already exists ({existing[0].path.parent}); use "
                                 "action 'patch' or 'edit' to change it.")
            skill_dir = self.root.joinpath(*parts, name)
            self._no_symlinks(self.root, skill_dir)
            if (skill_dir / SKILL_FILE).exists() or any(
                (self.root.joinpath(*parts[: i + 1]) / SKILL_FILE).exists() for i in range(len(parts))
            ):
                raise SkillError(f"{skill_dir} is already used by another skill; choose another name or category.")
            atomic_write_text(skill_dir / SKILL_FILE, content)
        log.info("skills.created", skill=name, category="/".join(parts) or None)
        return skill_dir / SKILL_FILE

    def edit(self, name: str, content: str) -> Path:
        """Rewrite SKILL.md completely."""
        content = _check_text(content, "content")
        with folder_lock(self.root):
            meta = self._get(name)
            _check_skill_md(meta.name, content)
            atomic_write_text(meta.path, content)
        log.info("skills.edited", skill=meta.name)
        return meta.path

    def patch(self, name: str, old_string: str, new_string: str, file_path: str | None = None,
              replace_all: bool = False) -> Path:
        """Replace the one exact occurrence of ``old_string`` (every one with ``replace_all``)
        in SKILL.md or a supporting file."""
        if not isinstance(old_string, str) or not old_string:
            raise SkillError("old_string is required: the exact text to replace, copied from skill_view.")
        if not isinstance(new_string, str):
            raise SkillError("new_string is required (use an empty string to delete old_string).")
        if old_string == new_string:
            raise SkillError("old_string and new_string are the same; nothing to change.")
        with folder_lock(self.root):
            meta = self._get(name)
            target = meta.path if file_path in (None, "", SKILL_FILE) else self._confine(meta.path.parent, file_path)
            if target.is_symlink() or not target.is_file():
                raise SkillError(f"Skill {meta.name!r} has no file {file_path!r}; use write_file to create it.")
            text = read_text(target)
            count = text.count(old_string)
            if count == 0:
                raise SkillError("old_string was not found. It must match the file exactly (whitespace and "
                                 "line breaks included); view the skill and copy the text.")
            if count > 1 and not replace_all:
                raise SkillError(f"old_string appears {count} times; include more surrounding text so it "
                                 "matches exactly once, or set replace_all to change every occurrence.")
            updated = _check_text(text.replace(old_string, new_string, -1 if replace_all else 1),
                                  "the patched file")
            if target == meta.path:
                _check_skill_md(meta.name, updated)
            atomic_write_text(target, updated)
        log.info("skills.patched", skill=meta.name, file=file_path or SKILL_FILE)
        return target

    def delete(self, name: str) -> Path:
        with folder_lock(self.root):
            skill_dir = self._get(name).path.parent
            self._no_symlinks(self.root, skill_dir)
            shutil.rmtree(skill_dir)
            self._prune_empty(skill_dir.parent, self.root)
        log.info("skills.deleted", skill=name)
        return skill_dir

    def write_file(self, name: str, file_path: str, file_content: str) -> Path:
        content = _check_text(file_content, "file_content")
        with folder_lock(self.root):
            meta = self._get(name)
            target = self._confine(meta.path.parent, file_path)
            if target.exists() and not target.is_file():
                raise SkillError(f"{file_path!r} is a folder, not a file.")
            atomic_write_text(target, content)
        log.info("skills.file_written", skill=meta.name, file=file_path)
        return target

    def remove_file(self, name: str, file_path: str) -> Path:
        with folder_lock(self.root):
            meta = self._get(name)
            target = self._confine(meta.path.parent, file_path)
            if not target.is_file():
                raise SkillError(f"Skill {meta.name!r} has no file {file_path!r}. Files: "
                                 f"{self.files(meta.name) or 'none'}.")
            target.unlink()
            self._prune_empty(target.parent, meta.path.parent)
        log.info("skills.file_removed", skill=meta.name, file=file_path)
        return target

    # --------------------------------------------------------------- helpers

    def _skills(self) -> dict[str, tuple[SkillMeta, dict[str, Any]]]:
        """name -> (meta, frontmatter). Symlinked folders and files are not followed."""
        found: dict[str, tuple[SkillMeta, dict[str, Any]]] = {}
        if not self.root.is_dir():
            return found
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            if SKILL_FILE not in filenames:
                continue
            # A skill's own folders hold supporting files, never nested skills.
            dirnames[:] = []
            skill_md = Path(dirpath) / SKILL_FILE
            if skill_md.parent == self.root or skill_md.is_symlink() or not skill_md.is_file():
                continue
            meta, _ = parse_frontmatter(read_text(skill_md))
            if meta is None:
                log.warning("skills.bad_frontmatter", path=str(skill_md))
                continue
            if not _platform_ok(meta):
                continue
            raw_name = meta.get("name")
            name = raw_name if isinstance(raw_name, str) and raw_name.strip() else skill_md.parent.name
            name = name.strip()[:MAX_NAME_CHARS]
            if name in found:
                log.warning("skills.duplicate_name", skill=name, path=str(skill_md))
                continue
            description = meta.get("description")
            rel_parent = skill_md.parent.parent.relative_to(self.root).as_posix()
            found[name] = (
                SkillMeta(
                    name=name,
                    description=(description if isinstance(description, str) else "").strip()[
                        :MAX_DESCRIPTION_CHARS
                    ],
                    path=skill_md,
                    category=None if rel_parent == "." else rel_parent,
                ),
                meta,
            )
        return found

    def _get(self, name: object) -> SkillMeta:
        if not isinstance(name, str) or not name.strip():
            raise SkillError("name is required: the skill's name as skills_list shows it.")
        entry = self._skills().get(name.strip())
        if entry is None:
            names = sorted(self._skills())
            listing = ", ".join(names[:50]) or "none yet"
            raise SkillNotFoundError(f"No skill named {name!r}. Available skills: {listing}.")
        return entry[0]

    def _confine(self, skill_dir: Path, file_path: object) -> Path:
        """``file_path`` inside one of the skill's supporting folders, or a SkillError."""
        allowed = ", ".join(f"{d}/" for d in ALLOWED_SUBDIRS)
        if not isinstance(file_path, str) or not file_path:
            raise SkillError(f"file_path is required: a relative path under {allowed} (e.g. 'references/api.md').")
        if len(file_path) > _MAX_PATH_CHARS or "\x00" in file_path or "\\" in file_path:
            raise SkillError(f"Invalid file_path {file_path[:80]!r}: use a short relative path with '/' separators.")
        pure = PurePosixPath(file_path)
        parts = file_path.split("/")
        if pure.is_absolute() or file_path.startswith("~"):
            raise SkillError(f"file_path must be relative to the skill folder, not absolute: {file_path!r}.")
        if any(p in ("", ".", "..") for p in parts):
            raise SkillError(f"file_path may not contain '..', '.' or empty parts: {file_path!r}.")
        if parts[0] not in ALLOWED_SUBDIRS or len(parts) < 2:
            raise SkillError(f"file_path must be a file under {allowed} of the skill, got {file_path!r}.")
        target = skill_dir.joinpath(*parts)
        self._no_symlinks(skill_dir, target)
        try:
            target.resolve().relative_to(skill_dir.resolve())
        except ValueError:
            raise SkillError(f"file_path {file_path!r} leads outside the skill folder.") from None
        return target

    @staticmethod
    def _no_symlinks(base: Path, target: Path) -> None:
        current = base
        for part in target.relative_to(base).parts:
            current = current / part
            if current.is_symlink():
                raise SkillError(f"{current.relative_to(base).as_posix()!r} is a symbolic link; skills may not "
                                 "follow links out of their folder.")

    @staticmethod
    def _prune_empty(folder: Path, stop: Path) -> None:
        """Remove now-empty folders from ``folder`` up to (not including) ``stop``."""
        while folder != stop and stop in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent
