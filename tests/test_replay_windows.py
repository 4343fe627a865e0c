"""What ``agent-meta own`` decides about a child's session info around load and resume
(sansio/inbound/_replay.py): event by event, no I/O."""

from __future__ import annotations

import pytest

from agent_meta import OMITTED, SessionInfo, SessionInfoPatch
from agent_meta.core._patch import replacement_patch, same_json
from agent_meta.sansio.inbound._replay import Missing, ReplayWindows, Settlement, Verdict

NOTHING = SessionInfo()


def windows(version: int = 2, *, replace_meta: bool = False) -> ReplayWindows:
    made = ReplayWindows(replace_meta=replace_meta)
    made.protocol_version = version
    return made


def answer(
    w: ReplayWindows, request_id: int = 1, *, success: bool = True, known: SessionInfo = NOTHING
) -> Settlement | None:
    """The child answers the load or resume ``request_id``."""
    session = w.answering(request_id)
    assert session is not None
    return w.answered(session, success=success, known=known)


def codex_v2_resume(w: ReplayWindows) -> list[Verdict]:
    """What codex-acp 2.6.0 sends in a v2 resume with replay: stale info and history, then its
    own resync (``_meta: null`` with the title, the snapshot, an idle state)."""
    verdicts = [
        w.info("s", SessionInfoPatch(meta={"jetbrains": {"goal": None}})),
        w.info("s", SessionInfoPatch(title="Title: hello")),
    ]
    w.other("s", "user_message")
    w.other("s", "agent_message_chunk")
    verdicts.append(w.info("s", SessionInfoPatch(meta={"codex": "idle"})))
    w.other("s", "usage_update")
    verdicts.append(w.info("s", SessionInfoPatch(title="Title: hello", meta=None)))
    verdicts.append(w.info("s", SessionInfoPatch(meta={"codex": "idle", "jetbrains": {}})))
    w.other("s", "state_update")
    return verdicts


def test_frames_of_a_replaying_window_are_replay_and_live_outside_it() -> None:
    w = windows()
    assert w.info("s", SessionInfoPatch(title="live")) is Verdict.LIVE
    w.opened("s", 1, held=True, replays=True)
    assert w.in_window("s")
    assert w.info("s", SessionInfoPatch(title="old")) is Verdict.REPLAY
    answer(w, success=True, known=NOTHING)
    assert not w.in_window("s")
    assert w.info("s", SessionInfoPatch(title="late")) is Verdict.LIVE


def test_a_v2_resume_without_replay_carries_live_state() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=False)
    assert w.info("s", SessionInfoPatch(meta={"a": 1})) is Verdict.LIVE
    settled = answer(w, success=True, known=SessionInfo(meta={"a": 1}))
    assert settled is not None
    assert settled.seed is None  # published already
    assert settled.missing == Missing(resync=True)  # the client's _meta was never defined


def test_replay_over_a_held_lifetime_is_history_and_the_owner_resyncs() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(title="New session", meta={"stage": "new"}))
    w.other("s", "user_message_chunk")
    known = SessionInfo(title="Work", meta={"stage": "working"})
    assert answer(w, success=True, known=known) == Settlement(None, Missing(resync=True))


def test_the_childs_own_v2_resync_is_its_state_and_leaves_nothing_missing() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    assert set(codex_v2_resume(w)) == {Verdict.REPLAY}
    known = SessionInfo(title="Title: hello", meta={"codex": "active", "old": 1})
    settled = answer(w, success=True, known=known)
    assert settled is not None
    # The lifetime takes the snapshot: codex idle, jetbrains set, the key it lacks removed.
    assert settled.seed == SessionInfoPatch(meta={"codex": "idle", "jetbrains": {}, "old": None})
    assert settled.missing == Missing()


