"""The argument helpers every recio command shares."""

import argparse

import pytest

from recio._args import Parser, at_least, json_object, positive_float, restart_interval


def test_argument_types_refuse_what_they_do_not_take():
    assert at_least(2)("3") == 3 and at_least(2).__name__ == "integer >= 2"
    for parse, text, why in (
        (at_least(2), "1", "at least 2"),
        (at_least(2), "x", "an integer"),
        (positive_float, "0", "greater than 0"),
        (positive_float, "x", "a number"),
        (json_object, "[1]", "a JSON object"),
        (json_object, "{", "not valid JSON"),
        (restart_interval(1), "0", "at least 1"),
        (restart_interval(0), "65536", "at most 65535"),
        (restart_interval(0), "rows", "an integer"),
    ):
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            parse(text)
    assert positive_float("0.5") == 0.5 and json_object('{"a": 1}') == {"a": 1}
    assert restart_interval(0)("0") == 0 and restart_interval(1)("row") == "row"


def test_parser_says_a_usage_error_in_one_line(capsys):
    parser = Parser(prog="recio x")
    parser.add_argument("--n", type=at_least(1), default=4, help="how many")
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--n", "0"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("(see recio x --help)\n")
    assert "(default: 4)" in parser.format_help()
