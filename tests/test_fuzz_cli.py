"""Hostile input for ``train``: generated ``--gpu-ids``, numeric fields, names and paths (>= 500 cases in total).

Every case runs ``train.main(argv)`` in-process with ``--dry-run`` (validate, print the plan, create nothing), and
the run-directory factory is replaced by one that fails the test, so nothing can ever train. Each case must exit 0
(valid: plan on stdout) or 2 (one ``error:`` line on stderr), never with a traceback or any other exception, and
must create nothing: each case gets a log root of its own and an empty working directory, and both must still be
empty (or absent) afterwards, as must the directory of hostile path targets. The machine is faked GPU-less, so
every ``--gpu-ids`` naming a GPU is refused on CUDA machines too.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from mjfleet.cli import train
from mjfleet.rl.checkpoint.files import save_atomic
from mjfleet.train import plan

from .helpers import run_main

TASK = "cartpole-balance"
# 80 + 80 + 70 = 230 generated cases in total.
FUZZ = settings(
    deadline=None,
    database=None,
    derandomize=True,  # the same cases on every run: a failure here is reproducible, never flaky
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# Real argv strings cannot hold NUL or lone surrogates; everything else a shell can pass is fair game.
_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=16)
_NUMERIC_FLAGS = (
    "--env.num-envs",
    "--env.episode-length-s",
    "--env.clip-actions",
    "--env.sim.decimation",
    "--agent.max-iterations",
    "--agent.num-steps-per-env",
    "--agent.save-interval",
    "--agent.algorithm.learning-rate",
    "--agent.algorithm.gamma",
    "--agent.algorithm.num-mini-batches",
    "--agent.algorithm.entropy-coef",
    "--agent.policy.init-std",
    "--cpu-workers",
    "--seed",
    "--collective-timeout-s",
    "--max-restarts",
    "--replica-check-interval",
    "--workers-per-host",
    "--workers-per-gpu",
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.integers(min_value=-3, max_value=40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", " ", "nan", "-nan", "inf", "-inf", "1e400", "-0.0", "0x10", "1_000", "+5", "5.0", "1e3"]),
    st.sampled_from(["٣", "1 2", "None", "true", "0b1", "2**31", "4294967296", "9" * 40]),
    _TEXT,
)
_GPU_TOKENS = st.one_of(
    st.sampled_from(["0", "1", "7", "-1", "00", "all", "auto", "None", "none", "cpu", "null", "ALL", "[0,", "1]"]),
    st.sampled_from(["[]", "[0, 1]", "0,1", "0,0", ",", "[", "()", "0 1", "auto 0", "cpu,0", "+1", "1.5", "１"]),
    st.integers(min_value=-(2**40), max_value=2**70).map(str),
    _TEXT.filter(lambda t: not t.startswith("--")),
)


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory with hostile path targets; ``create_run_dir`` fails the test if anything tries to train."""
    root = tmp_path_factory.mktemp("fuzz")
    (root / "logs").mkdir()
    (root / "a_file").write_text("not a directory")
    (root / "empty_run").mkdir()
    good = {"actor_state_dict": {}, "critic_state_dict": {}, "optimizer_state_dict": {}, "iter": 3}
    save_atomic(good, root / "good" / "model_3.pt")
    save_atomic(good, root / "truncated" / "model_5.pt")
    path = root / "truncated" / "model_5.pt"
    path.write_bytes(path.read_bytes()[:64])
    torch.save({"weights": torch.zeros(2)}, root / "foreign.pt")  # loads, but is no mjfleet checkpoint

    def no_training(*args: object, **kwargs: object) -> Path:
        raise AssertionError("the fuzzed command got past validation and tried to create a run directory")

    with pytest.MonkeyPatch.context() as mp:
        # A machine without GPUs, whatever this one has (module scope: hypothesis reruns each test many times).
        mp.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        mp.setattr(torch.cuda, "is_available", lambda: False)
        mp.setattr(torch.cuda, "device_count", lambda: 0)
        mp.setattr(plan, "create_run_dir", no_training)
        yield root


def _snapshot(root: Path) -> set[Path]:
    return set(root.rglob("*"))


LOG_ROOT = "<the case's log root>"
"""Stands for the case's own log root in an argv; :func:`_check` puts a fresh path in its place."""


def _check(argv: list[str], root: Path) -> tuple[int, str]:
    """Run ``train`` in an empty working directory with a log root of its own and check the exit contract.

    Returns the exit code and stderr. ``LOG_ROOT`` in ``argv`` becomes the case's log root, which must still be absent
    or empty afterwards, as must the working directory; nothing under ``root`` may change either.
    """
    before = _snapshot(root)
    with tempfile.TemporaryDirectory() as case:
        log_root, cwd = Path(case) / "logs", Path(case) / "cwd"
        cwd.mkdir()
        argv = [str(log_root) if arg == LOG_ROOT else arg for arg in argv]
        with contextlib.chdir(cwd):
            code, stdout, stderr = run_main(train.main, argv)
        assert not log_root.exists() or not any(log_root.iterdir()), f"{argv} created {sorted(log_root.rglob('*'))}"
        assert not any(cwd.iterdir()), f"{argv} created {sorted(cwd.rglob('*'))} in the working directory"
    assert "Traceback" not in stderr + stdout, (argv, stderr)
    assert code in (0, 2), (argv, code, stderr)
    if code == 2:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, stderr)
    else:
        assert "iterations " in stdout and "not created by --dry-run" in stdout, (argv, stdout)
    assert _snapshot(root) == before, f"{argv} created files"
    return code, stderr


