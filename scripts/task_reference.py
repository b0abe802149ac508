"""Write the generated tables of docs/tasks.md from the task configurations and classes: each task's robot, ground,
control rate, episode and PPO defaults; each family's reward weights per task; each task's terminations, time-outs
and metrics (the names the task class declares for its configuration, as it logs them).

    uv run python scripts/task_reference.py           # rewrite the tables in docs/tasks.md
    uv run python scripts/task_reference.py --check   # exit 1 if docs/tasks.md differs from what it writes now

No environment is built (a second or two: the task classes are imported, not run). ``tests/test_docs_generated.py``
runs the check.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_text import ROOT, builtin_tasks, replace_block, table

from mjfleet.envs.config import EnvConfig
from mjfleet.envs.task import Task
from mjfleet.rl.config import AgentConfig
from mjfleet.tasks.spec import TaskSpec

OUT = ROOT / "docs" / "tasks.md"
SUMMARY, REWARDS, ENDINGS = "task-summary", "task-rewards", "task-endings"


def _networks(agent: AgentConfig) -> str:
    return "-".join(str(d) for d in agent.policy.actor_hidden_dims)


def _ppo(agent: AgentConfig) -> str:
    a = agent.algorithm
    return (
        f"{agent.max_iterations} iterations, MLP {_networks(agent)}, {a.num_learning_epochs} epochs,"
        f" KL target {a.desired_kl:g}, entropy {a.entropy_coef:g}"
    )


def _on_cpu(spec: TaskSpec) -> str:
    """What a run on the CPU does differently: the environment's settings first, then PPO's."""
    return ", ".join(_cpu_env(spec) + _cpu_ppo(spec)) or "the same"


def _cpu_env(spec: TaskSpec) -> list[str]:
    gpu, cpu = spec.env_cfg(), spec.env_defaults(on_cpu=True)
    changed = [f"{cpu.num_envs} envs"] if cpu.num_envs != gpu.num_envs else []
    contacts = cpu.sim.training_contacts
    if contacts.active(on_gpu=False) and not contacts.active(on_gpu=True):
        changed.append(f"training contacts: {contacts.describe()}")
    for field in ("action_scale", "action_scale_of_force"):
        scale = getattr(cpu, field, None)
        if scale is not None and scale != getattr(gpu, field, None):
            changed.append(f"`{field}` {scale:g}")
    gpu_rewards, cpu_rewards = getattr(gpu, "rewards", None), getattr(cpu, "rewards", None)
    if gpu_rewards is not None and cpu_rewards is not None:
        for field in dataclasses.fields(cpu_rewards):
            weight = getattr(cpu_rewards, field.name)
            if weight != getattr(gpu_rewards, field.name):
                changed.append(f"reward `{field.name}` {weight:g}")
    return changed


def _cpu_ppo(spec: TaskSpec) -> list[str]:
    if spec.cpu_agent_cfg is None:
        return []
    changed: list[str] = []
    gpu, cpu = spec.agent_cfg(), spec.agent_defaults(on_cpu=True)
    if cpu.max_iterations != gpu.max_iterations:
        changed.append(f"{cpu.max_iterations} iterations")
    if cpu.policy.actor_hidden_dims != gpu.policy.actor_hidden_dims:
        changed.append(f"MLP {_networks(cpu)}")
    if cpu.policy.init_std != gpu.policy.init_std:
        changed.append(f"initial action std {cpu.policy.init_std:g}")
    if cpu.algorithm.num_learning_epochs != gpu.algorithm.num_learning_epochs:
        changed.append(f"{cpu.algorithm.num_learning_epochs} epochs")
    if cpu.algorithm.desired_kl != gpu.algorithm.desired_kl:
        changed.append(f"KL target {cpu.algorithm.desired_kl:g}")
    if cpu.algorithm.entropy_coef != gpu.algorithm.entropy_coef:
        changed.append(f"entropy {cpu.algorithm.entropy_coef:g}")
    if cpu.eval_step_interval != gpu.eval_step_interval:
        changed.append(f"evaluation stepped every {cpu.eval_step_interval} training steps until near the condition")
    return changed


def _robot_and_ground(env: EnvConfig) -> tuple[str, str]:
    arm = getattr(env, "arm", None)
    if arm is not None:
        return f"`{arm}`", "table"
    robot = getattr(env, "robot", "cart-pole")
    terrain = getattr(env, "terrain", None)
    if terrain is None:
        ground = "rail" if robot == "cart-pole" else "plane"
    else:
        ground = "plane" if terrain.kind == "flat" else "heightfield, curriculum"
    return f"`{robot}`" if robot != "cart-pole" else robot, ground


def summary() -> str:
    rows = []
    for spec in builtin_tasks():
        env, agent = spec.env_cfg(), spec.agent_cfg()
        robot, ground = _robot_and_ground(env)
        control = f"{1 / (env.sim.decimation * _timestep(spec)):.0f} Hz ({env.sim.decimation} substeps)"
        rows.append(
            [
                f"`{spec.id}`",
                robot,
                ground,
                control,
                f"{env.episode_length_s:g} s",
                f"{env.num_envs}",
                _ppo(agent),
                _on_cpu(spec),
            ]
        )
    header = ["task", "robot", "ground", "control", "episode", "envs", "PPO defaults", "on the CPU"]
    return table(header, rows)


def _timestep(spec: TaskSpec) -> float:
    """The physics timestep of the task's model: its robot record's, else the ``<option timestep>`` of the MJCF
    shipped with the task (no Menagerie download here)."""
    import mjfleet.tasks.cartpole as cartpole
    import mjfleet.tasks.locomotion as locomotion
    from mjfleet.tasks.locomotion.sources import resolve_robot
    from mjfleet.tasks.manipulation.sources import resolve_arm

    arm = getattr(spec.env_cfg(), "arm", None)
    if arm is not None:
        return resolve_arm(arm).timestep
    robot = getattr(spec.env_cfg(), "robot", None)
    if robot is None:
        path = Path(cartpole.__file__).parent / "cartpole.xml"
    else:
        record = resolve_robot(robot)
        if record.timestep > 0:
            return record.timestep
        path = Path(locomotion.__file__).parent / "assets" / f"{record.name}.xml"
    option = ET.parse(path).getroot().find("option")
    return float(option.get("timestep", "0.002")) if option is not None else 0.002


def _declared(spec: TaskSpec) -> Task[Any]:
    """The task with its configuration and nothing built (no model, no Menagerie files): what it declares from its
    configuration alone, as ``--stop-when``'s check reads it (:func:`mjfleet.envs.task.declared_stat_keys`)."""
    task_class = spec.load_task_class()
    declared = task_class.__new__(task_class)
    Task.__init__(declared, spec.env_cfg())
    return declared


