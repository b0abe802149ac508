"""``--stop-when``: the condition's grammar, its streak, the evaluation window it reads, and real training runs that
end on it, one of them on a task whose deterministic and sampled actions succeed differently by construction (two
workers stopping together: ``tests/test_distributed_training.py``)."""

from __future__ import annotations

import copy
import dataclasses
import itertools
import logging
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv
from mjfleet.errors import UsageError
from mjfleet.rl.checkpoint.files import list_checkpoints, load_checkpoint
from mjfleet.rl.config import AgentConfig
from mjfleet.rl.evaluation.simulation import SeparateEvaluation
from mjfleet.rl.evaluation.stop_condition import StopCondition, StopConditionTracker, as_condition
from mjfleet.rl.evaluation.window import EvaluationWindow
from mjfleet.rl.reporting.records import WorkerResult
from mjfleet.rl.runner import Runner
from mjfleet.runs.start import StartPoint
from mjfleet.runtime.context import DistributedContext
from mjfleet.tasks import registry
from mjfleet.tasks.cartpole.cartpole import CartpoleTask, balance_config
from mjfleet.tasks.spec import TaskSpec
from mjfleet.train.config import TrainConfig
from mjfleet.train.worker import train_worker

from .conftest import make_env
from .helpers import make_run_dir, rsl_ppo, small_train_config


@pytest.mark.parametrize(
    ("text", "key", "op", "value"),
    [
        ("success>=0.9", "Eval/success", ">=", 0.9),
        (" return > 20 ", "Eval/return", ">", 20.0),
        ("length<=1e3", "Eval/length", "<=", 1000.0),
        ("Episode/success>0.5", "Eval/success", ">", 0.5),
        ("Eval/success>0.5", "Eval/success", ">", 0.5),
        ("Metrics/lin_vel_error<0.2", "Eval_Metrics/lin_vel_error", "<", 0.2),
        ("Eval_Metrics/lin_vel_error<0.2", "Eval_Metrics/lin_vel_error", "<", 0.2),
        ("Episode_Termination/fall<-0.5", "Eval_Termination/fall", "<", -0.5),
    ],
)
def test_parse(text: str, key: str, op: str, value: float) -> None:
    assert StopCondition.parse(text) == StopCondition(key, op, value)


def test_a_condition_is_shown_with_every_digit_it_has() -> None:
    """Shown rounded to 6 digits, ``--finish``'s ``--help`` offered ``return>123.457`` for ``return>123.456789``:
    copied, another condition."""
    assert str(StopCondition.parse("return>123.456789")) == "Eval/return > 123.456789"
    assert str(StopCondition.parse("success>=0.9")) == "Eval/success >= 0.9"
    assert str(StopCondition.parse("length>=100")) == "Eval/length >= 100"


