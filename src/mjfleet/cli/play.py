"""``play <task> --checkpoint <path>``: run a trained policy (or a baseline), print a JSON summary, record video."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything creates a GL context

from mjfleet.cli.args import parse, parse_known, print_help, wants_help, write_out
from mjfleet.config_io import load_yaml, update_dataclass
from mjfleet.console import configure_logging
from mjfleet.envs.config import EnvConfig, check_env
from mjfleet.errors import UsageError, exits_on_usage_error
from mjfleet.render.size import check_video_path, check_video_size
from mjfleet.rl.checkpoint.files import list_checkpoints, newest_run
from mjfleet.rl.config import AgentConfig
from mjfleet.runs.fingerprint import recorded_values
from mjfleet.runs.source import local_checkpoint, resolve_play_checkpoint
from mjfleet.runtime.devices import GpuIds, select_local_devices
from mjfleet.tasks.registry import get_task
from mjfleet.viewer.display import check_display, check_listen_host

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.render.video import WorldVideo
    from mjfleet.tasks.spec import TaskSpec

# torch, Warp and the simulator are imported by play() itself, so a mistyped command is answered at once.

logger = logging.getLogger("mjfleet.play")


@dataclass
class PlayConfig:
    """Everything `play <task>` accepts."""

    env: EnvConfig
    """Environment settings (default: those the checkpoint's run trained with, else the task's)."""
    checkpoint: Path | None = None
    """Checkpoint file, a run directory (its newest checkpoint), an exported `.onnx` policy (run with
    onnxruntime) or `wandb:<entity>/<project>/<run>[:<file>]`. Default: the newest run of the task under
    `--log-root` (the last by name, i.e. by start time, that holds a checkpoint)."""
    log_root: Path = Path("logs/rsl_rl")
    """Where to look for the newest run when `--checkpoint` is not given."""
    agent: Literal["policy", "random", "zero"] = "policy"
    """`policy`: the checkpoint's deterministic policy; `random`/`zero`: baselines."""
    num_episodes: int = 100
    """Episodes to evaluate (the first of each environment when `env.num_envs` is at least this)."""
    gpu_ids: GpuIds = "auto"
    """One GPU index, `None` for the CPU, or `auto`."""
    seed: int = 0
    """Random seed of resets and the random baseline."""
    video: bool = False
    """Record an mp4 of environment 0."""
    video_path: Path | None = None
    """Where the video goes (default: `<run_dir>/videos/play.mp4`, `play_random.mp4` or `play_zero.mp4` for a
    baseline, or `videos/<task>.mp4` without a run)."""
    video_width: int = 640
    """Video width in pixels."""
    video_height: int = 480
    """Video height in pixels."""
    viewer: Literal["none", "web", "native"] = "none"
    """Watch the policy live instead of evaluating: `web` serves an interactive 3D view (pause, step, pick the
    environment, steer velocity commands, reward terms) and logs its URL; `native` opens MuJoCo's viewer (needs a
    display). Runs until Ctrl-C."""
    viewer_host: str = "127.0.0.1"
    """Address the web viewer listens on: this machine only by default (the page has no authentication; from
    another machine use the SSH port forward it logs); `0.0.0.0` or `::`: every interface, anyone who can reach
    this machine can watch and drive the policy."""
    viewer_port: int = 8080
    """Port of the web viewer (the next free one when taken)."""


@dataclass
class PlaySource:
    """The options ``play`` reads first, because they choose the run whose saved settings become the defaults of the
    others. Same flags as :class:`PlayConfig`'s fields of the same names."""

    checkpoint: str | None = None
    """``--checkpoint``, as text, so a ``wandb:`` reference arrives unchanged."""
    log_root: Path = PlayConfig.log_root
    """``--log-root``."""
    agent: Literal["policy", "random", "zero"] = PlayConfig.agent
    """``--agent`` (a baseline needs no run)."""
    num_episodes: int = PlayConfig.num_episodes
    """``--num-episodes``, also the default ``--env.num-envs``."""