def test_what_the_childs_resync_lacks_is_sent_as_a_patch() -> None:
    """The child's resync defines ``_meta`` but not ``updatedAt``, which the owner knows."""
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(meta=None))
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    known = SessionInfo(updated_at="2026-01-01T00:00:00Z", meta={"a": 1})
    settled = answer(w, success=True, known=known)
    assert settled == Settlement(
        None, Missing(patch=SessionInfoPatch(updated_at="2026-01-01T00:00:00Z"))
    )


def test_a_clear_followed_by_history_was_history() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(meta=None))
    w.other("s", "agent_message_chunk")  # the replay goes on: that clear was replayed
    w.info("s", SessionInfoPatch(meta={"old": 1}))
    settled = answer(w, success=True, known=SessionInfo(meta={"now": 1}))
    # Not the child's state; but the client's _meta is known since the clear: patch it.
    missing = Missing(patch=SessionInfoPatch(meta={"old": None, "now": 1}))
    assert settled == Settlement(None, missing)


def test_status_updates_after_the_clear_do_not_undo_the_resync() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(meta=None))
    for kind in ("state_update", "usage_update", "available_commands_update"):
        w.other("s", kind)
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    settled = answer(w, success=True, known=SessionInfo(meta={"a": 1}))
    assert settled == Settlement(None, Missing())


def test_a_lifetime_that_held_nothing_is_built_from_the_whole_replay() -> None:
    w = windows()
    w.opened("s", 1, held=False, replays=True)
    w.info("s", SessionInfoPatch(title="T", meta={"a": 1, "b": 2}))
    w.other("s", "user_message_chunk")
    w.info("s", SessionInfoPatch(meta={"b": None, "c": 3}))
    settled = answer(w, success=True, known=NOTHING)
    assert settled is not None
    assert settled.seed == SessionInfoPatch(title="T", meta={"a": 1, "c": 3})
    assert settled.missing == Missing(resync=True)  # the client folded partial objects


def test_on_v1_the_full_object_is_always_sent() -> None:
    w = windows(1)
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(meta=None))  # no clear on v1: just "omitted"
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    settled = answer(w, success=True, known=SessionInfo(meta={"a": 1}))
    assert settled == Settlement(None, Missing(resync=True))


@pytest.mark.parametrize(
    ("replace_meta", "expected"), [(False, {"a": 1, "b": 2}), (True, {"b": 2})]
)
def test_a_v1_child_sending_whole_objects_replaces_with_replace_meta(
    replace_meta: bool, expected: dict[str, int]
) -> None:
    w = windows(1, replace_meta=replace_meta)
    w.opened("s", 1, held=False, replays=True)
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    w.info("s", SessionInfoPatch(meta={"b": 2}))
    settled = answer(w, success=True, known=NOTHING)
    assert settled is not None
    assert settled.seed == SessionInfoPatch(meta=expected)


def test_replace_meta_does_not_apply_on_v2() -> None:
    w = windows(2, replace_meta=True)
    w.opened("s", 1, held=False, replays=True)
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    w.info("s", SessionInfoPatch(meta={"b": 2}))
    settled = answer(w, success=True, known=NOTHING)
    assert settled is not None
    assert settled.seed == SessionInfoPatch(meta={"a": 1, "b": 2})


def test_a_failed_load_settles_nothing_and_leaves_no_tail() -> None:
    w = windows()
    w.opened("s", 1, held=False, replays=True)
    w.info("s", SessionInfoPatch(title="x"))
    assert answer(w, success=False, known=NOTHING) is None
    assert not w.in_window("s")
    w.other("s", "agent_message_chunk")
    assert w.info("s", SessionInfoPatch(title="y")) is Verdict.LIVE