@pytest.mark.parametrize("text", ["success", "success==1", ">=0.9", "success>=", "success>=nan", "success>=inf"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--stop-when"):
        StopCondition.parse(text)


def test_streak_needs_consecutive_iterations_and_resets() -> None:
    tracker = StopConditionTracker(StopCondition.parse("success>=0.9"), 3)
    seen = [
        tracker.update(episode)
        for episode in (
            {"Eval/success": 0.95},
            {"Eval/success": 0.9},
            {"Eval/success": 0.5},
            {"Eval/success": 1.0},
            {"Eval/success": math.nan},
            {"Eval/success": 0.91},
            {"Episode/success": 0.0},  # the training episodes' statistic is another one: no evidence either way
            {"Eval/success": 0.92},
            {"Eval/success": 0.93},
        )
    ]
    assert seen == [False, False, False, False, False, False, False, False, True]


def test_key_must_be_one_the_task_logs() -> None:
    condition = StopCondition.parse("Metrics/speed>1")
    with pytest.raises(UsageError, match="Metrics/pole_up_fraction"):
        condition.check_key(["Episode/return", "Episode/length", "Episode/success", "Metrics/pole_up_fraction"])
    for text in ("Metrics/pole_up_fraction>1", "Eval_Metrics/pole_up_fraction>1"):
        StopCondition.parse(text).check_key(["Metrics/pole_up_fraction"])


def test_the_task_checks_accept_the_evaluation_names() -> None:
    from mjfleet.envs.task import declared_stat_keys
    from mjfleet.tasks.registry import get_task

    spec = get_task("cartpole-balance")
    declared = declared_stat_keys(spec.load_task_class(), spec.env_cfg())
    for text in (
        "success>=0.9",
        "Eval/return>1",
        "Eval_Termination/pole_fallen<0.1",
        "Eval_Metrics/pole_up_fraction>1",
    ):
        StopCondition.parse(text).check_key(declared)
    with pytest.raises(UsageError, match="no statistic 'Metrics/nothing'"):
        StopCondition.parse("Eval_Metrics/nothing>1").check_key(declared)


def test_window_covers_the_most_recent_iterations_holding_enough_episodes() -> None:
    window = EvaluationWindow(["Episode/success", "Episode/return"], episodes=4)
    window.add([1.0, 10.0], [2.0, 2.0])  # two episodes, one success
    window.add([0.0, 0.0], [0.0, 0.0])  # no episode ended: nothing changes
    assert (window.count, window.full) == (2, False)
    assert window.means() == {"Eval/success": 0.5, "Eval/return": 5.0}
    window.add([3.0, 6.0], [3.0, 3.0])
    assert (window.count, window.full) == (5, True)  # the oldest iteration is still needed for 4 episodes
    window.add([4.0, 4.0], [4.0, 4.0])  # four newer episodes suffice: the older iterations leave
    assert (window.count, window.means()) == (4, {"Eval/success": 1.0, "Eval/return": 1.0})
    restored = EvaluationWindow(["Episode/success", "Episode/return"], episodes=4)
    assert restored.load_state_dict(window.state_dict()) and restored.means() == window.means()
    # Its means are the checkpoint's until this start's own episodes have pushed every restored one out.
    assert restored.restored_only and not window.restored_only
    restored.add([1.0, 1.0], [1.0, 1.0])
    assert not restored.restored_only  # one of this start's episodes is among them
    other_task = EvaluationWindow(["Episode/success"], episodes=4)
    assert not other_task.load_state_dict(window.state_dict()) and other_task.count == 0


def test_how_many_of_a_workers_environments_evaluate() -> None:
    assert [AgentConfig().evaluation_envs(n) for n in (4096, 1024, 64, 3)] == [128, 128, 16, 0]  # at most a quarter
    assert AgentConfig(eval_envs=0).evaluation_envs(1024) == 0
    # The job's evaluation is split across its workers (rounded up): it does not grow with them.
    assert [AgentConfig().evaluation_envs(1024, workers) for workers in (1, 2, 3, 8, 256)] == [128, 64, 43, 16, 1]
    with pytest.raises(UsageError, match=r"--agent\.eval-envs must not be negative"):
        AgentConfig(eval_envs=-1).evaluation_envs(64)
    with pytest.raises(UsageError, match=r"--agent\.eval-episodes must be at least 1"):
        AgentConfig(eval_episodes=0).evaluation_envs(64)
    with pytest.raises(UsageError, match=r"--agent\.eval-steps-per-step must be at least 1"):
        AgentConfig(eval_steps_per_step=0).evaluation_envs(64)
    with pytest.raises(UsageError, match=r"--agent\.eval-step-interval must be at least 1"):
        AgentConfig(eval_step_interval=0).evaluation_envs(64)


def test_the_evaluation_steps_four_times_per_step_on_the_cpu_and_once_on_a_gpu() -> None:
    default = AgentConfig()
    assert (default.evaluation_steps(on_gpu=False), default.evaluation_steps(on_gpu=True)) == (4, 1)
    assert AgentConfig(eval_steps_per_step=2).evaluation_steps(on_gpu=True) == 2
    # 24 steps of 1024 training environments and 32 evaluation environments stepped 4 times per training step (once
    # until the run nears its stop condition); where --agent.eval-envs does not divide, the evaluation rounds down.
    assert default.env_steps_per_iteration(1024, on_gpu=False, evaluation_steps=4) == 24 * (1024 + 32 * 4)
    assert default.env_steps_per_iteration(1024, on_gpu=False) == 24 * (1024 + 32)
    always = AgentConfig(eval_speedup="always", eval_step_interval=2)
    assert always.env_steps_per_iteration(1024, on_gpu=False) == 24 * (1024 + 32 * 4)
    assert AgentConfig(eval_envs=10).env_steps_per_iteration(1024, on_gpu=False, evaluation_steps=4) == 24 * (
        1024 + 2 * 4
    )
    assert AgentConfig(eval_envs=0).env_steps_per_iteration(1024, on_gpu=False) == 24 * 1024
    # One evaluation step every 2 training steps until near (its first of 24 and every second after), every one of
    # 25: 13 of them.
    assert AgentConfig(eval_step_interval=2).env_steps_per_iteration(1024, on_gpu=False) == 24 * 1024 + 12 * 32
    odd = AgentConfig(eval_step_interval=2, num_steps_per_env=25)
    assert odd.env_steps_per_iteration(1024, on_gpu=False) == 25 * 1024 + 13 * 32
    assert odd.env_steps_per_iteration(1024, on_gpu=False, evaluation_steps=4) == 25 * (1024 + 32 * 4)
    assert AgentConfig(eval_steps_per_step=2).env_steps_per_iteration(1024, on_gpu=False, world_size=3) == 3 * 24 * (
        1024 + 21
    )
    # Two CPU workers: 64 evaluation environments each, 16 stepped 4 times.
    assert default.separate_evaluation_envs(1024, on_gpu=False, world_size=2) == 16


def test_the_evaluation_comes_on_top_of_the_environments_on_every_device() -> None:
    default = AgentConfig()
    # CPU: PPO trains on all 1024; the evaluation has a simulation of its own.
    assert default.training_simulation_envs(1024, on_gpu=False) == 1024
    # Evaluation in the training simulation: 128 more after the 1024, on the CPU as on a GPU.
    in_sim = AgentConfig(eval_steps_per_step=1)
    assert in_sim.training_simulation_envs(1024, on_gpu=False) == 1152
    assert default.training_simulation_envs(1024, on_gpu=True) == 1152
    assert default.env_steps_per_iteration(1024, on_gpu=True) == 24 * 1152
    # GPU with an evaluation simulation of its own: 1024 train, 64 evaluate twice per step.
    two = AgentConfig(eval_steps_per_step=2)
    assert two.training_simulation_envs(1024, on_gpu=True) == 1024
    assert two.env_steps_per_iteration(1024, on_gpu=True, evaluation_steps=2) == 24 * (1024 + 128)
    assert AgentConfig(eval_envs=0).env_steps_per_iteration(1024, on_gpu=True) == 24 * 1024


def test_evaluation_environments_act_as_play_does_and_stay_out_of_ppos_storage() -> None:
    cfg = small_train_config(num_envs=12, steps=4)
    env = make_env(num_envs=16)
    runner = Runner(env, cfg.agent, DistributedContext(device="cpu"), None, eval_envs=4)
    assert (runner.train_envs, runner.eval_envs, env.first_eval_env) == (12, 4, 12)
    assert rsl_ppo(runner).storage.num_envs == 12  # PPO's returns, advantages and losses see the training rows only
    play_policy = copy.deepcopy(runner.learner.policy()).eval()  # what play loads: the actor before this update
    seen: list[tuple[TensorDict, torch.Tensor]] = []
    runner.step_hooks.append(lambda r: seen.append((r.env.get_observations().clone(), r.env.actions.clone())))
    runner.learn(1)
    clip = env.cfg.clip_actions
    with torch.inference_mode():
        for (obs, _), (_, actions) in itertools.pairwise(seen):
            expected = play_policy(obs).clamp(-clip, clip)
            assert torch.equal(actions[12:], expected[12:])  # the actor's mean
            assert not torch.allclose(actions[:12], expected[:12])  # sampled around it


def test_training_ends_when_the_condition_holds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Without evaluation environments the condition reads the training episodes. Every iteration ends some of them
    # (random episode starts), so "length >= 1" holds from iteration 1 on.
    cfg = small_train_config(
        iterations=40, init_at_random_ep_len=True, stop_when="length>=1", stop_when_iterations=3, log_root=tmp_path
    )
    cfg.agent.save_interval = 100
    run_dir = make_run_dir(tmp_path, "stop")
    with caplog.at_level(logging.WARNING, logger="mjfleet"):
        result = train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    assert result.condition_met_at == result.final_iteration == 3
    assert [i for i, _ in list_checkpoints(run_dir)] == [3]  # the stopping iteration is saved
    assert all(r.episode["Episode/length"] >= 1 for r in result.records)
    assert all(r.evaluation == {} for r in result.records)
    assert "reads the training episodes' Episode/length instead of Eval/length" in caplog.text


def test_training_past_a_met_condition_counts_it_afresh(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # --finish with more iterations, or --resume, from the checkpoint a condition stopped: its streak (and window)
    # met the condition already, and stopped the continuation after one iteration.
    cfg = small_train_config(
        iterations=40, init_at_random_ep_len=True, stop_when="length>=1", stop_when_iterations=3, log_root=tmp_path
    )
    first = train_worker(cfg, make_run_dir(tmp_path, "stop"), DistributedContext(device="cpu"))
    assert first.condition_met_at == 3
    own = StartPoint(Path(first.run_dir) / "model_3.pt", 43, 3)  # --finish with more iterations
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        second = train_worker(cfg, None, DistributedContext(device="cpu"), start=own)
    assert second.condition_met_at == 6  # three iterations in a row again
    assert "held at the checkpoint this start continues from: training goes on" in caplog.text
    again = dataclasses.replace(cfg, resume=Path(first.run_dir) / "model_3.pt")  # a new run counts its own anyway
    assert train_worker(again, make_run_dir(tmp_path, "again"), DistributedContext(device="cpu")).condition_met_at == 6


def test_a_start_without_the_condition_forgets_its_streak() -> None:
    # A start without --stop-when saved the old condition's streak on, for a later --finish to pick up.
    cfg = small_train_config(num_envs=8, steps=4)
    runner = Runner(make_env(num_envs=8), cfg.agent, DistributedContext(device="cpu"), None)
    runner.stop_progress = {"condition": "Eval/success >= 0.95", "streak": 2}
    runner.learn(1)
    assert runner.stop_progress == {"condition": "", "streak": 0, "met": False}


def test_a_checkpoint_saved_while_a_failed_check_waits_keeps_its_wait(caplog: pytest.LogCaptureFixture) -> None:
    # While the check waits, the condition holds on the window and its streak grows past the count without a stop:
    # taken for a met condition, a restart cleared the window and skipped the wait.
    cfg = small_train_config(num_envs=8, steps=4, stop_when="length>=1", stop_when_iterations=3)
    runner = Runner(
        make_env(num_envs=8),
        cfg.agent,
        DistributedContext(device="cpu"),
        None,
        stop_condition=as_condition("length>=1"),
        stop_when_iterations=3,
    )
    condition = runner._resolved_condition()
    runner.stop_progress = {"condition": str(condition), "streak": 5, "met": False}
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        runner.learn(1)
    assert "held at the checkpoint" not in caplog.text


class SteadyHandTask(CartpoleTask):
    """Cart-pole without terminations, whose episode succeeds when its actions barely change from step to step: the
    actor's mean, smooth in the state, passes; actions sampled around it with the initial standard deviation of 1
    change by about 1.1 per step and fail."""

    MAX_MEAN_CHANGE = 0.3

    def setup(self, env: MjEnv) -> None:
        super().setup(env)
        self._change = torch.zeros(env.num_envs, device=env.device)

    def reset(self, env: MjEnv, env_ids: torch.Tensor) -> None:
        super().reset(env, env_ids)
        self._change[env_ids] = 0.0

    def after_step(self, env: MjEnv) -> None:
        super().after_step(env)
        self._change += (env.actions - env.last_actions).abs().mean(dim=-1)

    def termination_names(self) -> tuple[str, ...]:
        return ()

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {}

    def success(self, env: MjEnv, env_ids: torch.Tensor, time_outs: torch.Tensor) -> torch.Tensor:
        steps = env.episode_length_buf[env_ids].clamp(min=1).float()
        return time_outs & (self._change[env_ids] / steps < self.MAX_MEAN_CHANGE)


@pytest.fixture
def steady_hand(monkeypatch: pytest.MonkeyPatch) -> str:
    """Registers ``SteadyHandTask`` (1 s episodes) for this test only."""
    registry.all_tasks()  # the built-in tasks first, into the registry the test then copies
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register(
        TaskSpec(
            id="test-steady-hand",
            description="Succeed by keeping the actions steady.",
            task_class=SteadyHandTask,
            env_cfg=lambda: dataclasses.replace(balance_config(), episode_length_s=1.0),
            agent_cfg=lambda: AgentConfig(experiment_name="test_steady_hand"),
        )
    )
    return "test-steady-hand"


def _steady_hand_run(
    task_id: str, eval_envs: int, confirm: bool = True, confirm_episodes: int = 16, eval_steps: int = 1
) -> WorkerResult:
    cfg = small_train_config(task_id, num_envs=64, iterations=8, steps=25, stop_when="success>=0.9")
    cfg.stop_when_iterations = 2
    cfg.agent.eval_envs, cfg.agent.eval_episodes, cfg.agent.eval_steps_per_step = eval_envs, 16, eval_steps
    cfg.agent.eval_confirm, cfg.agent.eval_confirm_episodes = confirm, confirm_episodes
    cfg.agent.eval_speedup = "always"  # the training episodes never come near: stepped twice from the start
    return train_worker(cfg, None, DistributedContext(device="cpu"))


def test_the_condition_reads_the_deterministic_policys_episodes(steady_hand: str) -> None:
    result = _steady_hand_run(steady_hand, eval_envs=16)
    # 16 evaluation environments (of the 64; 48 train) end 16 episodes every 50 steps (2 iterations): the
    # window first holds enough episodes at iteration 2 and changes next at 4, the second window in a row.
    assert result.condition_met_at == result.final_iteration == 4
    assert all(r.evaluation["Eval/success"] == 1.0 for r in result.records[1:])
    # The training episodes, with sampled actions, never succeed: they cannot have ended the run.
    trained = [r.episode["Episode/success"] for r in result.records if "Episode/success" in r.episode]
    assert trained and max(trained) == 0.0


@pytest.mark.parametrize(("confirm", "eval_steps"), [(True, 1), (True, 2), (False, 1)])
def test_the_run_stops_when_the_current_policy_from_a_fresh_start_meets_the_condition_too(
    steady_hand: str,
    confirm: bool,
    eval_steps: int,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    verdicts: list[tuple[int, int, float]] = []
    judge = SeparateEvaluation.judge

    def first_verdict_fails(self: SeparateEvaluation, policy: Any, rounds: int) -> tuple[torch.Tensor, torch.Tensor]:
        sums, counts = judge(self, policy, rounds)
        verdicts.append((self.env.num_envs, rounds, float(counts.max())))
        return (sums * 0 if len(verdicts) == 1 else sums), counts  # the first: as if the policy had just got worse

    monkeypatch.setattr(SeparateEvaluation, "judge", first_verdict_fails)
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        result = _steady_hand_run(steady_hand, 16, confirm, confirm_episodes=24, eval_steps=eval_steps)
    if not confirm:  # the window alone: two windows in a row, of iterations 2 and 4
        assert verdicts == [] and result.condition_met_at == 4
        return
    # Two windows in a row hold at iteration 4: stepped once per training step, the window changes every second
    # iteration (2 and 4); an evaluation of 8 environments of its own stepped twice per training step, whose first
    # episodes start staggered, changes it at 3 and 4. The current policy, judged on 24 fresh episodes (one round
    # of a simulation of 24 environments of the check's own, each episode counted once), is said not to meet the
    # condition; the streak starts over and holds again two windows later, where the policy meets the condition
    # from a fresh start too.
    first, again = 4, (8 if eval_steps == 1 else 6)
    assert verdicts == [(24, 1, 24.0), (24, 1, 24.0)]
    assert result.condition_met_at == result.final_iteration == again
    said = [r.getMessage() for r in caplog.records if "from a fresh start" in r.getMessage()]
    assert said[0].startswith(f"iteration {first}:") and "not met, training goes on" in said[0]
    assert len(said) == 2 and said[1].startswith(f"iteration {again}:")
    assert "Eval/success = 1.000: the condition holds" in said[1]


def test_after_a_failed_check_the_next_waits_for_as_many_steps_of_training_as_it_played(
    steady_hand: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The condition is to hold for one iteration; the first check, of 48 one-second episodes (48 x 51 = 2,448
    env-steps), fails. Training takes 60 x 25 = 1,500 env-steps per iteration (48 training environments and 12
    evaluating: at most a quarter), so the next check waits two iterations (3,000 >= 2,448), though the window holds
    at each."""
    checked: list[int] = []
    judge = SeparateEvaluation.judge

    def first_verdict_fails(self: SeparateEvaluation, policy: Any, rounds: int) -> tuple[torch.Tensor, torch.Tensor]:
        sums, counts = judge(self, policy, rounds)
        checked.append(self.env.num_envs * self.round_steps)
        return (sums * 0 if len(checked) == 1 else sums), counts

    monkeypatch.setattr(SeparateEvaluation, "judge", first_verdict_fails)
    cfg = small_train_config(steady_hand, num_envs=48, iterations=8, steps=25, stop_when="success>=0.9")
    cfg.stop_when_iterations = 1
    cfg.agent.eval_envs, cfg.agent.eval_episodes, cfg.agent.eval_steps_per_step = 16, 16, 1
    cfg.agent.eval_confirm_episodes = 48
    with caplog.at_level(logging.INFO, logger="mjfleet"):
        result = train_worker(cfg, None, DistributedContext(device="cpu"))
    said = [r.getMessage() for r in caplog.records if "from a fresh start" in r.getMessage()]
    assert checked == [48 * 51, 48 * 51] and len(said) == 2 and result.records[0].env_steps == 60 * 25
    # The window holds once 16 evaluation episodes have ended, is checked there, and again two iterations later.
    first = int(said[0].split(":")[0].removeprefix("iteration "))
    assert f"the next check from iteration {first + 2}" in said[0]
    assert said[1].startswith(f"iteration {first + 2}:") and result.condition_met_at == first + 2
    assert all(r.evaluation.get("Eval/success") == 1.0 for r in result.records[first - 1 :])


def test_without_evaluation_the_same_condition_reads_the_training_episodes(steady_hand: str) -> None:
    result = _steady_hand_run(steady_hand, eval_envs=0)
    assert result.condition_met_at is None and result.final_iteration == 8


def test_a_continued_run_carries_the_evaluation_window_on_and_repeats_exactly(tmp_path: Path) -> None:
    def config(iterations: int, resume: Path | None = None) -> TrainConfig:
        cfg = small_train_config(iterations=iterations, steps=32, log_root=tmp_path, resume=resume)
        cfg.agent.eval_envs, cfg.agent.eval_episodes = 16, 10_000  # the window keeps every episode
        cfg.agent.eval_steps_per_step = 1  # in the training simulation, whose state the checkpoint carries
        return cfg

    first_dir = make_run_dir(tmp_path, "window", "first")
    first = train_worker(config(3), first_dir, DistributedContext(device="cpu"))
    saved = load_checkpoint(first_dir / "model_3.pt")["eval_window"]
    assert sum(max(counts) for _, counts in saved["iterations"]) == first.records[-1].evaluation_episodes > 0
    own = StartPoint(first_dir / "model_3.pt", 5, 3)  # the run's own checkpoint: a restart, --finish
    again = [train_worker(config(2), None, DistributedContext(device="cpu"), start=own) for _ in range(2)]
    assert again[0].records[0].evaluation_episodes >= first.records[-1].evaluation_episodes  # carried on, not anew
    for a, b in zip(again[0].records, again[1].records, strict=True):
        assert (a.evaluation, a.evaluation_episodes, a.losses) == (b.evaluation, b.evaluation_episodes, b.losses)
    # --resume starts a new run, whose window holds its own episodes alone (the same ones: same weights, same streams).
    new = train_worker(config(2, first_dir), None, DistributedContext(device="cpu"))
    carried = first.records[-1].evaluation_episodes
    assert new.records[0].evaluation_episodes == again[0].records[0].evaluation_episodes - carried


def test_a_condition_on_the_evaluation_window_holds_once_by_default() -> None:
    condition = StopCondition.parse("success>=0.9")
    assert condition.key == "Eval/success" and condition.default_streak == 1  # already a mean over 50 episodes
    assert condition.on_training_episodes().default_streak == 10  # one iteration's episodes: noisier


def test_evaluation_in_a_simulation_of_its_own_stepped_twice_per_step(steady_hand: str) -> None:
    cfg = small_train_config(steady_hand, num_envs=64, iterations=8, steps=25, stop_when="success>=0.9")
    cfg.stop_when_iterations = 1
    cfg.agent.eval_envs, cfg.agent.eval_episodes, cfg.agent.eval_steps_per_step = 16, 8, 2
    cfg.agent.eval_speedup = "always"
    result = train_worker(cfg, None, DistributedContext(device="cpu"))
    # 64 environments train; the evaluation simulation holds 8, stepped twice per training step: 80 env-steps per
    # step, as 16 evaluation environments in the training simulation would take.
    assert [r.env_steps for r in result.records] == [2000, 4000]
    # Its staggered first episodes do not count; the next ones (50 of its steps, 25 training steps) all end within
    # iteration 2, where a 50-step episode stepped once per training step would span two iterations.
    first, second = result.records
    assert first.evaluation == {} and second.evaluation_episodes == 8
    assert second.evaluation["Eval/success"] == 1.0 and second.evaluation["Eval/length"] == 50.0
    assert result.condition_met_at == 2 and second.episode["Episode/success"] == 0.0


def test_evaluation_rows_of_the_training_simulation_start_afresh_as_rows_the_task_judges() -> None:
    """Every row began as a training row (here: commands from 30% of the ranges); the rows set aside for evaluation
    start a new episode, with the full commands the task gives evaluation rows."""
    spec = registry.get_task("go1-velocity-flat")
    cfg = spec.env_cfg()
    narrow = dataclasses.replace(cfg.commands.curriculum, start=0.3)  # type: ignore[attr-defined]
    commands = dataclasses.replace(cfg.commands, curriculum=narrow, standing_fraction=0.0)  # type: ignore[attr-defined]
    env = MjEnv(spec.load_task_class()(dataclasses.replace(cfg, num_envs=64, commands=commands)), seed=0)
    task: Any = env.task
    limit = float(task.commands.command[:32].abs().max())
    env.split_evaluation(32)
    assert torch.all(env.episode_length_buf[32:] == 0)
    assert float(task.commands.command[32:].abs().max()) > 1.5 * limit  # drawn from the full ranges


def test_each_check_starts_from_the_task_state_a_fresh_simulation_has_and_the_window_resumes_from_resets() -> None:
    """A check plays as play does: every round from the task's state as built (the terrain curriculum's levels), and
    the windowed evaluation afterwards keeps its own levels and starts its episodes from resets."""
    spec = registry.get_task("go1-velocity-rough")
    cfg = dataclasses.replace(spec.env_cfg().as_judged(), num_envs=16, episode_length_s=0.4)
    evaluation = SeparateEvaluation(MjEnv(spec.load_task_class()(cfg), seed=1), 1, "cpu")
    env, task = evaluation.env, evaluation.env.task
    fresh = task.curriculum.levels.clone()  # type: ignore[attr-defined]
    seen: list[torch.Tensor] = []
    reset_all = env.reset_all

    def watched_reset_all() -> None:
        seen.append(task.curriculum.levels.clone())  # type: ignore[attr-defined]
        reset_all()

    env.reset_all = watched_reset_all  # type: ignore[method-assign]
    policy = lambda obs: torch.ones(16, env.num_actions)  # noqa: E731  (falls: the levels would move down)
    task.curriculum.levels[:] = 3  # type: ignore[attr-defined]  # the window's, moved by its own episodes
    for _ in range(2):
        evaluation.judge(policy, 2)
    checks = seen[0:2] + seen[3:5]  # each check's rounds; the reset after each check starts the window's episodes
    assert all(torch.equal(levels, fresh) for levels in checks)
    assert torch.all(task.curriculum.levels == 3)  # type: ignore[attr-defined]
    assert torch.all(env.task._steps[env.from_reset] == 0)  # type: ignore[attr-defined]


def test_play_counts_episodes_by_environment_and_round_not_by_which_end_first() -> None:
    """With more environments than episodes, the episodes that end first are the short, failed ones; the count is
    the first episode of the first ``num_episodes`` environments."""
    from mjfleet.rl.evaluation.episodes import evaluate

    class EarlyFailures:
        """8 environments; 0 and 1 fail after 3 steps, the others succeed after 10."""

        num_envs, num_actions, device, max_episode_length = 8, 1, torch.device("cpu"), 10

        def reset_all(self) -> None:
            self.t = torch.zeros(8, dtype=torch.long)

        def get_observations(self) -> None:
            return None

        def step(self, actions: Any) -> tuple[None, None, torch.Tensor, dict[str, Any]]:
            self.t += 1
            end = ((torch.arange(8) < 2) & (self.t == 3)) | (self.t == 10)
            ids = end.nonzero().squeeze(-1)
            extras: dict[str, Any] = {}
            if ids.numel():
                success = (ids >= 2).float()
                values = {"Episode/return": success, "Episode/length": self.t[ids].float(), "Episode/success": success}
                extras["episodes"] = (ids, values)
                self.t[ids] = 0
            return None, None, end, extras

    assert evaluate(EarlyFailures(), lambda obs: None, 6).success_rate == pytest.approx(4 / 6)  # type: ignore[arg-type]
    assert evaluate(EarlyFailures(), lambda obs: None, 8).success_rate == pytest.approx(6 / 8)  # type: ignore[arg-type]
    assert evaluate(EarlyFailures(), lambda obs: None, 12).success_rate == pytest.approx(8 / 12)  # type: ignore[arg-type]


def test_a_continued_run_goes_on_counting_the_iterations_its_condition_held(tmp_path: Path) -> None:
    """The condition must hold 4 iterations in a row; the first run ends after 2 (its iteration budget) with a streak
    of 2: continued, it stops 2 iterations later, where a condition of another name starts counting from 0, as does a
    new run from its checkpoint."""

    def config(iterations: int, condition: str, resume: Path | None = None) -> TrainConfig:
        cfg = small_train_config(iterations=iterations, steps=64, log_root=tmp_path, resume=resume, stop_when=condition)
        cfg.agent.eval_envs, cfg.stop_when_iterations = 0, 4
        return cfg

    first_dir = make_run_dir(tmp_path, "streak", "first")
    first = train_worker(config(2, "Episode/length>=1"), first_dir, DistributedContext(device="cpu"))
    assert first.condition_met_at is None
    assert load_checkpoint(first_dir / "model_2.pt")["stop_progress"]["streak"] == 2
    own = StartPoint(first_dir / "model_2.pt", 12, 2)  # the run's own checkpoint: a restart, --finish
    same = train_worker(config(10, "Episode/length>=1"), None, DistributedContext(device="cpu"), start=own)
    assert same.condition_met_at == 4
    other = train_worker(config(10, "Episode/length>=2"), None, DistributedContext(device="cpu"), start=own)
    assert other.condition_met_at == 6
    # --resume starts a new run: its condition counts its own iterations (it stopped at once, on the other run's).
    new = train_worker(config(10, "Episode/length>=1", first_dir), None, DistributedContext(device="cpu"))
    assert new.condition_met_at == 6


def test_the_evaluation_steps_faster_only_near_the_condition(steady_hand: str, tmp_path: Path) -> None:
    """``--agent.eval-speedup near-stop`` (the default): once per training step until the condition's statistic
    comes within a tenth of its threshold, on the training episodes or the evaluation window; then all its steps,
    in a continued run of the same condition too (its checkpoints say so)."""
    # Episodes last 50 steps (1 s): near ``length>=54`` (within 5.4), never meeting it. The training episodes, begun
    # together, first end in iteration 2: from iteration 3 the evaluation steps twice per training step.
    cfg = small_train_config(steady_hand, num_envs=64, iterations=6, steps=25, stop_when="length>=54")
    cfg.agent.eval_envs, cfg.agent.eval_episodes, cfg.agent.eval_steps_per_step = 16, 8, 2
    run_dir = make_run_dir(tmp_path, "pace")
    result = train_worker(cfg, run_dir, DistributedContext(device="cpu"))
    own = StartPoint(run_dir / "model_6.pt", 7, 6)  # the run continued (a restart, --finish)
    continued = train_worker(cfg, None, DistributedContext(device="cpu"), start=own)
    assert continued.records[0].env_steps - result.records[-1].env_steps == 2000
    totals = [0, *(r.env_steps for r in result.records)]
    per_iteration = [b - a for a, b in itertools.pairwise(totals)]
    # 64 training environments and the evaluation's 8 stepped once per training step (25 steps an iteration), then
    # twice; without a condition, once throughout.
    assert per_iteration == [1800, 1800, 2000, 2000, 2000, 2000] and result.condition_met_at is None
    rates = [r.env_steps_per_s * (r.collect_s + r.learn_s) for r in result.records]
    assert rates == pytest.approx(per_iteration)  # each iteration's rate of the steps it took (not the next's)
    cfg.stop_when = None
    unconditioned = train_worker(cfg, None, DistributedContext(device="cpu"))
    assert [r.env_steps for r in unconditioned.records] == [1800 * i for i in range(1, 7)]
    # One evaluation step every 2 training steps until near (13 of an iteration's 25): the same stop statistics,
    # counted as taken.
    cfg.stop_when, cfg.agent.eval_step_interval = "length>=54", 2
    slower = train_worker(cfg, None, DistributedContext(device="cpu"))
    totals = [0, *(r.env_steps for r in slower.records)]
    assert [b - a for a, b in itertools.pairwise(totals)] == [1704, 1704, 2000, 2000, 2000, 2000]


def test_the_evaluation_steps_on_every_intervalth_training_step_until_it_speeds_up() -> None:
    spec = registry.get_task("cartpole-balance")
    env = MjEnv(spec.load_task_class()(spec.env_cfg()), seed=1)
    evaluation = SeparateEvaluation(env, 4, "cpu", first_steps=1, first_interval=2)

    def policy(obs: TensorDict) -> torch.Tensor:
        return torch.zeros(env.num_envs, env.num_actions)

    def iteration(steps: int) -> int:
        before = env.common_step_counter
        for step in range(steps):
            evaluation.step(policy, step)
        return env.common_step_counter - before

    assert [iteration(25), iteration(24), iteration(1)] == [13, 12, 1]  # the first of each iteration, every second
    assert not evaluation.at_full_pace and evaluation.speed_up() and evaluation.at_full_pace
    assert iteration(25) == 100 and not evaluation.speed_up()


def test_a_statistic_near_the_threshold_speeds_the_evaluation_up() -> None:
    condition = StopCondition.parse("success>=0.95")
    assert [condition.nearly_holds(v) for v in (0.85, 0.855, 0.9, 1.0, math.nan)] == [False, True, True, True, False]
    error = StopCondition.parse("Metrics/lin_vel_error<0.2")
    assert [error.nearly_holds(v) for v in (0.23, 0.22, 0.1)] == [False, True, True]
    zero = StopCondition.parse("return>0")
    assert [zero.nearly_holds(v) for v in (-0.02, -0.01)] == [False, True]  # at least 0.01 of margin
    spec = registry.get_task("cartpole-balance")
    evaluation = SeparateEvaluation(MjEnv(spec.load_task_class()(spec.env_cfg()), seed=1), 4, "cpu", first_steps=1)
    assert (evaluation.steps, evaluation.full_steps) == (1, 4)
    assert evaluation.speed_up() and evaluation.steps == 4 and not evaluation.speed_up()


@pytest.mark.parametrize(("speedup", "interval"), [("near-stop", 1), ("near-stop", 2), ("always", 2)])
def test_a_policy_that_meets_the_condition_stops_once_the_window_holds_its_episodes(
    steady_hand: str, speedup: str, interval: int
) -> None:
    """The stop's meaning is the same whatever the evaluation's pace: a deterministic policy that meets the condition
    stops at the first iteration whose window holds ``--agent.eval-episodes`` evaluation episodes (and whose check
    of the current policy agrees), stepped once per training step until then, or on every second one, or 2 times
    throughout."""
    cfg = small_train_config(steady_hand, num_envs=64, iterations=16, steps=25, stop_when="success>=0.9")
    cfg.stop_when_iterations = 1
    cfg.agent.eval_envs, cfg.agent.eval_episodes, cfg.agent.eval_steps_per_step = 16, 8, 2
    cfg.agent.eval_speedup, cfg.agent.eval_step_interval = speedup, interval  # type: ignore[assignment]
    result = train_worker(cfg, None, DistributedContext(device="cpu"))
    full = next(r for r in result.records if r.evaluation_episodes >= 8)
    assert result.condition_met_at == full.iteration == result.final_iteration
    assert full.evaluation["Eval/success"] == 1.0
    # The training episodes (sampled actions) never succeed: the slower pace held until the window itself was full.
    assert all(r.episode.get("Episode/success", 0.0) == 0.0 for r in result.records)


def test_a_condition_met_in_the_iteration_a_stop_request_arrives_ends_the_run_as_met(tmp_path: Path) -> None:
    # Ended as stopped, the run stayed open for a requeue, whose start read the checkpoint's met condition as
    # "training past it was asked for" and trained on.
    cfg = small_train_config(
        iterations=40, init_at_random_ep_len=True, stop_when="length>=1", stop_when_iterations=3, log_root=tmp_path
    )
    asked = iter([0, 0, 15])  # SIGTERM after the third iteration, the one the condition is met in
    result = train_worker(
        cfg, make_run_dir(tmp_path, "both"), DistributedContext(device="cpu"), stop_check=lambda: next(asked)
    )
    assert result.condition_met_at == result.final_iteration == 3
    assert result.stop_signal is None


def test_an_iteration_without_an_ended_episode_neither_holds_nor_breaks_the_streak() -> None:
    # With few environments and long episodes most iterations end no training episode: counted as failing, they
    # made a condition of 10 iterations in a row on the training episodes impossible to meet.
    tracker = StopConditionTracker(as_condition("Episode/success>=0.9").on_training_episodes(), 3)
    held, none = {"Episode/success": 1.0}, {"Episode/length": 5.0}
    assert [tracker.update(e) for e in (held, none, held, none, none, held)] == [False] * 5 + [True]
    assert tracker.streak == 3
    tracker.update({"Episode/success": 0.5})
    assert tracker.streak == 0


def test_the_window_says_whether_an_iteration_changed_it() -> None:
    window = EvaluationWindow(("Episode/success",), episodes=2)
    assert window.add([2.0], [2.0]) and window.full
    assert not window.add([0.0], [0.0])  # no evaluation episode ended: the same window, no new evidence
