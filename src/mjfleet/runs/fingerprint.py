"""What decides what a run trains, as one comparable value: the configuration part of a run's identity.

Two starts of one job (a requeue, a restart, the same command again under ``--run-id``) continue one run only when
they would train the same thing: the task, its environment and learner settings, the seed and the weights it started
from. Where the run is written, how it is logged, how long it trains and on how many devices are not part of it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mjfleet.config_io import flag_value, flattened
from mjfleet.rl.config import DEFAULT_LEARNER
from mjfleet.rl.learners.registry import learner_entry, learner_names

TRAINING_FIELDS = ("task", "seed", "resume", "init_at_random_ep_len", "env", "agent")
"""The fields of the training configuration (:class:`~mjfleet.train.config.TrainConfig`) that decide what is trained
(the rest say how and where it runs)."""

NOT_TRAINING = frozenset(
    {
        "agent.experiment_name",
        "agent.run_name",
        "agent.max_iterations",
        "agent.save_interval",
        "agent.export_onnx",
        "agent.logger",
        "agent.wandb_project",
        "agent.eval_episodes",
        "agent.eval_confirm",
        "agent.eval_confirm_episodes",
        "agent.eval_steps_per_step",
        "agent.eval_speedup",
        "agent.eval_step_interval",
        "env.sim.threads",
        "env.sim.nconmax",
        "env.sim.njmax",
        "env.sim.use_graph",
        "env.sim.solver_notices",
        "env.sim.sensors_every_substep",
    }
)
"""Settings inside ``env`` and ``agent`` that change where results go, how fast they come or how long the run is,
not what the policy learns: ``sensors_every_substep`` and the Warp graph give bit-identical physics; ``nconmax`` and
``njmax`` are capacity (raising them after an overflow is the fix, and continues the run); the evaluation's window and
its stepping are bookkeeping (how many environments evaluate stays part of it: in the training simulation they
share its random streams)."""

ADDED = {
    "agent.learner": DEFAULT_LEARNER,
    "env.rewards.lifted": 0.0,
    "env.rewards.grasp": 0.0,
    "env.start_in_hand": 0.0,
    "env.action_filter": 1.0,
    "env.rewards.height": 0.0,
    "env.rise_span": 0.05,
    "env.rewards.carry": 0.0,
    "env.pinch_tolerance": None,
    "env.start_at_cube": 0.0,
    "env.action_scale_of_force": 0.0,
}
"""Settings that decide training and were added after runs were first recorded with a default other than what runs
recorded before them trained with, with that value: such a run matches a start that names it. A setting added with a
default that trains as before needs no entry: a run that predates it matches a start that leaves it at the task's
default (:func:`same_training`'s ``defaults``)."""


def training_settings(config: dict[str, Any]) -> dict[str, Any]:
    """Every setting that decides what ``config`` trains, flat, by its dotted name (``env.rewards.effort``), with
    JSON values.

    ``config``: the training configuration as plain data (``plain(dataclasses.asdict(cfg))``), nested by field.
    Of the settings that only some learners read (each learner's ``--agent.<group>``:
    :attr:`~mjfleet.rl.learners.registry.LearnerEntry.settings`), those of the learner ``config`` names are part of it,
    the others' not.
    """
    flat: dict[str, Any] = {}
    for name in TRAINING_FIELDS:
        flat.update(flattened(config[name], name))
    learner = config["agent"].get("learner", DEFAULT_LEARNER)
    groups = {group for name in learner_names() if (group := learner_entry(name).settings) is not None}
    read = learner_entry(learner).settings if learner in learner_names() else None
    unread = tuple(f"agent.{group}." for group in sorted(groups) if group != read)
    return {k: v for k, v in flat.items() if k not in NOT_TRAINING and not k.startswith(unread)}


DIGEST = "_sha256"
"""The ending of the settings that hold a file's content digest (:func:`content_digests`)."""


def content_digests(files: dict[str, Path]) -> dict[str, str]:
    """The settings that tell apart the contents of the files an environment names
    (:meth:`~mjfleet.envs.config.EnvConfig.content_files`): ``env.<name>_sha256``, by SHA-256 of the file."""
    return {f"env.{name}{DIGEST}": hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}


def same_training(recorded: dict[str, Any], current: dict[str, Any], defaults: Sequence[dict[str, Any]] = ()) -> bool:
    """Whether a run recorded with the settings ``recorded`` trains what ``current`` names: equal in every setting
    that decides training now (a run recorded when a setting counted that no longer does still matches).

    ``defaults``: the task's default settings (e.g. its CPU and its GPU ones); a setting the run predates is taken as
    what it trained with where ``current`` leaves it at one of them (its :data:`ADDED` value where it has one)."""
    return _recorded(recorded, current, defaults) == _deciding(current)


def _deciding(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in {**ADDED, **settings}.items() if k not in NOT_TRAINING}


def _recorded(recorded: dict[str, Any], current: dict[str, Any], defaults: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``recorded`` completed with the settings added since, at the values it trained with (:func:`same_training`)."""
    filled = _deciding(recorded)
    resume = filled.get("resume")
    if isinstance(resume, str) and resume and not resume.startswith("wandb:") and not Path(resume).is_absolute():
        # Recorded as typed by earlier versions: relative to the folder the run was started from, as a requeue is.
        filled["resume"] = str(Path(resume).absolute())
    for key, value in _deciding(current).items():
        if key in filled:
            continue
        # A run recorded before contents were told apart is taken to have trained the file as it is now.
        if key.endswith(DIGEST) or any(d.get(key, _ABSENT) == value for d in defaults):
            filled[key] = value
    return filled


def recorded_values(values: dict[str, Any], group: str) -> dict[str, Any]:
    """A run's recorded ``params/<group>.yaml`` (``env``, ``agent``) with the :data:`ADDED` settings it predates set
    to the value it trained with, so that read back it trains what it trained (not today's default)."""
    completed = copy.deepcopy(values)
    for key, value in ADDED.items():
        first, *path, name = key.split(".")
        if first != group:
            continue
        node = completed
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(name, value)
    return completed


def fingerprint(settings: dict[str, Any]) -> str:
    """A short digest of :func:`training_settings` (equal settings, equal digest)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(
    recorded: dict[str, Any], current: dict[str, Any], limit: int = 4, defaults: Sequence[dict[str, Any]] = ()
) -> str:
    """The settings that differ, as flags with both values: ``--seed 2 (the run has 1), --env.num-envs ...``
    (``defaults`` as for :func:`same_training`)."""
    recorded, current = _recorded(recorded, current, defaults), _deciding(current)
    parts = [_difference(k, current.get(k, _ABSENT), recorded.get(k, _ABSENT)) for k in _keys(recorded, current)]
    more = f" and {len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more


def differing(recorded: dict[str, Any], current: dict[str, Any], defaults: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The keys of the settings that differ (``defaults`` as for :func:`same_training`), the task, seed and
    ``--resume`` before nested settings; a file's content digest ends with :data:`DIGEST`."""
    return _keys(_recorded(recorded, current, defaults), _deciding(current))


def _keys(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    differ = [k for k in recorded.keys() | current.keys() if recorded.get(k, _ABSENT) != current.get(k, _ABSENT)]
    return sorted(differ, key=lambda k: (k.count("."), k))


_ABSENT = object()


def _difference(key: str, current: Any, recorded: Any) -> str:
    if key.endswith(DIGEST):
        shown = [v[:12] if isinstance(v, str) else _show(v) for v in (current, recorded)]
        return f"the content of {_flag(key.removesuffix(DIGEST))} (sha256 {shown[0]}; the run's {shown[1]})"
    return f"{_flag(key)} {_show(current)} (the run has {_show(recorded)})"


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "nothing"
    return "''" if value == "" else flag_value(value)  # an empty setting (the shipped motion): not a blank
