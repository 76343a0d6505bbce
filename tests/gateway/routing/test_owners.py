from gateway.config.models import AuthConfig
from gateway.routing.owners import Owners


def test_a_bare_id_owns_every_platform_and_a_qualified_one_only_its_own() -> None:
    owners = Owners(AuthConfig(owners="42 telegram:7").owners)
    assert owners.is_owner("telegram", "42") and owners.is_owner("slack", "42")
    assert owners.is_owner("telegram", "7")
    assert not owners.is_owner("discord", "7")
    assert not owners.is_owner("telegram", None)
    assert owners.of("telegram") == ["42", "7"] and owners.of("discord") == ["42"]


def test_recorded_owners_count_on_their_platform_only() -> None:
    owners = Owners()
    assert not owners.has_any("slack")
    owners.add("slack", "U1")
    assert owners.is_owner("slack", "U1") and not owners.is_owner("telegram", "U1")
    assert owners.of("slack") == ["U1"]
    owners.remove("slack", "U1")
    assert not owners.has_any("slack")