def parse_args(argv: list[str]) -> tuple[str, PlayConfig, AgentConfig]:
    """Task id, play settings, and the agent config the checkpoint's run trained with."""
    if not argv or argv[0].startswith("-"):
        if wants_help(argv):
            generic = PlayConfig(env=EnvConfig())
            print_help(
                PlayConfig, generic, "play", "Evaluate a policy. Defaults below are generic; tasks set their own."
            )
        raise UsageError("usage: play <task> --checkpoint <path> [OPTIONS]; run list-tasks to see the task ids")
    spec = get_task(argv[0])
    prog = f"play {spec.id}"
    # Two passes: the run (from --checkpoint, or the newest one) decides the defaults of every other option, so
    # the options that choose it are parsed first and the rest are parsed against that run's settings.
    source, rest = parse_known(PlaySource, argv[1:], prog)
    checkpoint = None if source.checkpoint is None else local_checkpoint(source.checkpoint, source.log_root)
    env_cfg, agent_cfg = spec.env_cfg(), spec.agent_cfg()
    run_dir = None if checkpoint is None else _run_dir_of(checkpoint)
    if checkpoint is None and source.agent == "policy":
        run_dir = checkpoint = newest_run(source.log_root / agent_cfg.experiment_name)
    if run_dir is not None:
        try:
            env_cfg, agent_cfg = _run_settings(spec, run_dir, checkpoint, env_cfg, agent_cfg)
        except UsageError:
            if not wants_help(argv[1:]):
                raise
            # --help with a checkpoint that cannot be read: the task's defaults
    # A policy, and a baseline beside it, is judged on the robot file as shipped, whatever contact model it trained
    # on, from the starts and on the command ranges the task judges (flags can say else).
    env_cfg = env_cfg.as_judged()
    env_cfg.num_envs = source.num_episodes
    default = PlayConfig(
        env=env_cfg,
        checkpoint=checkpoint,
        log_root=source.log_root,
        agent=source.agent,
        num_episodes=source.num_episodes,
    )
    cfg = parse(PlayConfig, rest, prog, default)
    if cfg.num_episodes < 1 or cfg.env.num_envs < 1:
        raise UsageError("--num-episodes and --env.num-envs must be at least 1")
    if not 0 <= cfg.seed <= 2**32 - 1:  # NumPy's seeds fit in 32 bits (torch's OverflowError came from the run)
        raise UsageError(f"--seed must be between 0 and {2**32 - 1} (got {cfg.seed})")
    check_env(cfg.env)
    if cfg.video:
        check_video_size(cfg.video_width, cfg.video_height)
        if cfg.video_path is not None:
            check_video_path(cfg.video_path, "--video-path")
    if not 0 <= cfg.viewer_port <= 65535:
        raise UsageError(f"--viewer-port must be between 0 and 65535, got {cfg.viewer_port}")
    if cfg.viewer == "native":
        check_display()
    if cfg.viewer == "web":
        check_listen_host(cfg.viewer_host)
    if cfg.viewer != "none" and cfg.video:
        raise UsageError(f"--video records the episodes play judges; --viewer {cfg.viewer} has none: leave one out")
    _say_unused(cfg)
    if cfg.agent == "policy" and cfg.checkpoint is None:
        raise UsageError(
            f"no trained run of {spec.id} under {cfg.log_root}: train one (train {spec.id}), point --log-root at the"
            " runs' root, or pass --checkpoint (or use --agent random|zero)"
        )
    return spec.id, cfg, agent_cfg


def _say_unused(cfg: PlayConfig) -> None:
    """A warning for each option given without the one it belongs to (a video path without --video wrote nothing)."""
    default = PlayConfig(env=cfg.env)
    groups = (
        ("--video", cfg.video, ("video_path", "video_width", "video_height")),
        ("--viewer", cfg.viewer != "none", ("viewer_host", "viewer_port")),
    )
    for flag, on, names in groups:
        given = [f"--{n.replace('_', '-')}" for n in names if getattr(cfg, n) != getattr(default, n)]
        if given and not on:
            logger.warning("%s %s no effect without %s", ", ".join(given), "has" if len(given) == 1 else "have", flag)


def _run_settings(
    spec: TaskSpec, run_dir: Path, checkpoint: Path | None, env_cfg: EnvConfig, agent_cfg: AgentConfig
) -> tuple[EnvConfig, AgentConfig]:
    """The settings of the run in ``run_dir`` over the task's ``env_cfg`` and ``agent_cfg``."""
    # Read back where recorded: without them (a policy copied elsewhere) the task's defaults hold, not those of
    # the runs that predate a setting (ADDED: the lift unfiltered, the G1 at one action scale for every joint).
    env_yaml, agent_yaml = run_dir / "params" / "env.yaml", run_dir / "params" / "agent.yaml"
    # A run of another task (a flat-ground policy played on rough ground) plays in the task asked for: its
    # environment settings are that task's; the networks are still the run's.
    if env_yaml.is_file() and _trained_task(run_dir) in (None, spec.id):
        env_cfg = update_dataclass(env_cfg, recorded_values(load_yaml(env_yaml), "env"), env_yaml)
    if agent_yaml.is_file():
        agent_cfg = update_dataclass(agent_cfg, recorded_values(load_yaml(agent_yaml), "agent"), agent_yaml)
    elif checkpoint is not None:
        agent_cfg = _learners_defaults(spec, checkpoint, agent_cfg)
    return env_cfg, agent_cfg


