"""gateway.config.envfile: ``.env`` as python-dotenv reads it, and its errors.

Each test writes a real ``.env`` into a temporary $HERMES_HOME.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, read_dotenv

from ._files import SECRET_API_KEY, SECRET_MODEL_KEY, make_home, secret


def test_dotenv_parsing_comments_export_quotes(tmp_path: Path) -> None:
    home = make_home(
        tmp_path,
        dotenv=(
            "# a comment line\n"
            "\n"
            "   # an indented comment\n"
            "PLAIN=value\n"
            "export EXPORTED=yes\n"
            "export   SPACED_EXPORT=1\n"
            'export EXPORTED_QUOTED="q v" # note\n'
            'DOUBLE="two words"\n'
            "SINGLE='single quoted'\n"
            'HASH_IN_QUOTES="a # not a comment"\n'
            "  PADDED  =  padded value  \n"
            "EQUALS=a=b=c\n"
            "EMPTY=\n"
            'EMPTY_QUOTES=""\n'
            "EMPTY_SINGLE=''\n"
            "LAST=wins-1\n"
            "LAST=wins-2\n"
        ),
    )
    values = read_dotenv(home / ".env")
    assert values == {
        "PLAIN": "value",
        "EXPORTED": "yes",
        "SPACED_EXPORT": "1",
        "EXPORTED_QUOTED": "q v",
        "DOUBLE": "two words",
        "SINGLE": "single quoted",
        "HASH_IN_QUOTES": "a # not a comment",
        "PADDED": "padded value",
        "EQUALS": "a=b=c",
        "EMPTY": "",
        "EMPTY_QUOTES": "",
        "EMPTY_SINGLE": "",
        "LAST": "wins-2",
    }


@pytest.mark.parametrize(
    ("line", "value"),
    [
        # The old parser kept the quotes and the comment: '"abc" # note'.
        ('A="abc" # note', "abc"),
        ("A='abc' # note", "abc"),
        ('A="abc"# note', "abc"),
        ("A=abc # note", "abc"),
        ("A=abc#not-a-comment", "abc#not-a-comment"),
        ('A="with \\"escaped\\" quotes"', 'with "escaped" quotes'),
        ('A="two\nlines"', "two\nlines"),
        ("A='$HOME ${HOME} stay as written'", "$HOME ${HOME} stay as written"),
        ("A=${HOME}", "${HOME}"),
    ],
)
def test_dotenv_values_are_read_as_dotenv_tools_read_them(tmp_path: Path, line: str, value: str) -> None:
    home = make_home(tmp_path, dotenv=f"{line}\nB=after\n")
    assert read_dotenv(home / ".env") == {"A": value, "B": "after"}


def test_quoted_dotenv_secret_with_comment_reaches_the_setting(tmp_path: Path) -> None:
    home = make_home(tmp_path, dotenv=f'API_SERVER_KEY="{SECRET_API_KEY}" # the HTTP API key\n')
    key = load_config(home, environ={}).settings.platforms.api_server.key
    assert secret(key) == SECRET_API_KEY


def test_dotenv_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_dotenv(tmp_path / "nope.env") == {}


def test_quoted_dotenv_value_feeds_a_setting(tmp_path: Path) -> None:
    home = make_home(tmp_path, dotenv=f"export HERMES_MODEL_API_KEY='{SECRET_MODEL_KEY}'\nHERMES_MODEL=\"m-1\"\n")
    s = load_config(home, environ={}).settings
    assert secret(s.model.api_key) == SECRET_MODEL_KEY
    assert s.model.default == "m-1"


@pytest.mark.parametrize(
    ("bad_line", "lineno"),
    [
        ("JUST_A_WORD", 3),
        ("BAD-KEY=1", 3),
        ("=no key", 3),
        ("two words=1", 3),
        ("export", 3),
        ("MISMATCHED=\"half'", 3),
    ],
)
def test_malformed_dotenv_line_names_file_and_line(tmp_path: Path, bad_line: str, lineno: int) -> None:
    home = make_home(tmp_path, config={}, dotenv=f"# header\nGOOD=1\n{bad_line}\nALSO_GOOD=2\n")
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    assert f"{home / '.env'}:{lineno}" in str(err.value)


def test_malformed_dotenv_line_is_not_echoed(tmp_path: Path) -> None:
    # Someone pasted a bare key into .env: the error points at the line but never prints it.
    home = make_home(tmp_path, dotenv=f"A=1\n{SECRET_MODEL_KEY}\n")
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    assert f"{home / '.env'}:2" in str(err.value)
    assert SECRET_MODEL_KEY not in str(err.value)
