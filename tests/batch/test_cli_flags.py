"""Every flag of every command line (`vq-lsp`, `vq-lsp serve`, `vq-lsp score`, `vq-train SUB`) against
generated bad values: either the value is accepted (and a number is then finite and not negative), or
the command stops with status 2 and one message naming the flag; never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import training.cli
from vq_lsp import cli as lsp_cli
from vq_lsp.scoring import command


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Files and folders the commands' required flags point at, so only the flag under test is wrong."""
    root = tmp_path_factory.mktemp("inputs")
    (root / "data").mkdir()
    (root / "model").mkdir()
    (root / "tok.json").write_text("{}")
    (root / "revs").mkdir()
    return root


def commands(root) -> list[tuple[str, argparse.ArgumentParser, list[str], object]]:
    """(name, parser, valid base argv, parse function) for every command and subcommand."""
    out = [("vq-lsp", lsp_cli._parser(), [], lsp_cli.parse_args)]
    serve = lsp_cli._parser()._subparsers._group_actions[0].choices["serve"]
    out.append(("vq-lsp serve", serve, ["serve"], lsp_cli.parse_args))
    out.append(("vq-lsp score", command.build_parser(), [str(root / "revs")], command.parse_args))
    subs = training.cli.build_parser()._subparsers._group_actions[0].choices
    needs = {
        "tokenizer": ["--out", str(root / "o")],
        "tokens": ["--out", str(root / "o"), "--tokenizer", str(root / "tok.json")],
        "teacher": ["--out", str(root / "o"), "--tokenizer", str(root / "tok.json")],
        "distill": ["--out", str(root / "o"), "--teacher", str(root / "model")],
        "finetune": ["--out", str(root / "o"), "--model", str(root / "model")],
        "evaluate": ["--out", str(root / "o"), "--model", str(root / "model")],
        "calibrate": ["--out", str(root / "o"), "--model", str(root / "model")],
        "export": ["--out", str(root / "o"), "--model", str(root / "model")],
        "order-only": ["--out", str(root / "o"), "--model", str(root / "model")],
        "average": ["--out", str(root / "o"), "--models", str(root / "model"), str(root / "model")],
    }
    for name, parser in subs.items():
        data = ["--data", str(root / "data")] if name not in ("export", "order-only", "average") else []
        out.append((f"vq-train {name}", parser, [name, *needs[name], *data], training.cli.parse_args))
    return out


def value_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The long option of every flag that takes one value."""
    return [
        a.option_strings[-1] if a.option_strings[-1].startswith("--") else a.option_strings[0]
        for a in parser._actions
        if a.option_strings
        and a.nargs is None
        and not isinstance(a, (argparse._HelpAction, argparse._StoreTrueAction, argparse._StoreConstAction))
    ]


def run(parse, argv) -> tuple[argparse.Namespace | None, int | None, str]:
    """Parse like the real command: SystemExit and stderr are kept; any other exception escapes."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return parse(argv), None, err.getvalue()
        except SystemExit as e:
            return None, e.code, err.getvalue()


def _error_line(err: str) -> str:
    """argparse's `PROG: error: MESSAGE` line (a value with a line break may continue it below)."""
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert lines, err
    return lines[0]


BAD = st.one_of(
    st.sampled_from(
        [
            "",
            " ",
            "-1",
            "0",
            "-0.5",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "1e309",
            "1.5",
            "abc",
            "10" * 30,
            "0x10",
            "1_000",
            "cuda:99",
            "gpu",
            "\u0661",
            "~nobody/x",
            "x\x00y",
            "--",
            "-",
        ]
    ),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)


def _case(root):
    flags = [
        (name, parser, base, parse, flag)
        for name, parser, base, parse in commands(root)
        for flag in value_flags(parser)
    ]
    return st.tuples(st.sampled_from(flags), BAD)


def _check(name, parse, base, flag, value, ns, code, err):
    if ns is None:
        assert code == 2, (name, flag, value, code, err)
        assert "Traceback" not in err
        assert flag in _error_line(err), (name, flag, value, err)
    else:
        got = getattr(ns, flag.lstrip("-").replace("-", "_"))
        if isinstance(got, (int, float)) and not isinstance(got, bool):
            assert math.isfinite(got) and got >= 0, (name, flag, value, got)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(data=st.data())
def test_generated_bad_values_never_crash_and_name_the_flag(inputs, data):
    (name, _, base, parse, flag), value = data.draw(_case(inputs))
    # `--flag=value`: a value that starts with "-" is still the flag's value
    ns, code, err = run(parse, [*base, f"{flag}={value}"])
    _check(name, parse, base, flag, value, ns, code, err)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "abc", "1.5e400"])
def test_every_numeric_flag_refuses_negative_and_non_finite(inputs, value):
    """Each flag whose default is a number (or that parses "3" to a number) must refuse these."""
    checked = 0
    for name, parser, base, parse in commands(inputs):
        for flag in value_flags(parser):
            probe, _, _ = run(parse, [*base, f"{flag}=3"])
            dest = flag.lstrip("-").replace("-", "_")
            if (
                probe is None
                or isinstance(getattr(probe, dest), bool)
                or not isinstance(getattr(probe, dest), (int, float))
            ):
                continue
            checked += 1
            ns, code, err = run(parse, [*base, f"{flag}={value}"])
            assert ns is None and code == 2, (name, flag, value)
            assert flag in _error_line(err) and "Traceback" not in err, err
    assert checked >= 60  # every numeric flag of vq-lsp, vq-lsp score and the six vq-train subcommands