def _trained_task(run_dir: Path) -> str | None:
    """The task a run trained, as its settings record it (None: not recorded)."""
    run_yaml = run_dir / "params" / "run.yaml"
    task = load_yaml(run_yaml).get("task") if run_yaml.is_file() else None
    return task if isinstance(task, str) else None


def _learners_defaults(spec: TaskSpec, checkpoint: Path, agent_cfg: AgentConfig) -> AgentConfig:
    """For a checkpoint without its run's settings beside it: the task's defaults for the learner that trained it
    (another learner's networks would not take it), with the hidden layers and normalisation its networks have (a
    run of the task's CPU defaults has smaller ones than the task's defaults here)."""
    from mjfleet.rl.checkpoint import files

    if files.is_onnx(checkpoint):
        return agent_cfg
    data = files.load_checkpoint(files.resolve_checkpoint(checkpoint))
    learner = files.checkpoint_learner(data)
    if learner != agent_cfg.learner:
        agent_cfg = spec.defaults(on_cpu=False, learner=learner)[1]
    recorded = data.get("learner_settings")
    if isinstance(recorded, dict):  # the settings its networks were built with (activation, action limit, ...)
        for group, values in recorded.items():
            current = getattr(agent_cfg, group, None)
            if dataclasses.is_dataclass(current) and not isinstance(current, type) and isinstance(values, dict):
                agent_cfg = dataclasses.replace(agent_cfg, **{group: update_dataclass(current, values, checkpoint)})
        return agent_cfg
    policy = agent_cfg.policy
    for role in ("actor", "critic"):
        saved = files.hidden_dims(files.network_state(data, role))
        if saved is not None:
            policy = dataclasses.replace(policy, **{f"{role}_hidden_dims": saved})
    normalised = files.normalises_observations(data)
    if normalised is not None:
        policy = dataclasses.replace(policy, obs_normalization=normalised)
    return dataclasses.replace(agent_cfg, policy=policy)


def _run_dir_of(checkpoint: Path) -> Path:
    """The run whose saved settings go with ``checkpoint``: a file's directory, a run directory, or the newest run of
    an experiment directory (the run :func:`~mjfleet.rl.checkpoint.files.resolve_checkpoint` will load from)."""
    if not checkpoint.is_dir():
        return checkpoint.parent
    if list_checkpoints(checkpoint):
        return checkpoint
    return newest_run(checkpoint) or checkpoint


def _say_other_model_files(run_dir: Path, env: EnvConfig) -> None:
    """A warning per robot file whose text is not the one the policy trained on (runs that recorded theirs)."""
    from mjfleet.runs.model_files import differences, fingerprint, recorded

    trained = recorded(run_dir)
    if trained is not None:
        for line in differences(trained, fingerprint(env.model_files(), env.model_records())):
            logger.warning(line)


def _say_other_task(checkpoint: Path, task_id: str) -> None:
    """A warning when ``checkpoint`` was trained on another task than the one it plays in (an ONNX file's sidecar,
    a checkpoint's run settings say which): with the same observation sizes it plays without another word."""
    from mjfleet.rl.checkpoint.files import is_onnx
    from mjfleet.rl.checkpoint.onnx import load_metadata

    try:
        if is_onnx(checkpoint):
            trained = load_metadata(checkpoint).get("task")
        else:
            trained = _trained_task(_run_dir_of(checkpoint))
    except UsageError:
        return  # loading the policy says what is wrong with its files
    if isinstance(trained, str) and trained != task_id:
        logger.warning("%s was trained on %s; it plays %s here", checkpoint, trained, task_id)


