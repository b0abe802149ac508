"""What a task source provides: the id, description, task class and default configs of one task."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mjfleet.config_io import flag_value, settings_by_name
from mjfleet.envs.config import EnvConfig
from mjfleet.errors import UsageError
from mjfleet.rl.config import DEFAULT_LEARNER, AgentConfig
from mjfleet.rl.learners.registry import learner_entry, learner_names

if TYPE_CHECKING:
    from mjfleet.envs.task import Task


@dataclass(frozen=True)
class InExperiment:
    """An agent-config factory whose configs write their runs under one experiment directory.

    A value, not a closure, so specs built by two calls of a source compare equal.
    """

    factory: Callable[[], AgentConfig]
    """The task's own factory."""
    experiment_name: str
    """What every config it returns gets as ``experiment_name``."""

    def __call__(self) -> AgentConfig:
        return dataclasses.replace(self.factory(), experiment_name=self.experiment_name)


@dataclass(frozen=True)
class TaskSpec:
    """Everything needed to build one task."""

    id: str
    """Lowercase kebab-case id, e.g. ``cartpole-balance``."""
    description: str
    """One line for ``list-tasks``."""
    task_class: type[Task[Any]] | str
    """The task implementation, or its ``"module:Class"`` path: imported only when an environment is built, so
    listing tasks and parsing a command do not load the simulator."""
    env_cfg: Callable[[], EnvConfig]
    """Returns a complete default environment config."""
    agent_cfg: Callable[[], AgentConfig]
    """Returns a complete default PPO config. Its ``experiment_name`` is replaced by the task's (see
    ``experiment_name``), so a factory shared by several tasks never puts their runs in one folder."""
    cpu_agent_cfg: Callable[[], AgentConfig] | None = None
    """Returns the PPO defaults of a run that trains on the CPU, where the physics and the update share a few
    cores; None: ``agent_cfg``'s. Flags given on the command line override either."""
    cpu_env_cfg: Callable[[], EnvConfig] | None = None
    """Returns the environment defaults of a run that trains on the CPU (where they were measured to train faster);
    None: ``env_cfg``'s. Flags given on the command line override either."""
    off_policy: Callable[[EnvConfig, AgentConfig, bool], tuple[EnvConfig, AgentConfig]] | None = None
    """Turns the task's defaults (the CPU's where the flag is true) into those of an off-policy learner
    (``--agent.learner skrl-sac|skrl-td3|fast-td3``: its environment count, rollout length and ``--agent.sac.*`` /
    ``--agent.td3.*`` / ``--agent.fast-td3.*``), as new configs, leaving the ones it is given as they are; None: the
    defaults as they are, with the learners' generic settings. Flags given on the command line override either."""
    experiment_name: str = ""
    """Runs go under ``<log_root>/<experiment_name>/``, where ``play`` looks for the newest one; empty: the id with
    underscores (``cartpole-balance``: ``cartpole_balance``)."""

    def __post_init__(self) -> None:
        name = self.experiment_name or self.id.replace("-", "_")
        object.__setattr__(self, "agent_cfg", InExperiment(_own_factory(self.agent_cfg), name))
        if self.cpu_agent_cfg is not None:
            object.__setattr__(self, "cpu_agent_cfg", InExperiment(_own_factory(self.cpu_agent_cfg), name))

    def agent_defaults(self, on_cpu: bool) -> AgentConfig:
        """The default PPO config of a run on the CPU (``on_cpu``) or on GPUs."""
        return self.cpu_agent_cfg() if on_cpu and self.cpu_agent_cfg is not None else self.agent_cfg()

    def env_defaults(self, on_cpu: bool) -> EnvConfig:
        """The default environment config of a run on the CPU (``on_cpu``) or on GPUs."""
        return self.cpu_env_cfg() if on_cpu and self.cpu_env_cfg is not None else self.env_cfg()

    def defaults(self, on_cpu: bool, learner: str = DEFAULT_LEARNER) -> tuple[EnvConfig, AgentConfig]:
        """The environment and agent defaults of a run with ``learner`` on the CPU (``on_cpu``) or on GPUs."""
        env, agent = self.env_defaults(on_cpu), self.agent_defaults(on_cpu)
        agent.learner = learner
        if self.off_policy is not None and learner in learner_names() and learner_entry(learner).off_policy:
            env, agent = self.off_policy(env, agent, on_cpu)
        return env, agent

    def has_off_policy_recipe(self, on_cpu: bool) -> bool:
        """Whether the task's off-policy recipe changes its defaults on the CPU (``on_cpu``) or on GPUs: a recipe may
        be for one of them alone (go1-velocity-flat's is the CPU's)."""
        if self.off_policy is None:
            return False
        env, agent = self.env_defaults(on_cpu), self.agent_defaults(on_cpu)
        return self.off_policy(env, agent, on_cpu) != (env, agent)

    def cpu_differences(self, taken: Mapping[str, Any] | None = None) -> list[str]:
        """Each default that differs on the CPU, as ``env.num_envs 896 (GPU: 4096)`` (dotted names, both values);
        with ``taken`` (a run's settings by dotted name) only those the run took (no flag overrode them)."""
        cpu, gpu = (
            settings_by_name(self.env_defaults(on_cpu), self.agent_defaults(on_cpu)) for on_cpu in (True, False)
        )
        return [
            f"{k} {flag_value(v)} (GPU: {flag_value(gpu.get(k))})"
            for k, v in cpu.items()
            if gpu.get(k) != v and (taken is None or taken.get(k) == v)
        ]

    @property
    def has_cpu_defaults(self) -> bool:
        """Whether a run on the CPU takes defaults of its own (PPO's, the environment's or both)."""
        return self.cpu_agent_cfg is not None or self.cpu_env_cfg is not None

    def success_doc(self) -> str:
        """What counts as a successful episode: the docstring of the task class's own ``success`` (read from its
        module's source, not imported: help stays fast), "" where it has none of its own."""
        if not isinstance(self.task_class, str):
            method = self.task_class.__dict__.get("success")
            return _one_paragraph(inspect.getdoc(method) or "") if method is not None else ""
        module, _, name = self.task_class.partition(":")
        try:
            found = importlib.util.find_spec(module)
            origin = found.origin if found is not None else None
            tree = ast.parse(Path(origin).read_text()) if origin else None
        except (ImportError, OSError, SyntaxError, ValueError):
            return ""
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.ClassDef) and node.name == name:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "success":
                        return _one_paragraph(ast.get_docstring(item) or "")
        return ""

    def load_task_class(self) -> type[Task[Any]]:
        """The task class (imported now if given as ``"module:Class"``); one that cannot be found raises
        :class:`UsageError` naming the task and the path (an error inside the module still raises its own)."""
        if not isinstance(self.task_class, str):
            return self.task_class
        module, _, name = self.task_class.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as e:
            named = e.name is not None and (module == e.name or module.startswith(e.name + "."))
            if not named:  # the module exists; something it imports does not (a dependency, its own error)
                raise
            raise UsageError(f"task {self.id!r}: its task class {self.task_class!r} cannot be imported ({e})") from None
        if not hasattr(loaded, name):
            raise UsageError(f"task {self.id!r}: module {module!r} has no {name!r} (its task class)")
        found = getattr(loaded, name)
        from mjfleet.envs.task import Task  # torch: the module just imported has loaded it already

        if not (isinstance(found, type) and issubclass(found, Task)):
            raise UsageError(
                f"task {self.id!r}: its task class {self.task_class!r} is {_what(found)}, not a subclass of "
                "mjfleet.envs.task.Task"
            )
        return found


def _what(value: object) -> str:
    """``value`` as an error names it: a class by name, anything else by its type."""
    return f"the class {value.__name__}" if isinstance(value, type) else f"a {type(value).__name__}"


def _one_paragraph(doc: str) -> str:
    """The first paragraph of a docstring on one line, reST literals as plain backquotes."""
    return " ".join(doc.split("\n\n")[0].split()).replace("``", "`")


def _own_factory(factory: Callable[[], AgentConfig]) -> Callable[[], AgentConfig]:
    """The factory a spec was given (``dataclasses.replace`` of a spec passes the wrapped one back in)."""
    return factory.factory if isinstance(factory, InExperiment) else factory
