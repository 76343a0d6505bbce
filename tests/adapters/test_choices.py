"""``adapters.choices``: a menu's payloads and what a press's payload becomes (anything not ours: None)."""

from __future__ import annotations

import pytest

from adapters.approvals import approval_data
from adapters.choices import MAX_OPTIONS, ChoicePrompt, choice_data, press_command


def test_a_menu_option_and_an_approval_button_become_their_commands() -> None:
    prompt = ChoicePrompt("model", "ab12cd34", "Pick", ("a", "b" * 200))
    assert prompt.data(1) == choice_data("model", "ab12cd34", 1) == "chs:model:ab12cd34:1"
    assert len(prompt.label(1)) == 75 and prompt.label(1).endswith("…")
    assert len(prompt.data(0).encode()) <= 64  # Telegram's callback_data limit
    assert press_command(prompt.data(1)) == "/model --pick ab12cd34 1"
    assert press_command(approval_data("Xy12Ab34", "always")) == "/approve always Xy12Ab34"


@pytest.mark.parametrize("data", [None, "", "chs:model:ab12cd34", "chs:model:ab:1", "chs:Model:ab12cd34:1",
                                  "chs:model:ab12cd34:-1", "chs:model:ab12cd34:100", "chs:model:ab12cd34:1 ; rm",
                                  "chs:model:ab12cd34:1\n/model --global x", "apv:maybe:ab12cd34"])
def test_anything_else_is_not_ours(data: str | None) -> None:
    assert press_command(data) is None


def test_a_menu_has_one_to_25_options_and_a_clean_id() -> None:
    with pytest.raises(ValueError):
        ChoicePrompt("model", "ab12cd34", "Pick", ())
    with pytest.raises(ValueError):
        ChoicePrompt("model", "ab12cd34", "Pick", tuple("x" * (MAX_OPTIONS + 1)))
    with pytest.raises(ValueError):
        ChoicePrompt("model", "a b", "Pick", ("a",))