def play(task_id: str, cfg: PlayConfig, agent_cfg: AgentConfig) -> dict[str, object]:
    """Evaluate and return the summary dict that ``play`` prints."""

    from mjfleet.envs.env import MjEnv
    from mjfleet.rl.evaluation.episodes import Policy, evaluate, load_policy, random_policy, zero_policy
    from mjfleet.sim.warp_runtime import scoped_device
    from mjfleet.train.worker import seed_everything

    selection = select_local_devices(cfg.gpu_ids)
    if selection.num_gpus > 1:
        raise UsageError("play runs on one device; pass a single GPU index or None")
    device = selection.devices[0]
    checkpoint = resolve_play_checkpoint(cfg.checkpoint) if cfg.checkpoint is not None else None
    seed_everything(cfg.seed)
    spec = get_task(task_id)
    with scoped_device(device):
        env = MjEnv(spec.load_task_class()(cfg.env), device=device, seed=cfg.seed)
        policy: Policy
        if cfg.agent == "policy":
            assert checkpoint is not None
            _say_other_model_files(_run_dir_of(checkpoint), cfg.env)
            _say_other_task(checkpoint, task_id)
            policy = load_policy(checkpoint, env, agent_cfg, device)
        else:
            policy = random_policy(env) if cfg.agent == "random" else zero_policy(env)
        if cfg.viewer != "none":
            from mjfleet.viewer.run import run_viewer

            steps = run_viewer(cfg.viewer, env, policy, cfg.viewer_host, cfg.viewer_port)
            return {"task": task_id, "agent": cfg.agent, "viewer": cfg.viewer, "steps": steps}
        recorder = None
        # A baseline in a run's settings (``--agent random --checkpoint``) keeps off the policy's video.
        name = "play.mp4" if cfg.agent == "policy" else f"play_{cfg.agent}.mp4"
        default = (checkpoint.parent / "videos" / name) if checkpoint else Path("videos") / f"{task_id}.mp4"
        path = cfg.video_path or default
        if cfg.video:
            recorder = _recorder(env, spec.load_task_class().video_camera, cfg, path)
            env.observers.append(recorder.capture)  # each step's state before a reset: an episode's last frame too
        # The task's own time-outs may end every episode sooner (a 4 s motion's end, not the 10 s episode length).
        longest = min(env.max_episode_length, env.task.longest_episode_steps() or env.max_episode_length)
        logger.info(
            "playing %d episode%s of %s (up to %g s each, %d environment%s) with %s on %s%s",
            cfg.num_episodes,
            "" if cfg.num_episodes == 1 else "s",
            task_id,
            longest * env.step_dt,
            env.num_envs,
            "" if env.num_envs == 1 else "s",
            checkpoint if cfg.agent == "policy" else f"{cfg.agent} actions",
            device,
            f"; recording environment 0 into {path}, each frame rendered as it plays" if recorder else "",
        )
        try:
            summary = evaluate(env, policy, cfg.num_episodes)
        except BaseException:
            if recorder is not None:
                _close(recorder, keep=False)
            raise
    played = checkpoint if cfg.agent == "policy" else None  # a baseline's checkpoint only names the run's settings
    result: dict[str, object] = {"task": task_id, "agent": cfg.agent, "checkpoint": played and str(played)}
    if checkpoint is not None and played is None:
        result["settings_of"] = str(checkpoint)
    result.update(summary.as_dict())
    if recorder is not None:
        try:
            result["video"] = str(_close(recorder, keep=True))
        except (OSError, ValueError) as e:  # the folder vanished or filled up while the episodes played
            write_out(json.dumps(result) + "\n")  # what the episodes measured is not lost with the video
            raise UsageError(f"cannot write the video to {path}: {e}") from None
    return result


def _recorder(env: MjEnv, camera: str | None, cfg: PlayConfig, path: Path) -> WorldVideo:
    """World 0's video, each frame encoded into ``path`` as it is drawn; one line when it cannot render or write."""
    from mjfleet.render.video import VideoFile, WorldVideo

    try:
        sink = VideoFile(path, fps=1.0 / env.step_dt)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot write the video to {path}: {e}") from None
    try:
        return WorldVideo(
            env.sim,
            0,
            camera,
            cfg.video_height,
            cfg.video_width,
            ghost=partial(env.task.ghost_qpos, env),
            sink=sink,
            markers=partial(env.task.video_markers, env),
        )
    except Exception as e:  # no OpenGL platform here: MuJoCo raises ImportError, FatalError or RuntimeError
        sink.abort()
        reason = (str(e).strip() or type(e).__name__).splitlines()[0]
        raise UsageError(
            f"--video: cannot render ({reason}); MUJOCO_GL={os.environ.get('MUJOCO_GL', '')} needs an EGL"
            " loader and driver (Debian/Ubuntu: libegl1 and libegl-mesa0, or the NVIDIA driver's)"
        ) from None


def _close(recorder: WorldVideo, keep: bool) -> Path | None:
    """Free the renderer; put the video in place (``keep``) or drop it."""
    sink = recorder.sink
    assert sink is not None
    try:
        if not keep:
            sink.abort()
            return None
        return sink.finish()
    finally:
        recorder.close()


@exits_on_usage_error
def main(argv: list[str] | None = None) -> None:
    """Console entry point of ``play``."""
    configure_logging()
    task_id, cfg, agent_cfg = parse_args(sys.argv[1:] if argv is None else argv)
    result = play(task_id, cfg, agent_cfg)
    write_out(json.dumps(result) + "\n")


if __name__ == "__main__":
    from mjfleet.runtime.process_end import run_as_process

    run_as_process(main)
