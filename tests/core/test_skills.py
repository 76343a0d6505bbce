"""Skills: index, view, the six manage actions, path confinement, limits, credential scan, the tools."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.skills import MAX_SKILL_CHARS, SkillError, SkillNotFoundError, SkillStore, parse_frontmatter
from core.tools._base import ToolContext, ToolError
from core.tools.skills_tools import SKILL_TOOLS
from storage import StateStore

TOOLS = {t.name: t for t in SKILL_TOOLS}


def skill_md(name: str, description: str = "Use when deploying with docker compose", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n1. Step one.\n2. Step two.\n{body}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def skills(home: Path) -> SkillStore:
    return SkillStore(home)


def _ctx(home: Path, store: StateStore) -> ToolContext:
    return ToolContext(session_id="s1", platform="cli", home=home, store=store)


def _all_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != ".lock"}


# ------------------------------------------------------------- index / view


def test_create_index_view(skills: SkillStore, home: Path) -> None:
    path = skills.create("deploy-docker", skill_md("deploy-docker"), category="devops")
    skills.create("git-style", skill_md("git-style", "Commit message rules"))
    assert path == home / "skills" / "devops" / "deploy-docker" / "SKILL.md"
    index = skills.index()
    assert [(m.name, m.description, m.category) for m in index] == [
        ("deploy-docker", "Use when deploying with docker compose", "devops"),
        ("git-style", "Commit message rules", None),
    ]
    assert index[0].path == path
    assert [m.name for m in skills.index("devops")] == ["deploy-docker"]
    assert skills.view("git-style") == skill_md("git-style", "Commit message rules")


def test_index_skips_broken_hidden_foreign_platform_and_symlinked_skills(
    skills: SkillStore, home: Path, tmp_path: Path
) -> None:
    root = home / "skills"
    (root / "broken").mkdir(parents=True)
    (root / "broken" / "SKILL.md").write_text("---\nname: [unclosed\n---\nbody")
    (root / "nofront").mkdir()
    (root / "nofront" / "SKILL.md").write_text("just text")
    (root / ".hub" / "cached").mkdir(parents=True)
    (root / ".hub" / "cached" / "SKILL.md").write_text(skill_md("cached"))
    (root / "winonly").mkdir()
    (root / "winonly" / "SKILL.md").write_text(
        "---\nname: winonly\ndescription: d\nplatforms: [windows]\n---\nbody")
    outside = tmp_path / "outside-skill"
    outside.mkdir()
    (outside / "SKILL.md").write_text(skill_md("outside"))
    os.symlink(outside, root / "linked")
    (root / "dirname-only").mkdir()
    (root / "dirname-only" / "SKILL.md").write_text("---\ndescription: no name field\n---\nbody")
    assert [m.name for m in skills.index()] == ["dirname-only"]
    with pytest.raises(SkillNotFoundError, match="dirname-only"):
        skills.view("outside")


def test_parse_frontmatter() -> None:
    meta, body = parse_frontmatter("---\nname: a\ndescription: b\n---\n# Body\n---\nmore")
    assert meta == {"name": "a", "description": "b"} and body == "# Body\n---\nmore"
    assert parse_frontmatter("---\nname: a\n") == (None, "---\nname: a\n")
    assert parse_frontmatter("---\n- a list\n---\nx")[0] is None


def test_view_supporting_file_and_files_listing(skills: SkillStore) -> None:
    skills.create("api", skill_md("api"))
    skills.write_file("api", "references/endpoints.md", "GET /v1/things")
    skills.write_file("api", "scripts/check.sh", "#!/bin/sh\necho ok\n")
    assert skills.files("api") == ["references/endpoints.md", "scripts/check.sh"]
    assert skills.view("api", "references/endpoints.md") == "GET /v1/things"
    with pytest.raises(SkillError, match="no file"):
        skills.view("api", "references/missing.md")


# ------------------------------------------------------------------- create


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        ("Bad Name", skill_md("Bad Name"), "Invalid skill name"),
        ("../escape", skill_md("../escape"), "Invalid skill name"),
        ("x" * 65, skill_md("x" * 65), "Invalid skill name"),
        ("ok", "no frontmatter at all", "frontmatter"),
        ("ok", skill_md("other"), "must be 'ok'"),
        ("ok", "---\nname: ok\n---\nbody", "description"),
        ("ok", "---\nname: ok\ndescription: d\n---\n   ", "instructions"),
    ],
)
def test_create_validates(skills: SkillStore, name: str, content: str, match: str) -> None:
    with pytest.raises(SkillError, match=match):
        skills.create(name, content)
    assert skills.index() == []


def test_create_refuses_duplicates_and_bad_categories(skills: SkillStore) -> None:
    skills.create("dup", skill_md("dup"), category="a")
    with pytest.raises(SkillError, match="already exists"):
        skills.create("dup", skill_md("dup"), category="b")
    with pytest.raises(SkillError, match="category"):
        skills.create("fine", skill_md("fine"), category="../../etc")
    with pytest.raises(SkillError, match="category"):
        skills.create("fine", skill_md("fine"), category="/abs")
    # A skill folder cannot become a category of another skill.
    with pytest.raises(SkillError, match="already used"):
        skills.create("inner", skill_md("inner"), category="a/dup")


def test_size_limit(skills: SkillStore) -> None:
    big = skill_md("big", body="a" * MAX_SKILL_CHARS)
    with pytest.raises(SkillError, match="100,000"):
        skills.create("big", big)
    skills.create("big", skill_md("big"))
    with pytest.raises(SkillError, match="100,000"):
        skills.write_file("big", "assets/blob.txt", "b" * (MAX_SKILL_CHARS + 1))
    skills.write_file("big", "assets/blob.txt", "b" * (MAX_SKILL_CHARS - 1) + "Z")
    with pytest.raises(SkillError, match="100,000"):
        skills.patch("big", "Z", "ZZ", file_path="assets/blob.txt")
    with pytest.raises(SkillError, match="100,000"):
        skills.patch("big", "Step one.", "x" * MAX_SKILL_CHARS)


@pytest.mark.parametrize(
    "secret",
    [
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz012345",
        "slack: xoxb-123456789012-abcdefghijkl",
        "password = 'q8Zr2LmX9vT4wKp7Yh3N'",
        "https://admin:s3cr3tPassw0rd@db.internal/prod",
    ],
)
def test_credential_dumps_are_refused(skills: SkillStore, home: Path, secret: str) -> None:
    with pytest.raises(SkillError, match="Never store secrets") as err:
        skills.create("leaky", skill_md("leaky", body=secret))
    assert "AKIAIOSFODNN7EXAMPLE" not in str(err.value) and "q8Zr2LmX9" not in str(err.value)
    skills.create("clean", skill_md("clean"))
    with pytest.raises(SkillError, match="Never store secrets"):
        skills.write_file("clean", "references/env.md", f"Setup:\n{secret}\n")
    assert _all_files(home / "skills") == {"clean/SKILL.md"}


def test_normal_content_mentioning_keys_is_accepted(skills: SkillStore) -> None:
    body = (
        "Set `api_key: ${OPENAI_API_KEY}` in config.yaml.\n"
        "token = os.environ['GITHUB_TOKEN']\n"
        "password: <your password here>\n"
        "See https://docs.example.com/auth for details.\n"
        "DATABASE_URL=postgresql://user:password@localhost:5432/app\n"
    )
    skills.create("config-help", skill_md("config-help", body=body))
    assert "OPENAI_API_KEY" in skills.view("config-help")


# ------------------------------------------------------------ patch / edit


def test_patch_exact_unique(skills: SkillStore) -> None:
    skills.create("p", skill_md("p", body="Note: run twice.\nNote: run twice.\n"))
    before = skills.view("p")
    with pytest.raises(SkillError, match="appears 2 times"):
        skills.patch("p", "Note: run twice.", "Note: run once.")
    with pytest.raises(SkillError, match="not found"):
        skills.patch("p", "step one.", "Step 1.")  # case differs: exact match only
    with pytest.raises(SkillError, match="required"):
        skills.patch("p", "", "x")
    assert skills.view("p") == before
    skills.patch("p", "1. Step one.", "1. Step one, carefully.")
    assert "1. Step one, carefully.\n2. Step two." in skills.view("p")
    # Including more context makes a repeated string unique.
    skills.patch("p", "Step two.\nNote: run twice.", "Step two.\nNote: run once.")
    assert skills.view("p").count("Note: run twice.") == 1


def test_patch_cannot_break_frontmatter(skills: SkillStore) -> None:
    skills.create("keep", skill_md("keep"))
    with pytest.raises(SkillError, match="must be 'keep'"):
        skills.patch("keep", "name: keep", "name: renamed")
    with pytest.raises(SkillError, match="frontmatter"):
        skills.patch("keep", "---\nname", "name")
    assert skills.view("keep") == skill_md("keep")


def test_patch_supporting_file(skills: SkillStore) -> None:
    skills.create("s", skill_md("s"))
    skills.write_file("s", "templates/report.md", "Title: {title}\nBody: {body}\n")
    skills.patch("s", "Body: {body}", "Summary: {summary}", file_path="templates/report.md")
    assert skills.view("s", "templates/report.md") == "Title: {title}\nSummary: {summary}\n"
    with pytest.raises(SkillError, match="write_file"):
        skills.patch("s", "a", "b", file_path="templates/none.md")


def test_edit_rewrites_skill_md(skills: SkillStore) -> None:
    skills.create("e", skill_md("e"))
    skills.edit("e", skill_md("e", "New description"))
    assert skills.index()[0].description == "New description"
    with pytest.raises(SkillError):
        skills.edit("e", "no frontmatter")
    with pytest.raises(SkillNotFoundError):
        skills.edit("missing", skill_md("missing"))


# ---------------------------------------------------- files and delete


def test_write_and_remove_file_prunes_empty_folders(skills: SkillStore, home: Path) -> None:
    skills.create("w", skill_md("w"))
    skills.write_file("w", "references/deep/nested/notes.md", "n")
    skills.write_file("w", "references/deep/nested/notes.md", "overwritten")
    assert skills.view("w", "references/deep/nested/notes.md") == "overwritten"
    skills.remove_file("w", "references/deep/nested/notes.md")
    assert not (home / "skills" / "w" / "references").exists()
    with pytest.raises(SkillError, match="no file"):
        skills.remove_file("w", "references/deep/nested/notes.md")


def test_delete_removes_the_skill_and_its_empty_category(skills: SkillStore, home: Path) -> None:
    skills.create("d", skill_md("d"), category="ops/old")
    skills.write_file("d", "assets/a.txt", "a")
    skills.create("k", skill_md("k"), category="ops")
    skills.delete("d")
    assert [m.name for m in skills.index()] == ["k"]
    assert not (home / "skills" / "ops" / "old").exists()
    assert (home / "skills" / "ops" / "k" / "SKILL.md").exists()
    with pytest.raises(SkillNotFoundError):
        skills.delete("d")


TRAVERSALS = [
    "../SKILL.md",
    "../../../etc/passwd",
    "references/../../other/SKILL.md",
    "references/../SKILL.md",
    "/etc/passwd",
    "/tmp/x.md",
    "~/.ssh/authorized_keys",
    "references\\..\\..\\x",
    "SKILL.md",
    "notes.md",
    "references",
    "references/",
    "references//x.md",
    "references/./x.md",
    "secrets/x.md",
    "references/x\x00.md",
    "",
]


@pytest.mark.parametrize("file_path", TRAVERSALS)
def test_path_traversal_is_rejected_everywhere(skills: SkillStore, home: Path, file_path: str) -> None:
    skills.create("victim", skill_md("victim"))
    skills.create("other", skill_md("other"))
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    with pytest.raises(SkillError):
        skills.write_file("victim", file_path, "pwned")
    with pytest.raises(SkillError):
        skills.remove_file("victim", file_path)
    if file_path != "SKILL.md":
        with pytest.raises(SkillError):
            skills.patch("victim", "Step", "Pwned", file_path=file_path)
        if file_path not in ("",):
            with pytest.raises(SkillError):
                skills.view("victim", file_path)
    after = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert after == before


def test_symlinks_out_of_the_skill_are_refused(skills: SkillStore, tmp_path: Path) -> None:
    skills.create("s", skill_md("s"))
    skill_dir = skills.index()[0].path.parent
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.md").write_text("original")
    os.symlink(outside, skill_dir / "references")
    (skill_dir / "assets").mkdir()
    os.symlink(outside / "target.md", skill_dir / "assets" / "link.md")

    for call in (
        lambda: skills.write_file("s", "references/new.md", "x"),
        lambda: skills.view("s", "references/target.md"),
        lambda: skills.patch("s", "original", "changed", file_path="references/target.md"),
        lambda: skills.write_file("s", "assets/link.md", "x"),
        lambda: skills.view("s", "assets/link.md"),
        lambda: skills.remove_file("s", "assets/link.md"),
    ):
        with pytest.raises(SkillError, match="symbolic link"):
            call()
    assert sorted(p.name for p in outside.iterdir()) == ["target.md"]
    assert (outside / "target.md").read_text() == "original"
    assert skills.files("s") == []  # links are not listed either


def test_symlinked_skill_md_is_not_followed(skills: SkillStore, home: Path, tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text("root:x:0:0")
    folder = home / "skills" / "sneaky"
    folder.mkdir(parents=True)
    os.symlink(tmp_path / "passwd", folder / "SKILL.md")
    assert skills.index() == []
    with pytest.raises(SkillNotFoundError):
        skills.view("sneaky")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    file_path=st.one_of(
        st.text(max_size=40),
        st.lists(st.sampled_from(["references", "assets", "..", ".", "", "~", "/", "x.md", "SKILL.md",
                                  "scripts", "a\\b", "\x00", "etc"]), min_size=1, max_size=6).map("/".join),
    )
)
def test_fuzzed_paths_stay_inside_the_skill(tmp_path: Path, file_path: str) -> None:
    home = tmp_path / "fuzz"
    store = SkillStore(home)
    if not store.index():
        store.create("f", skill_md("f"))
    skill_dir = home / "skills" / "f"
    try:
        written = store.write_file("f", file_path, "data")
    except SkillError:
        pass
    else:
        assert skill_dir.resolve() in written.resolve().parents
        assert written.relative_to(skill_dir).parts[0] in ("references", "templates", "scripts", "assets")
        store.remove_file("f", file_path)
    for call in (lambda: store.view("f", file_path), lambda: store.remove_file("f", file_path)):
        try:
            call()
        except SkillError:
            pass
    outside = {p for p in tmp_path.rglob("*") if p.is_file() and skill_dir not in p.parents}
    assert outside <= {home / "skills" / ".lock"}


# ------------------------------------------------------------------ the tools


async def test_tools_round_trip(home: Path, store: StateStore) -> None:
    ctx = _ctx(home, store)
    listed = json.loads(await TOOLS["skills_list"].handler({}, ctx))
    assert listed["skills"] == [] and listed["count"] == 0

    created = json.loads(await TOOLS["skill_manage"].handler(
        {"action": "create", "name": "triage", "category": "support", "content": skill_md("triage")}, ctx))
    assert created == {"success": True, "action": "create", "name": "triage",
                       "path": "skills/support/triage/SKILL.md", "message": "Skill 'triage' created."}
    await TOOLS["skill_manage"].handler(
        {"action": "write_file", "name": "triage", "file_path": "references/faq.md", "file_content": "Q/A"}, ctx)
    await TOOLS["skill_manage"].handler(
        {"action": "patch", "name": "triage", "old_string": "Step two.", "new_string": "Step two, then three."}, ctx)

    listed = json.loads(await TOOLS["skills_list"].handler({"category": "support"}, ctx))
    assert listed["skills"] == [{"name": "triage", "description": "Use when deploying with docker compose",
                                 "category": "support"}]
    viewed = json.loads(await TOOLS["skill_view"].handler({"name": "triage"}, ctx))
    assert "Step two, then three." in viewed["content"] and viewed["files"] == ["references/faq.md"]
    ref = json.loads(await TOOLS["skill_view"].handler({"name": "triage", "file_path": "references/faq.md"}, ctx))
    assert ref["content"] == "Q/A"

    await TOOLS["skill_manage"].handler({"action": "remove_file", "name": "triage",
                                         "file_path": "references/faq.md"}, ctx)
    await TOOLS["skill_manage"].handler({"action": "edit", "name": "triage",
                                         "content": skill_md("triage", "Rewritten")}, ctx)
    assert json.loads(await TOOLS["skills_list"].handler({}, ctx))["skills"][0]["description"] == "Rewritten"
    deleted = json.loads(await TOOLS["skill_manage"].handler({"action": "delete", "name": "triage"}, ctx))
    assert deleted["success"]
    assert json.loads(await TOOLS["skills_list"].handler({}, ctx))["count"] == 0


@pytest.mark.parametrize(
    ("tool", "args", "match"),
    [
        ("skill_view", {}, "'name' is required"),
        ("skill_view", {"name": "nope"}, "No skill named"),
        ("skill_view", {"name": "x", "file_path": "../../etc/passwd"}, "may not contain"),
        ("skill_manage", {"action": "create", "name": "n"}, "'content' is required"),
        ("skill_manage", {"action": "explode", "name": "n"}, "must be one of"),
        ("skill_manage", {"action": "patch", "name": "x", "old_string": "zzz", "new_string": "y"}, "not found"),
        ("skill_manage", {"action": "patch", "name": "x", "old_string": "Step", "new_string": "S"}, "2 times"),
        ("skill_manage", {"action": "write_file", "name": "x", "file_path": "../x", "file_content": "c"}, ".."),
        ("skill_manage", {"action": "write_file", "name": "x", "file_path": "references/a"}, "file_content"),
        ("skill_manage", {"action": "create", "name": 7, "content": "c"}, "must be a string"),
        ("skills_list", {"category": ["a"]}, "must be a string"),
    ],
)
async def test_tool_refusals_are_tool_errors(
    home: Path, store: StateStore, tool: str, args: dict[str, object], match: str
) -> None:
    SkillStore(home).create("x", skill_md("x"))
    with pytest.raises(ToolError, match=match):
        await TOOLS[tool].handler(args, _ctx(home, store))
