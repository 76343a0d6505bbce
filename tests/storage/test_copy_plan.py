"""``storage.copy``'s plan: which tables and columns a copy moves, and in what order (pure)."""

from __future__ import annotations

from storage.copy import TableShape, make_plan


def _shape(name: str, *cols: str, key: tuple[str, ...] = ("id",), refs: frozenset[str] = frozenset(),
           parent: str | None = None, serial: str | None = None) -> TableShape:
    return TableShape(name, ("id", *cols), key, refs, parent, serial)


def test_tables_and_columns_both_sides_have_in_foreign_key_order() -> None:
    source = {
        "aaa_child": _shape("aaa_child", "message_id", refs=frozenset({"messages"})),
        "messages": _shape("messages", "session_id", "old_column", refs=frozenset({"sessions"}), serial="id"),
        "sessions": _shape("sessions", "parent_session_id", parent="parent_session_id"),
        "state_meta": TableShape("state_meta", ("key", "value"), ("key",)),
        "schema_version": TableShape("schema_version", ("version",), ()),
        "only_here": _shape("only_here"),
    }
    target = {
        "aaa_child": source["aaa_child"],
        "messages": _shape("messages", "session_id", "search_vector", refs=frozenset({"sessions"}), serial="id"),
        "sessions": source["sessions"],
        "state_meta": source["state_meta"],
        "schema_version": source["schema_version"],
        "hermes_migrations": _shape("hermes_migrations"),
        "cluster_only": _shape("cluster_only"),
    }
    plan = make_plan(source, target)
    names = [t.name for t in plan.tables]
    # referenced before referrer, the reference's tables first; bookkeeping and one-sided tables out
    assert names == ["sessions", "messages", "state_meta", "aaa_child"]
    by = {t.name: t for t in plan.tables}
    assert by["messages"].columns == ("id", "session_id") and by["messages"].serial == "id"
    assert plan.notes == ["messages: column(s) old_column not in the target, not copied"]
    assert by["sessions"].parent == "parent_session_id"
    assert by["state_meta"].where is not None and "fts_indexed_through" in by["state_meta"].where
    assert plan.source_only == ["only_here"]


def test_a_reference_between_tables_orders_them_whichever_side_declares_it() -> None:
    plain = {"b_first": _shape("b_first"), "a_second": _shape("a_second", "b_id")}
    declared = {"b_first": _shape("b_first"), "a_second": _shape("a_second", "b_id", refs=frozenset({"b_first"}))}
    assert [t.name for t in make_plan(plain, declared).tables] == ["b_first", "a_second"]
    assert [t.name for t in make_plan(declared, plain).tables] == ["b_first", "a_second"]
    assert [t.name for t in make_plan(plain, plain).tables] == ["a_second", "b_first"]


def test_a_lineage_only_the_target_declares_is_still_copied_parents_first() -> None:
    old = {"sessions": _shape("sessions", "parent_session_id")}  # an old file without the reference
    new = {"sessions": _shape("sessions", "parent_session_id", parent="parent_session_id")}
    assert make_plan(old, new).tables[0].parent == "parent_session_id"
    assert make_plan(new, old).tables[0].parent == "parent_session_id"