def rewards() -> str:
    families: dict[type, list[TaskSpec]] = {}
    for spec in builtin_tasks():
        families.setdefault(type(spec.env_cfg()), []).append(spec)
    parts = []
    for config, specs in families.items():
        weights = {spec.id: _declared(spec).reward_weights() for spec in specs}
        terms = list(dict.fromkeys(term for w in weights.values() for term in w))
        header = ["term", *[f"`{spec.id}`" for spec in specs]]
        rows = [[f"`{term}`", *[f"{weights[spec.id].get(term, 0.0):g}" for spec in specs]] for term in terms]
        parts.append(f"`{config.__name__}` (`--env.rewards.<term>`):\n\n{table(header, rows)}")
    return "\n\n".join(parts)


def endings() -> str:
    rows = []
    for spec in builtin_tasks():
        task = _declared(spec)
        rows.append(
            [
                f"`{spec.id}`",
                ", ".join(f"`{n}`" for n in task.termination_names()) or "none",
                ", ".join(f"`{n}`" for n in ("time_out", *task.time_out_names())),
                ", ".join(f"`{n}`" for n in task.metric_names()) or "none",
            ]
        )
    return table(["task", "terminations", "time-outs", "metrics"], rows)


def render(text: str) -> str:
    for name, body in ((SUMMARY, summary()), (REWARDS, rewards()), (ENDINGS, endings())):
        text = replace_block(text, name, body)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the generated tables of docs/tasks.md.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/tasks.md is not what it writes")
    args = parser.parse_args()
    current = OUT.read_text()
    text = render(current)
    if args.check:
        if text != current:
            sys.exit("docs/tasks.md is out of date: run uv run python scripts/task_reference.py")
        return
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
