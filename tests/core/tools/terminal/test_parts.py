"""The terminal tool's parts on their own: the environment scrub, the output capture, the settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.tools.terminal import OutputCapture, child_env, looks_secret, terminal_settings


@pytest.mark.parametrize("name", [
    "TELEGRAM_BOT_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "SMTP_PASSWD",
    "GOOGLE_APPLICATION_CREDENTIALS", "GITHUB_PAT", "NPM_AUTH", "SSH_PRIVATE_KEY", "SESSION_COOKIE",
    "HERMES_CONTROL_KEY", "HERMES_DEBUG", "api_key", "SLACK_APP_TOKEN", "MY_APIKEY", "FTP_PASS",
])
def test_names_that_look_secret(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "LANG", "LC_ALL", "TERM", "HERMES_HOME", "PWD", "USER",
                                  "SSH_AUTH_SOCK", "VIRTUAL_ENV", "PYTHONPATH", "TZ", "KEYBOARD_LAYOUT"])
def test_names_that_do_not(name: str) -> None:
    assert not looks_secret(name)


def test_child_env_drops_secrets_unless_passed(tmp_path: Path) -> None:
    environ = {"PATH": "/bin", "HOME": "/home/me", "LANG": "C.UTF-8", "HERMES_HOME": "/h", "HERMES_DEBUG": "1",
               "FROM_DOTENV": "x", "OPENAI_API_KEY": "sk", "GITHUB_TOKEN": "gh", "PWD": "/elsewhere"}
    env = child_env(environ, {"FROM_DOTENV"}, {"GITHUB_TOKEN"}, cwd=tmp_path)
    assert env == {"PATH": "/bin", "HOME": "/home/me", "LANG": "C.UTF-8", "HERMES_HOME": "/h",
                   "GITHUB_TOKEN": "gh", "PWD": str(tmp_path)}
    assert child_env({}, (), ())["PATH"]  # a child always has a PATH
    assert child_env({"FROM_DOTENV": "x"}, {"FROM_DOTENV"}, {"FROM_DOTENV"}) == {
        "FROM_DOTENV": "x", "PATH": "/usr/local/bin:/usr/bin:/bin"}


def test_capture_keeps_everything_under_the_limit() -> None:
    capture = OutputCapture(100)
    for piece in (b"hello ", b"world\n", b""):
        capture.feed(piece)
    assert (capture.total, capture.omitted, capture.text()) == (12, 0, "hello world\n")
    assert not capture.looks_binary()


@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(min_value=2, max_value=200))
def test_capture_is_the_head_and_the_tail_of_the_stream(pieces: list[bytes], limit: int) -> None:
    capture = OutputCapture(limit)
    for piece in pieces:
        capture.feed(piece)
    stream = b"".join(pieces)
    head, tail = limit // 2, limit - limit // 2
    assert capture.total == len(stream)
    if len(stream) <= limit:
        assert capture.omitted == 0
        assert bytes(capture._head + capture._tail) == stream
    else:
        assert capture.omitted == len(stream) - limit
        assert bytes(capture._head) == stream[:head] and bytes(capture._tail) == stream[-tail:]
        assert f"… {capture.omitted:,} bytes omitted …" in capture.text()


def test_capture_text_is_clean() -> None:
    capture = OutputCapture(1000)
    capture.feed(b"\x1b[1;31mred\x1b[0m\r\nline\x07\x00\rprogress 50%\rprogress 100%\n\xff\xfe")
    assert capture.text() == "red\nline\ufffd\ufffd\nprogress 50%\nprogress 100%\n\ufffd\ufffd"


def test_settings_from_config_values(tmp_path: Path) -> None:
    default = terminal_settings(tmp_path, dotenv={"BOT_TOKEN": "x", "OTHER": "y"}, secret_names={"EXTRA"})
    assert default.cwd == tmp_path / "workspace" and default.timeout == 120.0
    assert default.max_output_bytes == 64 * 1024 and default.secret_names == {"BOT_TOKEN", "OTHER", "EXTRA"}
    assert terminal_settings(tmp_path, cwd="projects").cwd == tmp_path / "projects"
    assert terminal_settings(tmp_path, cwd="/srv/work").cwd == Path("/srv/work")
    assert terminal_settings(tmp_path, cwd="~/code").cwd == Path.home() / "code"
    with pytest.raises(ValueError):
        terminal_settings(tmp_path, timeout=0)
