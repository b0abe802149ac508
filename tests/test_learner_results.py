"""The learners guide's table is what its results file gives, and every run in it says where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPTS = Path(__file__).parents[1] / "scripts"


def test_the_learners_guide_shows_what_its_results_file_gives_and_every_run_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    results_script = load_script(SCRIPTS / "learner_results.py")
    results = results_script.load()
    assert not results_script.stale(results), "run uv run python scripts/learner_results.py render"
    assert results["runs"], "the learners guide shows no measured run"
    undated = {**results, "runs": [{k: v for k, v in results["runs"][0].items() if k != "commit"}]}
    path = tmp_path / "learners.json"
    path.write_text(json.dumps(undated))
    with pytest.raises(SystemExit, match="run 0 has no commit"):
        results_script.load(path)


def test_a_checkpoint_played_over_more_episodes_is_shown_under_the_table_and_says_where_it_came_from(
    tmp_path: Path,
) -> None:
    results_script = load_script(SCRIPTS / "learner_results.py")
    results = results_script.load()
    run = dict(results["runs"][0])
    run["more_play"] = {
        "command": "play t --num-episodes 400 --seed S",
        "episodes": 800,
        "success": 0.965,
        "by_seed": {"0": 0.98, "1": 0.95},
        "date": "2026-12-05",
        "commit": "abc1234",
        "machine": run["machine"],
    }
    text = results_script.render({**results, "runs": [run]})
    assert (
        "over 800 more episodes (`play t --num-episodes 400 --seed S`): 0.96; 0.98 (`--seed 0`), 0.95 (`--seed 1`)"
        in text
    )
    del run["more_play"]["commit"]
    path = tmp_path / "learners.json"
    path.write_text(json.dumps({**results, "runs": [run]}))
    with pytest.raises(SystemExit, match="more_play has no commit"):
        results_script.load(path)


def test_a_seed_of_0_is_a_seed_and_a_run_without_its_time_or_play_or_a_short_line_is_refused(tmp_path: Path) -> None:
    results_script = load_script(SCRIPTS / "learner_results.py")
    results = results_script.load()
    run = {**results["runs"][0], "seed": 0}
    path = tmp_path / "learners.json"
    path.write_text(json.dumps({**results, "runs": [run]}))
    assert results_script.load(path)["runs"][0]["seed"] == 0
    for field in ("exit_s", "play"):
        path.write_text(json.dumps({**results, "runs": [{k: v for k, v in run.items() if k != field}]}))
        with pytest.raises(SystemExit, match=f"run 0 has no {field}"):
            results_script.load(path)
    assert "1:06:40" in results_script.render({**results, "runs": [{**run, "exit_s": 4000}]})  # as the other tables
    tsv = tmp_path / "runs.tsv"
    tsv.write_text(
        "cartpole-balance\tskrl-sac\t42\t1027\t135.2\t1.0\t0\ncartpole-balance skrl-td3 42 1610 142.5 1.0 0\n"
    )
    with pytest.raises(SystemExit, match=r"runs.tsv:2: 1 tab-separated fields, not the 7"):
        results_script.add(results, tsv, "abc1234", run["machine"], "2026-12-06", "")