def test_history_after_the_response_makes_later_info_stale_until_the_client_asks() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    answer(w, success=True, known=NOTHING)
    assert w.info("s", SessionInfoPatch(meta={"late": 1})) is Verdict.LIVE  # a late update
    w.other("s", "state_update")  # status is not history
    assert w.info("s", SessionInfoPatch(meta={"late": 2})) is Verdict.LIVE
    w.other("s", "agent_message_chunk")  # the replay goes on after its response
    assert w.info("s", SessionInfoPatch(meta={"old": 1})) is Verdict.STALE
    w.asked("s")  # the client prompts: what follows is live
    w.other("s", "agent_message_chunk")
    assert w.info("s", SessionInfoPatch(meta={"new": 1})) is Verdict.LIVE


@pytest.mark.parametrize("version", [1, 2])
def test_the_childs_current_info_in_the_tail_is_a_publication(version: int) -> None:
    """Replay is replay in the tail too: after history that overran the response, an update
    newer than everything known or replayed is the child's current info (and ends the tail);
    an older one is stale."""
    w = windows(version)
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(updated_at="2026-05-02T00:00:00Z"), lambda: KNOWN_AT)
    answer(w, success=True, known=NOTHING)
    w.other("s", "agent_message_chunk")  # the replay goes on after its response
    older = SessionInfoPatch(updated_at="2026-05-01T00:00:00Z", meta={"old": 1})
    assert w.info("s", older, lambda: KNOWN_AT) is Verdict.STALE
    newer = SessionInfoPatch(updated_at="2026-05-03T00:00:00Z", meta={"now": 1})
    assert w.info("s", newer, lambda: KNOWN_AT) is Verdict.LIVE
    assert not w.watching("s")  # the tail has ended


def test_a_resume_without_replay_leaves_no_tail() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=False)
    answer(w, success=True, known=NOTHING)
    w.other("s", "agent_message_chunk")
    assert w.info("s", SessionInfoPatch(title="t")) is Verdict.LIVE


def test_close_forgets_the_window_and_the_tail() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.closed("s")
    assert not w.in_window("s")
    assert answer(w, success=True, known=NOTHING) is None


def test_two_loads_of_one_session_share_a_window() -> None:
    w = windows()
    w.opened("s", 1, held=False, replays=True)
    w.opened("s", 2, held=False, replays=True)
    w.info("s", SessionInfoPatch(title="T"))
    first = answer(w, success=True, known=NOTHING)
    assert first is not None
    assert first.seed == SessionInfoPatch(title="T")
    assert w.in_window("s")
    w.info("s", SessionInfoPatch(title="T"))  # the second load's replay
    second = answer(w, 2, success=True, known=SessionInfo(title="T"))
    assert second == Settlement(None, Missing(resync=True))  # held now: replay is history
    assert not w.in_window("s")


def test_replacement_patch() -> None:
    assert replacement_patch({"a": 1, "b": 2}, {"b": 3, "c": 4}) == {"a": None, "b": 3, "c": 4}
    assert replacement_patch(None, None) == {}
    assert replacement_patch({"a": 1}, None) == {"a": None}
    assert replacement_patch({"a": 1}, {"a": 1}) == {}
    assert replacement_patch({"a": 1}, {"a": True}) == {"a": True}
    assert replacement_patch({"a": None}, {"b": None}) == {}  # null keys hold nothing
    nested = {"a": {"x": [1, {"y": None}]}}
    assert replacement_patch(nested, {"a": {"x": [1, {"y": None}]}}) == {}


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (1, 1, True),
        (1, 1.0, False),
        (1, True, False),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([1, 2], [1, 2], True),
        ([1, 2], [2, 1], False),
        (None, None, True),
        ("x", "x", True),
    ],
)
def test_same_json(a: object, b: object, same: bool) -> None:
    assert same_json(a, b) is same


def test_an_unknown_title_is_never_sent_as_missing() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(title="child", meta=None))
    w.info("s", SessionInfoPatch(meta={"a": 1}))
    settled = answer(w, known=SessionInfo())
    assert settled is not None
    assert settled.seed == SessionInfoPatch(title="child", meta={"a": 1})
    assert settled.missing == Missing()
    assert settled.seed.updated_at is OMITTED