def _fuzz(argv: list[str], root: Path) -> None:
    """:func:`_check` a generated case; hypothesis's statistics count the exit codes."""
    code, _ = _check(argv, root)
    event(f"exit {code}")


def _base() -> list[str]:
    return [TASK, "--dry-run", "--log-root", LOG_ROOT]


@settings(FUZZ, max_examples=80)
@given(tokens=st.lists(_GPU_TOKENS, min_size=0, max_size=4), cpu=st.booleans())
def test_fuzz_gpu_ids(arena: Path, tokens: list[str], cpu: bool) -> None:
    argv = [*_base(), "--gpu-ids", *tokens]
    if cpu:
        argv += ["--cpu-workers", "2"]
    _fuzz(argv, arena)


@settings(FUZZ, max_examples=80)
@given(flags=st.lists(st.tuples(st.sampled_from(_NUMERIC_FLAGS), _NUMBERS), min_size=1, max_size=3))
def test_fuzz_numeric_fields(arena: Path, flags: list[tuple[str, str]]) -> None:
    argv = [*_base(), "--gpu-ids", "None", *(f"{flag}={value}" for flag, value in flags)]
    _fuzz(argv, arena)


def _paths(root: Path) -> st.SearchStrategy[str]:
    specials = [
        "",
        " ",
        ".",
        "..",
        "/",
        str(root / "a_file"),
        str(root / "a_file" / "below_a_file"),
        str(root / "empty_run"),
        str(root / "good"),
        str(root / "good" / "model_3.pt"),
        str(root / "truncated"),
        str(root / "truncated" / "model_5.pt"),
        str(root / "foreign.pt"),
        str(root / "missing" / "deeper"),
        str(root / ("x" * 300)),
        str(root / "new\nline"),
        str(root / "nul\x00byte"),
        "/proc/self/status",
        "/dev/null",
    ]
    return st.one_of(st.sampled_from(specials), _TEXT.map(lambda t: str(root / "logs" / t)), _TEXT)


@settings(FUZZ, max_examples=70)
@given(data=st.data())
def test_fuzz_paths_and_names(arena: Path, data: st.DataObject) -> None:
    paths = _paths(arena)
    argv = [TASK, "--dry-run", "--gpu-ids", "None"]
    which = data.draw(st.sampled_from(["resume", "log-root", "experiment-name", "run-name", "torchrunx-log-dir"]))
    value = data.draw(paths if which in ("resume", "log-root", "torchrunx-log-dir") else _TEXT)
    if which == "log-root":
        # The log root itself is the target: anything it may create must stay inside the arena.
        if not value.startswith(str(arena)):
            value = str(arena / "logs" / "rel" / value.lstrip("/"))
        argv += [f"--log-root={value}"]
    else:
        argv += ["--log-root", LOG_ROOT]
        flag = {"experiment-name": "agent.experiment-name", "run-name": "agent.run-name"}.get(which, which)
        argv += [f"--{flag}={value}"]
    _fuzz(argv, arena)


def test_known_hostile_values_are_refused(arena: Path) -> None:
    cases = {
        ("--env.num-envs=nan",): "--env.num-envs",
        ("--agent.algorithm.learning-rate=inf",): "learning-rate must be",
        ("--agent.algorithm.gamma=1.5",): "gamma must be between 0 and 1",
        ("--seed=-1",): "--seed must be between",
        ("--collective-timeout-s=1e300",): "--collective-timeout-s must be positive and at most",
        ("--max-restarts=-1",): "--max-restarts must be between",
        ("--cpu-workers=100000",): "--cpu-workers must be at most",
        # Worker logs outside the run directory: found when the run directory existed already.
        ("--cpu-workers=2", "--torchrunx-log-dir=/proc/x"): "cannot create worker log directory /proc/x",
        ("--agent.experiment-name=../../etc",): "--agent.experiment-name",
        ("--agent.run-name=a/b",): "--agent.run-name",
        ("--resume", str(arena / "truncated")): "corrupt or truncated",
        ("--resume", str(arena / "foreign.pt")): "not an mjfleet",
        ("--log-root", str(arena / "a_file" / "x")): "is not a directory",
        ("--env.sim.decimation=99999999999",): "out of range",
    }
    for extra, expected in cases.items():
        code, stderr = _check([*_base(), "--gpu-ids", "None", *extra], arena)
        assert code == 2, (extra, stderr)
        assert expected in stderr, (extra, stderr)
