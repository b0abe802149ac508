"""``scripts/mjlab_compare/model_side.py`` (the mjfleet half of ``scripts/compare_mjlab.sh``) on an export shaped like
``mjlab_side.py``'s, made here from the cart-pole model: mjlab itself is not installed in mjfleet's environment."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from types import ModuleType

import mujoco
import pytest

from .helpers import load_script

REPO = Path(__file__).resolve().parents[1]
CARTPOLE = REPO / "src" / "mjfleet" / "tasks" / "cartpole" / "cartpole.xml"


def _model_side() -> ModuleType:
    return load_script(REPO / "scripts" / "mjlab_compare" / "model_side.py")


def _export(folder: Path, **changes: object) -> Path:
    """A folder like ``mjlab_side.py`` writes: ``scene/scene.xml`` and ``mjlab.json`` (figures made up, labelled)."""
    (folder / "scene").mkdir(parents=True)
    shutil.copy(CARTPOLE, folder / "scene" / "scene.xml")
    model = mujoco.MjModel.from_xml_path(str(CARTPOLE))
    report = {
        "device": "cpu",
        "num_envs": 4,
        "steps": 2,
        "decimation": 2,
        "cuda_graph": False,
        "physics_sps": 1234.0,
        "env_sps": 617.0,
        "bare_physics_sps": 2345.0,
        "versions": {"mjlab": "0.0-test", "mujoco": "x", "mujoco-warp": "x", "warp-lang": "x", "torch": "x"},
        "options": {"iterations": 7, "impratio": 10.0, "cone": 1, "gravity": [0.0, 0.0, -5.0], "no_such_option": 1},
        "wp_options": {"contact_sensor_maxmatch": 64},
        "nconmax": None,
        "njmax": None,
        "sizes": {"nq": model.nq, "nv": model.nv, "nu": model.nu},
        "collision_pairs": 0,
        "contacts_per_world": 0.0,
        "constraints_per_world": [0, 0],
        "state": {"qpos": [0.1] * model.nq, "qvel": [0.0] * model.nv, "ctrl": [0.0] * model.nu},
    }
    report.update(changes)
    (folder / "mjlab.json").write_text(json.dumps(report))
    return folder


def test_the_exported_model_gets_mjlabs_options(tmp_path: Path) -> None:
    model_side = _model_side()
    export = _export(tmp_path)
    model = model_side.load_model(export / "scene", json.loads((export / "mjlab.json").read_text()))
    assert (model.opt.iterations, model.opt.impratio, model.opt.cone) == (7, 10.0, 1)
    assert list(model.opt.gravity) == [0.0, 0.0, -5.0]


def test_an_export_whose_sizes_differ_is_refused(tmp_path: Path) -> None:
    model_side = _model_side()
    export = _export(tmp_path, sizes={"nv": 99})
    with pytest.raises(SystemExit, match="sizes differ from mjlab's model: nv"):
        model_side.load_model(export / "scene", json.loads((export / "mjlab.json").read_text()))


@pytest.mark.slow
def test_the_table_times_the_exported_model_on_every_cpu_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model_side = _model_side()
    export = _export(tmp_path)
    monkeypatch.setattr(sys, "argv", ["model_side.py", str(export), "--device", "cpu", "--skip-task"])
    model_side.main()
    out = capsys.readouterr().out
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") == 6}
    # mjlab's own row repeats its report; the others were measured here.
    assert (
        "1,234" in rows["mjlab 0.0-test: MuJoCo Warp x eager"] and "50%" in rows["mjlab 0.0-test: MuJoCo Warp x eager"]
    )
    assert "2,345" in rows["MuJoCo Warp x eager, no mjlab, no per-world fields"]
    for engine in ("mjfleet: MuJoCo Warp graph", "mjfleet: MuJoCo Warp eager", "mjfleet: MuJoCo C (2 threads)"):
        assert engine in rows or engine.replace("2 threads", "1 thread") in rows, out
    measured = [float(line.split("│")[3].replace(",", "")) for key, line in rows.items() if key.startswith("mjfleet")]
    assert len(measured) == 3 and all(rate > 0 for rate in measured)


def test_lift_comparison_reads_mjlab_iterations_and_leaves_out_the_first(tmp_path: Path) -> None:
    lift = load_script(REPO / "scripts" / "mjlab_compare" / "train_beside.py")
    block = (
        "Learning iteration {i}/3\n  Total steps: 6144\n  Steps per second: {sps}\n  Collection time: {c}s\n"
        "  Learning time: {lt}s\n  Mean reward: -0.5\n"
    )
    log = "[INFO] Training with: device=cpu\n" + "".join(
        block.format(i=i, sps=sps, c=c, lt=lt) for i, (sps, c, lt) in enumerate([(150, 30.1, 9.0), (215, 21.8, 6.7)])
    )
    rows = lift.mjlab_iterations(log + "Learning iteration 2/3\n  Steps per second: 99\n")  # cut off: left out
    assert rows == [
        {"steps_per_s": 150.0, "collect_s": 30.1, "learn_s": 9.0},
        {"steps_per_s": 215.0, "collect_s": 21.8, "learn_s": 6.7},
    ]
    side = lift.summarise("mjlab", "512-256-128", rows, 60.0)
    assert (side.iterations, side.steps_per_s, side.collect_s) == (1, 215.0, 21.8)
    progress = tmp_path / "progress.jsonl"
    progress.write_text(
        "".join(
            json.dumps({"env_steps_per_s": s, "collect_s": 1.0, "learn_s": 0.5, "iteration": i}) + "\n"
            for i, s in enumerate([900.0, 3000.0, 3200.0, 3100.0], 1)
        )
    )
    assert lift.summarise("mjfleet", "x", lift.mjfleet_iterations(progress), 9.0).steps_per_s == 3100.0
