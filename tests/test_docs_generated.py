"""The generated documentation matches the code it is generated from: a flag, a default or a measured figure changed
without running the generator fails here. Each generator renders in a second or less, from configuration classes and
checked-in files, without building an environment."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPTS = Path(__file__).parents[1] / "scripts"


def test_cli_reference_is_what_the_configuration_classes_give() -> None:
    cli_reference = load_script(SCRIPTS / "cli_reference.py")
    assert cli_reference.OUT.read_text() == cli_reference.render(), (
        "docs/reference/cli.md is out of date: run uv run python scripts/cli_reference.py"
    )


def test_cli_reference_lists_every_flag_of_every_command_with_its_default() -> None:
    text = (Path(__file__).parents[1] / "docs" / "reference" / "cli.md").read_text()
    for flag, default in (
        ("--env.num-envs", "`1024`"),
        ("--gpu-ids", "`auto`"),
        ("--stop-when", "`None`"),
        ("--num-episodes", "`100`"),  # play
        ("--train-iterations", "`11`"),  # bench
        ("--env.sim.solver-notices, --env.sim.no-solver-notices", "`False`"),
    ):
        assert any(line.startswith(f"| `{flag}` |") and default in line for line in text.splitlines()), flag
    # cartpole-balance trains 80 iterations by default, the number the docs quote.
    section = text.split("### cartpole-balance", 1)[1].split("###", 1)[0]
    assert "| `--agent.max-iterations` | `80` |" in section


def test_readme_and_benchmarks_tables_are_what_the_results_file_gives() -> None:
    expect = load_script(SCRIPTS / "expect.py")
    assert expect.stale(expect.load()) == [], "run uv run python scripts/expect.py render"


def test_the_results_file_has_a_cpu_and_a_gpu_row_for_every_task_and_each_figure_says_where_it_came_from() -> None:

    expect = load_script(SCRIPTS / "expect.py")
    results = expect.load()
    rows = [(row["task"], row["device"]) for row in results["rows"]]
    builtin = load_script(SCRIPTS / "docs_text.py").builtin_tasks()
    assert rows == [(spec.id, device) for spec in builtin for device in ("cpu", "gpu")]
    for row in results["rows"]:
        for kind in ("train", "throughput", "play"):
            if kind in row:
                # A play record without its own provenance was measured with its row's train record.
                record = {**row["train"], **row[kind]} if kind == "play" and "date" not in row[kind] else row[kind]
                assert record["machine"] in results["machines"], row
                assert record["date"] and record["commit"] and record["command"].split()[1] == row["task"], row


def _cpu_row(
    task: str, measured: dict[str, str], exit_s: int, iterations: int, env_steps_per_s: int
) -> dict[str, object]:
    """A row as ``expect.py fill`` measures it on the CPU, succeeding in every ``play`` episode."""
    return {
        "task": task,
        "device": "cpu",
        "train": {"command": f"train {task} --gpu-ids None", "exit_s": exit_s, "iterations": iterations, **measured},
        "play": {"command": f"play {task} --gpu-ids None", "success": 1.0},
        "throughput": {"command": f"bench {task}", "env_steps_per_s": env_steps_per_s, **measured},
    }


def test_a_measurement_replaces_its_row_and_names_a_new_machine(tmp_path: Path) -> None:
    expect = load_script(SCRIPTS / "expect.py")
    results = expect.load()
    measured = {"date": "2027-01-02", "commit": "abc1234", "machine": "AMD Ryzen 9 (16 cores); torch 2.15.0"}
    expect.record(results, _cpu_row("cartpole-swingup", measured, exit_s=95, iterations=150, env_steps_per_s=51234))
    (swingup,) = [r for r in results["rows"] if (r["task"], r["device"]) == ("cartpole-swingup", "cpu")]
    assert swingup["train"]["machine"] == "amd-ryzen-9-16-cores-torch-2-15-0"
    assert results["machines"][swingup["train"]["machine"]] == measured["machine"]
    line = next(line for line in expect.summary_table(results).splitlines() if "`cartpole-swingup` | 2-core" in line)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells == ["`cartpole-swingup`", "2-core CPU", "95 s (150 iterations)", "1.00", "51.2k", cells[-1]]
    assert cells[-1] == "AMD Ryzen 9"  # the date and commit stay in the results file
    assert expect.stale(results)  # README.md no longer matches


def test_a_measurement_can_name_a_machine_the_results_already_describe() -> None:
    expect = load_script(SCRIPTS / "expect.py")
    results = expect.load()
    known = next(iter(results["machines"]))
    measured = {"date": "2027-01-02", "commit": "abc1234", "machine": "Intel(R) Xeon(R) Processor (2 cores)"}
    row = _cpu_row("cartpole-balance", measured, exit_s=11, iterations=18, env_steps_per_s=99999)
    machines = dict(results["machines"])
    expect.record(results, json.loads(json.dumps(row)), known)
    (balance,) = [r for r in results["rows"] if (r["task"], r["device"]) == ("cartpole-balance", "cpu")]
    assert balance["train"]["machine"] == balance["throughput"]["machine"] == known
    assert results["machines"] == machines  # no machine added for bench's description
    with pytest.raises(SystemExit, match=r"^--machine nowhere: not one of the machines in docs/results/expect.json \("):
        expect.record(results, row, "nowhere")


def test_a_row_the_tables_could_not_show_truthfully_is_refused_in_one_line(tmp_path: Path) -> None:
    expect = load_script(SCRIPTS / "expect.py")
    results = expect.load()
    measured = next(i for i, row in enumerate(results["rows"]) if row.get("train") and row.get("throughput"))
    path = tmp_path / "expect.json"
    for change, message in (
        (lambda rows: rows[measured]["train"].update(machine="nowhere"), "train record names machine 'nowhere'"),
        (lambda rows: rows[measured]["throughput"].pop("commit"), "its throughput record has no commit"),
        (lambda rows: rows[measured]["train"].pop("ended"), "its train record has no ended"),
        (lambda rows: rows.append(dict(rows[measured])), "repeats an earlier row of the same task and device"),
        (lambda rows: rows[measured].update(device="tpu"), "names device 'tpu'"),
    ):
        broken = json.loads(json.dumps(results))
        change(broken["rows"])
        path.write_text(json.dumps(broken))
        with pytest.raises(SystemExit, match=message):
            expect.load(path)


def test_a_fill_runs_where_there_are_no_console_scripts_and_no_git_and_its_rows_can_be_added_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expect = load_script(SCRIPTS / "expect.py")
    # The commands run as this interpreter's modules (an offline install's folder may hold no console scripts).
    seconds, out, limited = expect._run("play cartpole-balance --gpu-ids None --agent zero --num-episodes 2")
    assert json.loads(out.strip().splitlines()[-1])["episodes"] == 2 and seconds > 0 and not limited
    monkeypatch.setenv("MJFLEET_COMMIT", "abc1234")  # a copy of the checkout without .git
    assert expect._commit() == "abc1234"
    results = expect.load()
    measured = {"date": "2027-01-02", "commit": "abc1234", "machine": "one NVIDIA H100 80GB HBM3 (test)"}
    row = {
        "task": "cartpole-swingup",
        "device": "gpu",
        "train": {
            "command": "train cartpole-swingup --gpu-ids 0",
            "exit_s": 30,
            "ended": "stop condition met",
            **measured,
        },
        "play": {"command": "play cartpole-swingup --gpu-ids 0", "success": 1.0},
        "throughput": {"command": "bench cartpole-swingup", "env_steps_per_s": 391234, **measured},
    }
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    expect.add_rows(results, rows)
    (swingup,) = [r for r in results["rows"] if (r["task"], r["device"]) == ("cartpole-swingup", "gpu")]
    assert results["machines"][swingup["throughput"]["machine"]] == measured["machine"]
    rows.write_text(json.dumps({**row, "train": {**row["train"], "commit": ""}}) + "\n")
    with pytest.raises(SystemExit, match="its train record has no commit"):
        expect.add_rows(expect.load(), rows)
    rows.write_text(json.dumps({**row, "task": "walker-run"}) + "\n")
    with pytest.raises(SystemExit, match=r"no row of walker-run on the gpu in docs/results/expect\.json to replace"):
        expect.add_rows(expect.load(), rows)


def test_the_commands_a_measurement_runs_parse_with_the_real_parsers() -> None:
    from mjfleet.cli.args import parse
    from mjfleet.cli.bench import BenchConfig
    from mjfleet.cli.train import parse_args
    from mjfleet.tasks.registry import get_task

    expect = load_script(SCRIPTS / "expect.py")
    for device, gpu_ids in (("cpu", None), ("gpu", (0,))):
        commands = expect.commands("go1-velocity-flat", device, "success>=0.95", "/tmp/runs")
        assert list(commands) == ["train", "play", "throughput"]
        train = parse_args(shlex.split(commands["train"])[1:])
        assert train.gpu_ids == gpu_ids and str(train.stop_when) == "Eval/success >= 0.95"
        defaults = get_task("go1-velocity-flat").env_defaults(on_cpu=device == "cpu")
        assert train.log_root == Path("/tmp/runs") and train.env.num_envs == defaults.num_envs  # the task's defaults
        bench = parse(BenchConfig, shlex.split(commands["throughput"])[2:], "bench")
        assert bench.skip_steps and bench.json == Path("/tmp/runs/bench.json")


def test_the_task_reference_tables_are_what_the_task_configurations_give() -> None:
    task_reference = load_script(SCRIPTS / "task_reference.py")
    text = task_reference.OUT.read_text()
    assert task_reference.render(text) == text, (
        "docs/tasks.md is out of date: run uv run python scripts/task_reference.py"
    )
    # cartpole-balance trains 80 iterations by default: the figure the task table gives.
    assert "| `cartpole-balance` | cart-pole | rail | 50 Hz (2 substeps) | 5 s | 1024 | 80 iterations," in text


def test_readme_marks_each_time_measured_before_stop_when_read_the_evaluation() -> None:
    expect = load_script(SCRIPTS / "expect.py")
    results = expect.load()
    front, _ = expect.front_table(results)
    lines = {line.split("|")[1].strip(): line for line in front.splitlines()[2:]}
    for row in results["rows"]:
        train = row.get("train") or {}
        if train.get("exit_s") is None or not str(train.get("ended", "")).startswith(expect.MET):
            continue
        cells = [c.strip() for c in lines[f"`{row['task']}`"].strip("|").split("|")]
        time_cell = cells[1 if row["device"] == "cpu" else 3]
        before = train["date"] < expect.EVALUATION_SINCE
        assert (expect.BEFORE_EVALUATION in time_cell) == before, (row["task"], row["device"], time_cell)
        before_confirm = row["device"] == "cpu" and train["date"] < expect.CONFIRM_SINCE
        assert (expect.BEFORE_CONFIRM in time_cell) == before_confirm, (row["task"], row["device"], time_cell)
    assert (
        "Measured with an earlier version, whose `--stop-when` read the training episodes"
        in (Path(__file__).parents[1] / "README.md").read_text()
    )


def test_the_changelog_page_is_the_changelog() -> None:
    changelog_page = load_script(SCRIPTS / "changelog_page.py")
    assert changelog_page.OUT.read_text() == changelog_page.render(), (
        "docs/changelog.md is out of date: run uv run python scripts/changelog_page.py"
    )
    assert changelog_page.render("[x](docs/a.md#b) [y](https://e.org/docs/c)").endswith(
        "[x](a.md#b) [y](https://e.org/docs/c)"
    )


def test_readme_what_to_expect_lists_every_built_in_task() -> None:
    from mjfleet.tasks import builtin
    from mjfleet.tasks.spec import TaskSpec

    from .helpers import load_script as load

    docs_text = load(SCRIPTS / "docs_text.py")
    block = docs_text.read_block((SCRIPTS.parent / "README.md").read_text(), "expect")
    listed = {line.split("|")[1].strip().strip("`") for line in block.splitlines() if line.startswith("| `")}
    tasks = {spec.id for spec in builtin.tasks() if isinstance(spec, TaskSpec)}
    assert tasks - listed == set(), "README's what-to-expect table misses tasks"


def test_benchmark_tables_in_the_guides_are_what_the_results_file_gives() -> None:
    bench = load_script(SCRIPTS / "benchmark_results.py")
    results = bench.load()
    assert bench.stale(results) == [], "run uv run python scripts/benchmark_results.py render"
    placed = {
        block.removeprefix(bench.PREFIX) for path in bench.guides() for block in bench.BLOCK.findall(path.read_text())
    }
    assert placed == {record["name"] for record in results["tables"]}, "a results table is not shown in any guide"


def test_a_benchmark_table_without_its_provenance_is_refused(tmp_path: Path) -> None:
    bench = load_script(SCRIPTS / "benchmark_results.py")
    results = json.loads(bench.RESULTS.read_text())
    del results["tables"][0]["commit"]
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(results))
    with pytest.raises(SystemExit, match="has no commit"):
        bench.load(path)
    results = json.loads(bench.RESULTS.read_text())
    for change, message in (
        (lambda tables: tables.append(dict(tables[0])), "two tables are named"),
        (lambda tables: tables[0]["rows"][0].__setitem__(1, 0.95), "has a cell that is not text"),
    ):
        broken = json.loads(json.dumps(results))
        change(broken["tables"])
        path.write_text(json.dumps(broken))
        with pytest.raises(SystemExit, match=message):
            bench.load(path)


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMIT = re.compile(r"\b(?!ed25519\b)([0-9a-f]{7,12})\b")  # any hash-like word but the SSH key type


def guide_pages() -> list[Path]:
    """What users read: README, the docs (the notes archive and the changelog aside) and the examples' READMEs."""
    root = SCRIPTS.parent
    docs = [p for p in (root / "docs").rglob("*.md") if "notes" not in p.parts and p.name != "changelog.md"]
    return [root / "README.md", *sorted(docs), *sorted(root.glob("examples/*/README.md"))]


def test_guides_carry_no_commit_hashes_or_dates() -> None:
    """A guide says what is true now: when and at which commit a figure was measured is in its results file."""
    found = []
    for path in guide_pages():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            hashes = COMMIT.findall(line)
            found += [f"{path.name}:{number}: {h}" for h in hashes if re.search(r"\d", h) and re.search(r"[a-f]", h)]
            found += [f"{path.name}:{number}: {d}" for d in DATE.findall(line)]
    assert found == [], found