def test_a_clear_without_a_snapshot_is_not_taken_as_the_childs_state() -> None:
    """A restarted child that holds nothing resyncs with ``_meta: null`` alone: the lifetime
    (restored from the store) keeps its state, and the client gets it."""
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(title="T", meta=None))
    settled = answer(w, known=SessionInfo(title="T", meta={"kept": 1}))
    assert settled is not None
    assert settled.seed is None
    assert settled.missing == Missing(patch=SessionInfoPatch(meta={"kept": 1}))


def test_in_a_resume_without_replay_a_clear_waits_for_its_snapshot() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=False)
    assert w.info("s", SessionInfoPatch(meta=None)) is Verdict.REPLAY  # forwarded, not state
    settled = answer(w, known=SessionInfo(meta={"kept": 1}))
    assert settled == Settlement(None, Missing(patch=SessionInfoPatch(meta={"kept": 1})))

    w.opened("s", 2, held=True, replays=False)
    assert w.info("s", SessionInfoPatch(title="T", meta=None)) is Verdict.REPLAY
    assert w.info("s", SessionInfoPatch(meta={"now": 1})) is Verdict.LIVE  # the snapshot
    # Published on top of the state; the seed removes what the child's resync lacks.
    settled = answer(w, 2, known=SessionInfo(title="T", meta={"kept": 1, "now": 1}))
    assert settled == Settlement(SessionInfoPatch(meta={"kept": None}), Missing())


# -- replay is replay: the child's current info (core/_replay.py ReplayWindow) -----------------

KNOWN_AT = "2026-05-02T12:00:00Z"


def test_the_childs_current_info_in_a_window_is_live_and_the_rest_replay() -> None:
    """The rule the SDK tracker follows, asked of the same ReplayWindow: an updatedAt newer than
    the lifetime's and than everything the window replayed is the child's current info."""
    w = windows()
    w.opened("s", 1, held=True, replays=True)

    def known() -> object:
        return KNOWN_AT

    stamps = ["2026-05-01T00:00:00Z", KNOWN_AT, "2026-05-03T00:00:00Z", "2026-05-02T18:00:00Z"]
    verdicts = [w.info("s", SessionInfoPatch(updated_at=s, title=s), known) for s in stamps]
    assert verdicts == [Verdict.REPLAY, Verdict.REPLAY, Verdict.LIVE, Verdict.REPLAY]
    assert w.info("s", SessionInfoPatch(title="no stamp"), known) is Verdict.REPLAY


def test_a_clear_stays_replay_in_a_window_whatever_its_updated_at() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    clear = SessionInfoPatch(updated_at="2026-05-03T00:00:00Z", meta=None)
    assert w.info("s", clear, lambda: KNOWN_AT) is Verdict.REPLAY


def test_nothing_known_keeps_a_window_replay() -> None:
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    later = SessionInfoPatch(updated_at="2099-01-01T00:00:00Z")
    assert w.info("s", later) is Verdict.REPLAY
    assert w.info("s", later, lambda: OMITTED) is Verdict.REPLAY


def test_after_the_childs_current_info_nothing_older_is_missing() -> None:
    """The current info was published (the lifetime knows it): the settlement sends no older
    updatedAt back (issue 27 item 2, in front of a child)."""
    w = windows()
    w.opened("s", 1, held=True, replays=True)
    w.info("s", SessionInfoPatch(meta=None), lambda: KNOWN_AT)
    w.info("s", SessionInfoPatch(updated_at="2026-05-01T00:00:00Z", meta={"n": 1}))
    now = SessionInfoPatch(updated_at="2026-05-03T00:00:00Z", meta={"n": 2})
    assert w.info("s", now, lambda: KNOWN_AT) is Verdict.LIVE
    known = SessionInfo(updated_at="2026-05-03T00:00:00Z", meta={"n": 2})
    settled = answer(w, success=True, known=known)
    assert settled is not None
    assert settled.missing == Missing()
