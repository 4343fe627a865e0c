"""The help texts of ``agent-meta`` and its commands, as a newcomer reads them."""

from __future__ import annotations

import argparse

import pytest

from agent_meta.cli._main import build_parser, main

WAYS_IN = ("own", "run", "proxy", "check")
"""The README's table leads with these, in this order."""


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def test_the_top_level_help_leads_with_the_ways_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    description = " ".join(out.split("positional arguments:")[0].split())
    for name in WAYS_IN:
        assert f"{name} -- AGENT_CMD" in description
    assert list(_commands())[: len(WAYS_IN)] == list(WAYS_IN)
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ")]
    assert listed[: len(WAYS_IN)] == list(WAYS_IN)


@pytest.mark.parametrize("name", ["own", "run", "proxy", "check"])
def test_a_command_with_an_agent_shows_where_it_goes_in_its_usage(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    usage = _commands()[name].format_usage()
    assert usage.rstrip().endswith("-- AGENT_CMD [ARGS...]"), usage
    assert all(len(line) <= 80 for line in usage.splitlines()), usage


def test_run_parses_its_own_arguments_with_the_same_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert capsys.readouterr().out.startswith(
        "usage: agent-meta run [options] -- AGENT_CMD [ARGS...]"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["agent", "--listen", "8700"],  # check_combination
        ["agent", "--failure-path", "a..b"],  # the owner options
        ["agent", "--runtime", "sdk", "--listen", "nowhere"],  # the listen address
    ],
)
def test_a_usage_error_of_agent_prints_the_usage_of_agent(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: agent-meta agent "), err
    assert "agent-meta agent: error:" in err


def test_agent_store_help_keeps_the_password_out_of_the_url() -> None:
    help_text = " ".join(_commands()["agent"].format_help().split())
    assert "PASSWORD@" not in help_text
    assert "PGPASSWORD" in help_text


def test_listen_help_gives_the_shortest_token_accepted() -> None:
    from agent_meta._tokens import MIN_TOKEN_BYTES

    help_text = " ".join(_commands()["agent"].format_help().split())
    assert f"at least {MIN_TOKEN_BYTES} printable ASCII characters" in help_text