ENTRY_CASES = [
    (["score", "--threads", "-1", "x"], "--threads"),
    (["--log-level", "foo"], "--log-level"),
    (["serve", "--device", "quantum"], "--device"),
    (["score", "--threads", "0", "x"], "--threads"),
    (["serve", "--log-level", "verbose"], "--log-level"),
    (["--threads", "-1"], "--threads"),
    (["score", "--sentiment-threshold", "1.5", "x"], "--sentiment-threshold"),
    (["score", "--surprise-threshold", "nan", "x"], "--surprise-threshold"),
    (["score", "--format", "xml", "x"], "--format"),
    (["score", "--git-merges", "octopus", "--git", "x"], "--git-merges"),
    (["score"], "--git"),
    (["score", "x", "--git", "y"], "--git"),
]


@pytest.mark.parametrize("argv, flag", ENTRY_CASES[:3])
def test_bad_flags_through_the_real_command(argv, flag):
    """The console script itself (a fresh process): exit status 2, one line naming the flag, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from vq_lsp.cli import main; sys.exit(main())", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert flag in _error_line(proc.stderr), proc.stderr


@pytest.mark.parametrize("argv, flag", ENTRY_CASES)
def test_vq_lsp_main_refuses_bad_flags(argv, flag):
    ns, code, err = run(lsp_cli.main, argv)
    assert code == 2 and flag in _error_line(err) and "Traceback" not in err, err


def test_flags_given_before_serve_are_kept():
    ns = lsp_cli.parse_args(["--threads", "3", "--log-level", "info", "serve"])
    assert ns.threads == 3 and ns.log_level == "INFO"
    ns = lsp_cli.parse_args(["serve", "--threads", "2"])
    assert ns.threads == 2 and ns.log_level == "WARNING"


def test_vq_train_flag_combinations(inputs):
    base = [
        "teacher",
        "--out",
        str(inputs / "o"),
        "--tokenizer",
        str(inputs / "tok.json"),
        "--data",
        str(inputs / "data"),
    ]
    for extra, flag in (
        (["--d", "10", "--heads", "3"], "--heads"),
        (["--seq", "600", "--max-pos", "512"], "--seq"),
        (["--steps", "10", "--warmup", "20"], "--warmup"),
        (["--tokenizer", "/no/such"], "--tokenizer"),
        (["--data", "/no/such/data"], "--data"),
    ):
        ns, code, err = run(training.cli.parse_args, base + extra)
        assert code == 2 and flag in _error_line(err), err
    assert run(training.cli.parse_args, base + ["--steps", "10"])[0].warmup == 1


BENCHMARKS = ("edit_latency.py", "paper_table.py")  # the benchmarks that take the engine flags


def test_engine_flags_have_one_default_the_servers_everywhere(inputs):
    """`vq-lsp`, `vq-lsp serve`, `vq-lsp score` and `vq-lsp check` give an engine flag left out the server
    setting's default; the engine flags are declared in vq_lsp/engine_flags.py only (the benchmarks that
    load the engine take them from there too)."""
    from vq_lsp.engine_flags import ENGINE_FLAGS
    from vq_lsp.scoring import check

    parsed = {
        "vq-lsp": lsp_cli.parse_args([]),
        "vq-lsp serve": lsp_cli.parse_args(["serve"]),
        "vq-lsp score": command.parse_args([str(inputs / "revs")]),
        "vq-lsp check": check.build_parser().parse_args([str(inputs)]),
    }
    for name, ns in parsed.items():
        given = {dest: getattr(ns, dest) for dest in ENGINE_FLAGS if hasattr(ns, dest)}
        assert given == {dest: ENGINE_FLAGS[dest].default for dest in given}, name
        assert {"model", "device", "threads"} <= set(given), name
    assert {"precision", "context", "state_layout"} <= set(vars(parsed["vq-lsp score"]))

    root = Path(__file__).resolve().parents[2]
    declared = re.compile(r"add_argument\(\s*\"--(model|device|threads|precision|context|state-layout)\"")
    for path in [*sorted((root / "vq_lsp").rglob("*.py")), *(root / "benchmarks" / n for n in BENCHMARKS)]:
        assert not declared.search(path.read_text(encoding="utf-8")), path
    for name in BENCHMARKS:
        assert "add_engine_flags(" in (root / "benchmarks" / name).read_text(encoding="utf-8"), name


def test_the_threads_flag_takes_the_range_its_setting_declares(capsys):
    import dataclasses

    from vq_lsp.cli import parse_args
    from vq_lsp.settings import Settings

    meta = next(f.metadata for f in dataclasses.fields(Settings) if f.name == "threads")
    assert parse_args(["--threads", str(meta["hi"])]).threads == meta["hi"]
    with pytest.raises(SystemExit):
        parse_args(["--threads", str(meta["hi"] + 1)])
    assert f"from {meta['lo']} to {meta['hi']}" in capsys.readouterr().err
