"""The batched environment against rsl-rl-lib's VecEnv contract, auto-reset, divergence recovery, and the Task
contract it enforces."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from mjfleet.envs.env import MjEnv
from mjfleet.envs.episode_stats import EpisodeStats
from mjfleet.errors import UsageError
from mjfleet.tasks.cartpole.cartpole import CartpoleTask, balance_config

from .conftest import make_env


def test_an_episode_length_a_whole_number_of_steps_is_that_many_steps() -> None:
    env = make_env("cartpole-balance", num_envs=1, episode_length_s=0.14)  # 7.000000000000001 steps of 0.02 s
    assert env.step_dt == 0.02 and env.max_episode_length == 7


def test_vecenv_contract(balance_env: MjEnv) -> None:
    env = balance_env
    assert isinstance(env, VecEnv)
    assert env.num_envs == 16 and env.num_actions == 1
    assert env.max_episode_length == 250  # 5 s at 2 x 0.01 s per step
    assert env.episode_length_buf.shape == (16,)
    obs = env.get_observations()
    assert isinstance(obs, TensorDict)
    assert set(obs.keys()) >= {"policy", "critic"}
    assert obs["policy"].shape == (16, 5)
    obs, rewards, dones, extras = env.step(torch.zeros(16, 1))
    assert isinstance(obs, TensorDict) and obs["policy"].shape == (16, 5)
    assert rewards.shape == (16,) and rewards.dtype == torch.float32
    assert dones.shape == (16,) and dones.dtype == torch.bool
    assert extras["time_outs"].shape == (16,) and extras["time_outs"].dtype == torch.bool
    assert torch.all(env.episode_length_buf == 1)


def test_time_out_resets_and_reports_episode_statistics() -> None:
    env = make_env(num_envs=8, episode_length_s=0.1)  # 5 control steps
    env.cfg.clip_actions = 0.0  # zero force: the pole cannot fall within 0.1 s
    for _ in range(5):
        _, _, dones, extras = env.step(torch.zeros(8, 1))
    assert torch.all(dones) and torch.all(extras["time_outs"])
    assert torch.all(env.episode_length_buf == 0)  # auto-reset inside step
    ids, values = extras["episodes"]
    assert ids.tolist() == list(range(8))
    assert torch.all(values["Episode/length"] == 5)
    assert torch.all(values["Episode/success"] == 1.0)
    assert set(values) >= {"Episode/return", "Episode_Reward/upright"}
    means = env.stats.means(env.stats.keys, *env.stats.pop())
    assert means["Episode/length"] == 5 and means["Episode_Termination/time_out"] == 1.0
    assert set(means) >= {"Episode/return", "Episode_Reward/upright"}


def test_observers_see_the_state_an_episode_ended_in_before_its_reset() -> None:
    env = make_env(num_envs=2, episode_length_s=0.1)  # 5 control steps
    env.sim.qpos[1, 1] = 1.2  # world 1's pole is down: it ends in the first step
    seen: list[tuple[list[int], torch.Tensor]] = []
    env.observers.append(lambda: seen.append((env.episode_length_buf.tolist(), env.sim.qpos[1].clone())))
    _, _, dones, _ = env.step(torch.zeros(2, 1))
    assert dones.tolist() == [False, True] and env.episode_length_buf.tolist() == [1, 0]
    ((lengths, qpos),) = seen
    assert lengths == [1, 1]  # the step as the physics left it, before world 1 restarted
    assert abs(float(qpos[1])) > 1.0 and abs(float(env.sim.qpos[1, 1])) < 0.2  # the fallen pole, then the new one


def test_evaluation_environments_episodes_are_counted_apart() -> None:
    env = make_env(num_envs=8, episode_length_s=0.1)
    env.split_evaluation(3)  # environments 5, 6 and 7
    env.sim.qpos[6, 1] = 1.2  # one evaluation episode falls at once, the others time out after 5 steps
    for _ in range(5):
        env.step(torch.zeros(8, 1))
    train = env.stats.means(env.stats.keys, *env.stats.pop())
    sums, counts = env.eval_stats.pop()
    evaluation = env.eval_stats.means(env.eval_stats.keys, sums, counts)
    assert counts[env.eval_stats.keys.index("Episode/length")] == 3  # the fallen one's and two time-outs
    assert evaluation["Episode_Termination/pole_fallen"] == pytest.approx(1 / 3)
    assert train["Episode/length"] == 5 and train["Episode_Termination/pole_fallen"] == 0.0
    with pytest.raises(ValueError, match="9 of 8"):
        env.split_evaluation(9)
    env.split_evaluation(8)  # a simulation that only evaluates (the CPU's separate evaluation)
    assert env.first_eval_env == 0


def test_an_evaluation_episode_counts_only_from_a_reset() -> None:
    env = make_env(num_envs=4, episode_length_s=0.1)  # 5 control steps
    env.cfg.clip_actions = 0.0
    env.split_evaluation(2)
    env.episode_length_buf[2:] = 3  # a random start: over a fresh physics state, the episode ends after 2 steps
    env.from_reset = env.episode_length_buf == 0
    for _ in range(2):
        env.step(torch.zeros(4, 1))
    assert env.eval_stats.pop()[1].max() == 0  # both ended, neither counted
    for _ in range(5):
        env.step(torch.zeros(4, 1))
    sums, counts = env.eval_stats.pop()
    assert counts.max() == 2 and env.eval_stats.means(env.eval_stats.keys, sums, counts)["Episode/length"] == 5


def test_termination_is_not_a_time_out() -> None:
    env = make_env(num_envs=4)
    env.sim.qpos[:, 1] = 1.2  # far past the fall threshold
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    assert torch.all(dones) and not torch.any(extras["time_outs"])
    assert torch.all(env.terminated)  # what reward terms read
    assert torch.all(extras["episodes"][1]["Episode_Termination/pole_fallen"] == 1.0)


def test_nonfinite_world_is_reset_alone_and_counted() -> None:
    env = make_env(num_envs=6)
    env.step(torch.zeros(6, 1))
    healthy_before = env.sim.qpos[[0, 1, 3, 4, 5]].clone()
    env.sim.qvel[2, 1] = float("nan")
    obs, rewards, dones, extras = env.step(torch.zeros(6, 1))
    assert dones.tolist() == [False, False, True, False, False, False]
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(rewards).all()
    assert torch.isfinite(env.sim.qpos).all() and torch.isfinite(env.sim.qvel).all()
    assert extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [1.0]
    assert rewards[2] == 0.0
    assert not torch.equal(env.sim.qpos[[0, 1, 3, 4, 5]], healthy_before)  # the others kept simulating
    means = env.stats.means(env.stats.keys, *env.stats.pop())
    assert means["Episode_Termination/nonfinite"] == 1.0


def test_a_world_given_a_nonfinite_action_is_reset_and_counted_as_diverged() -> None:
    """MuJoCo zeroes a NaN control and warns; the world went on with its servos at 0 (a task's action filter NaN for
    the rest of the episode), counted as nothing."""
    env = make_env(num_envs=3)
    actions = torch.zeros(3, 1)
    actions[1] = float("nan")
    obs, rewards, dones, extras = env.step(actions)
    assert dones.tolist() == [False, True, False] and rewards[1] == 0.0
    assert extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [1.0]
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(env.actions).all()


def test_a_first_episode_begun_part_way_counts_the_steps_it_ran() -> None:
    """A run starts its counters at random (or a checkpoint's): the episode then runs from a fresh start for the
    rest of the length. Its length and per-step metrics are of the steps it ran, as its return is (they read the
    counter: a length of 250 and a pole up 0.04 of the time after 10 steps up)."""
    env = make_env(num_envs=8, episode_length_s=0.1)  # 5 control steps
    env.cfg.clip_actions = 0.0  # zero force: the pole stays up
    env.episode_length_buf[:] = torch.tensor([3, 3, 3, 3, 0, 0, 0, 0])
    env.step(torch.zeros(8, 1))
    _, _, _, extras = env.step(torch.zeros(8, 1))
    ids, values = extras["episodes"]
    assert ids.tolist() == [0, 1, 2, 3] and values["Episode/length"].tolist() == [2.0] * 4
    assert values["Metrics/pole_up_fraction"].tolist() == [1.0] * 4
    for _ in range(3):
        _, _, _, extras = env.step(torch.zeros(8, 1))
    assert extras["episodes"][1]["Episode/length"].tolist() == [5.0] * 4  # the others' whole episodes


def test_a_training_episode_begun_part_way_does_not_count_as_a_success() -> None:
    """A time-out a few steps after a random start of the counters proves nothing: every start of a run read a
    high training success for its first iterations (which a stop on the training episodes, and the evaluation's
    speed-up near the condition, read)."""
    env = make_env(num_envs=8, episode_length_s=0.1)  # 5 control steps
    env.cfg.clip_actions = 0.0  # zero force: the pole stays up, every episode times out a success
    env.episode_length_buf[:] = torch.tensor([3, 3, 3, 3, 0, 0, 0, 0])
    env.from_reset = env.episode_length_buf == 0  # as a run's start sets it
    for _ in range(2):
        env.step(torch.zeros(8, 1))
    means = EpisodeStats.means(env.stats.keys, *env.stats.pop())
    assert "Episode/success" not in means and means["Episode/length"] == 2.0  # the four ended, none whole
    for _ in range(3):
        env.step(torch.zeros(8, 1))
    means = EpisodeStats.means(env.stats.keys, *env.stats.pop())
    assert means["Episode/success"] == 1.0 and means["Episode/length"] == 5.0  # whole episodes from a reset


def test_a_diverged_worlds_task_metrics_stay_out_of_the_statistics() -> None:
    """On a GPU a diverged world's state is NaN until its reset, so were its task metrics: one such episode made the
    iteration's Metrics/* mean, and the evaluation window that --stop-when reads, NaN."""
    env = make_env(num_envs=4)
    env.split_evaluation(2)
    env.step(torch.zeros(4, 1))
    measured = env.task.episode_metrics

    def read_off_garbage(env_: object, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {k: torch.where(env.sim.nonfinite_worlds()[env_ids], float("nan"), 1.0) for k in measured(env, env_ids)}

    env.task.episode_metrics = read_off_garbage  # type: ignore[method-assign]
    env.sim.qpos[[0, 2], 1] = 1.2  # one training and one evaluation episode fall: finite
    env.sim.qvel[[1, 3], 1] = float("nan")  # and one of each diverges
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    assert dones.all() and extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert extras["episodes"][1]["Episode_Termination/pole_fallen"].tolist() == [1.0, 0.0, 1.0, 0.0]  # nonfinite alone
    for stats in (env.stats, env.eval_stats):
        sums, counts = stats.pop()
        means = stats.means(stats.keys, sums, counts)
        assert means["Metrics/pole_up_fraction"] == 1.0  # the fallen episode's alone
        assert means["Episode_Termination/nonfinite"] == 0.5  # the diverged one still counts as an episode


def test_plays_metrics_leave_out_a_diverged_episode_too() -> None:
    import math

    from mjfleet.rl.evaluation.episodes import evaluate

    env = make_env(num_envs=4)
    measured = env.task.episode_metrics

    def read_off_garbage(env_: object, env_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {k: torch.where(env.sim.nonfinite_worlds()[env_ids], float("nan"), 1.0) for k in measured(env, env_ids)}

    env.task.episode_metrics = read_off_garbage  # type: ignore[method-assign]
    steps = [0]

    def policy(obs: object) -> torch.Tensor:
        steps[0] += 1
        if steps[0] == 1:
            env.sim.qvel[1, 1] = float("nan")  # world 1 diverges in its first step
        return torch.zeros(4, 1)

    summary = evaluate(env, policy, num_episodes=4)
    assert summary.episodes == 4 and summary.metrics["pole_up_fraction"] == 1.0 and math.isfinite(summary.mean_return)


def test_a_finite_explosion_is_a_divergence_too() -> None:
    env = make_env(num_envs=3)
    env.step(torch.zeros(3, 1))
    env.sim.qvel[1, 1] = 1e5  # a pole spinning at 1e5 rad/s: finite, and nothing a real system does
    _, rewards, dones, extras = env.step(torch.zeros(3, 1))
    assert dones.tolist() == [False, True, False] and rewards[1] == 0.0
    assert extras["episodes"][1]["Episode_Termination/nonfinite"].tolist() == [1.0]
    assert float(env.sim.qvel[1].abs().max()) < 10.0  # reset
    unguarded = make_env(num_envs=1, sim=dataclasses.replace(env.cfg.sim, divergence_speed=None))
    unguarded.sim.qvel[0, 1] = 1e5
    assert not unguarded.sim.nonfinite_worlds().any()


def test_same_seed_same_resets_different_seed_different() -> None:
    a, b, c = make_env(seed=1), make_env(seed=1), make_env(seed=2)
    assert torch.equal(a.sim.qpos, b.sim.qpos)
    assert not torch.equal(a.sim.qpos, c.sim.qpos)


def test_swingup_starts_hanging_down() -> None:
    env = make_env("cartpole-swingup", num_envs=32)
    assert torch.all(torch.cos(env.sim.qpos[:, 1]) < -0.9)
    assert env.task.terminations(env) == {} and env.task.termination_names() == ()
    assert env.termination_names == ("time_out", "nonfinite")


# --- the Task contract ---------------------------------------------------------------------------------------------
class _Undeclared(CartpoleTask):
    """Returns a termination its termination_names() does not declare."""

    def terminations(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {**super().terminations(env), "extra": torch.zeros(env.num_envs, dtype=torch.bool)}


def test_termination_names_are_declared_not_probed() -> None:
    env = MjEnv(_Undeclared(dataclasses.replace(balance_config(), num_envs=2)))
    assert env.termination_names == ("pole_fallen", "cart_out_of_range", "time_out", "nonfinite")
    with pytest.raises(UsageError, match="termination_names"):
        env.step(torch.zeros(2, 1))


class _LeavesTheTrack(CartpoleTask):
    """Ends an episode as a time-out when the cart is right of the centre (not a failure, like leaving a terrain)."""

    def time_out_names(self) -> tuple[str, ...]:
        return ("right_of_centre",)

    def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {"right_of_centre": env.sim.qpos[:, 0] > 0.0}


def test_a_task_time_out_is_a_time_out_with_its_own_statistic() -> None:
    env = MjEnv(_LeavesTheTrack(dataclasses.replace(balance_config(), num_envs=4)))
    assert env.termination_names == ("pole_fallen", "cart_out_of_range", "right_of_centre", "time_out", "nonfinite")
    env.sim.qpos[:, 0] = torch.tensor([0.5, 0.5, -0.5, -0.5])
    env.sim.qpos[1, 1] = 1.2  # also fallen: the termination takes precedence
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    assert dones.tolist() == [True, True, False, False]
    assert extras["time_outs"].tolist() == [True, False, False, False]  # bootstrapped, not a failure
    ids, values = extras["episodes"]
    assert ids.tolist() == [0, 1]
    assert values["Episode_Termination/right_of_centre"].tolist() == [1.0, 0.0]
    assert values["Episode_Termination/pole_fallen"].tolist() == [0.0, 1.0]
    assert values["Episode_Termination/time_out"].tolist() == [0.0, 0.0]  # the episode-length limit only
    assert set(env.stats.keys) >= {"Episode_Termination/right_of_centre", "Episode_Termination/time_out"}
    # The length limit in the step a task's time-out comes: the episode ends under the task's name alone (it was
    # counted under both, the shares of the ends adding up to more than 1).
    env.reset_all()
    env.episode_length_buf[:] = env.max_episode_length - 1
    env.sim.qpos[:, 0] = torch.tensor([0.5, -0.5, -0.5, -0.5])
    _, _, dones, extras = env.step(torch.zeros(4, 1))
    assert dones.all() and extras["time_outs"].all()
    values = extras["episodes"][1]
    assert values["Episode_Termination/right_of_centre"].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert values["Episode_Termination/time_out"].tolist() == [0.0, 1.0, 1.0, 1.0]


class _UndeclaredTimeOut(CartpoleTask):
    def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
        return {"extra": torch.zeros(env.num_envs, dtype=torch.bool)}


def test_time_out_names_are_declared_not_probed() -> None:
    env = MjEnv(_UndeclaredTimeOut(dataclasses.replace(balance_config(), num_envs=2)))
    with pytest.raises(UsageError, match="time_out_names"):
        env.step(torch.zeros(2, 1))


def test_a_weighted_reward_term_needs_its_method() -> None:
    @dataclasses.dataclass
    class Rewards:
        alive: float = 1.0
        missing: float = 0.5

    cfg = dataclasses.replace(balance_config(), num_envs=2, rewards=Rewards())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reward_missing"):
        MjEnv(CartpoleTask(cfg))


def test_task_state_defaults_to_empty() -> None:
    task = CartpoleTask(balance_config())
    assert task.state_dict() == {}
    task.load_state_dict({})


def test_statistics_pop_in_another_simulations_order() -> None:
    evaluation = EpisodeStats(("Episode/return", "Metrics/error"), "cpu")
    evaluation.add("Episode/return", torch.tensor([1.0, 3.0]))
    evaluation.add("Metrics/error", torch.tensor([0.5]))
    # The training simulation's order, with a metric the evaluation does not report (a training-only curriculum's).
    sums, counts = evaluation.pop_as(("Metrics/level", "Metrics/error", "Episode/return"))
    assert sums.tolist() == [0.0, 0.5, 4.0] and counts.tolist() == [0.0, 1.0, 2.0]
    assert evaluation.pop()[1].tolist() == [0.0, 0.0]  # popped: it starts afresh


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            lambda env, obs: {"policy": obs["policy"][:, 0]},
            r"group 'policy' must be a \(num_envs, size\) = \(4, size\)",
        ),
        (lambda env, obs: {"policy": obs["policy"][:2]}, r"got \(2, 5\)"),
        (lambda env, obs: {"policy": obs["policy"].long()}, "must be a float32 tensor .*, got torch.int64"),
        (lambda env, obs: {"policy": obs["policy"].double()}, "must be a float32 tensor .*, got torch.float64"),
        (lambda env, obs: obs["policy"], r"must return a dict of .*; got a float32 tensor of shape \(4, 5\)"),
        (lambda env, obs: {"actor": obs["policy"]}, r"returned the groups \['actor'\]; a 'policy' group is required"),
    ],
)
def test_observations_of_the_wrong_shape_name_the_task_and_the_group(groups: object, message: str) -> None:
    class Wrong(CartpoleTask):
        def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
            return groups(env, super().observations(env))  # type: ignore[operator]

    with pytest.raises(UsageError, match=r"Wrong\.observations\(\) .*" + message):
        MjEnv(Wrong(dataclasses.replace(balance_config(), num_envs=4)))


@pytest.mark.parametrize("kind", ["simulation view", "buffer filled in place"])
def test_observations_in_the_memory_of_the_step_before_are_refused(kind: str) -> None:
    """A learner holds a step's observation while the environments step: a view of the simulation's state (or a
    buffer the task fills in place) changed under it, and PPO stored the next state as this one's, silently."""

    class Aliased(CartpoleTask):
        buffer: torch.Tensor | None = None

        def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
            if kind == "simulation view":
                return {"policy": env.sim.qvel}  # float32 (num_envs, 2): passes every other check
            fresh = super().observations(env)["policy"]
            if self.buffer is None:
                self.buffer = fresh.clone()
            self.buffer.copy_(fresh)
            return {"policy": self.buffer}

    env = MjEnv(Aliased(dataclasses.replace(balance_config(), num_envs=4)))
    with pytest.raises(UsageError, match=r"Aliased\.observations\(\) group 'policy' is the memory it returned the"):
        env.step(torch.zeros(4, env.num_actions))


def test_a_task_without_a_critic_group_gives_the_critic_the_policys_observations() -> None:
    class ActorOnly(CartpoleTask):
        def observations(self, env: MjEnv) -> dict[str, torch.Tensor]:
            return {"policy": super().observations(env)["policy"]}

    env = MjEnv(ActorOnly(dataclasses.replace(balance_config(), num_envs=4)))
    obs = env.step(torch.zeros(4, env.num_actions))[0]
    assert torch.equal(obs["critic"], obs["policy"])


def _cartpole_with(name: str, method: object, num_envs: int = 4) -> MjEnv:
    """A cart-pole whose ``name`` method is ``method`` (a task author's mistake)."""
    wrong = type("Wrong", (CartpoleTask,), {name: method})
    return MjEnv(wrong(dataclasses.replace(balance_config(), num_envs=num_envs)))


@pytest.mark.parametrize(
    ("name", "method", "message"),
    [
        (
            "terminations",
            lambda self, env: {"pole_fallen": torch.zeros(env.num_envs), "cart_out_of_range": torch.zeros(4) > 0},
            r"Wrong\.terminations\(\)\['pole_fallen'\] must be a bool tensor of shape \(4,\), one flag per "
            r"environment; got a float32 tensor of shape \(4,\)",
        ),
        (
            "terminations",
            lambda self, env: {
                "pole_fallen": torch.zeros(4, dtype=torch.bool),
                "cart_out_of_range": torch.zeros(4, 1, dtype=torch.bool),
            },
            r"got a bool tensor of shape \(4, 1\)",
        ),
        (
            "reward_upright",
            lambda self, env: torch.ones(env.num_envs, 1),
            r"Wrong\.reward_upright\(\) must return a tensor of shape \(4,\), one value per environment; got a "
            r"float32 tensor of shape \(4, 1\)",
        ),
    ],
)
def test_a_step_method_returning_the_wrong_shape_or_type_is_one_line_naming_it(
    name: str, method: object, message: str
) -> None:
    env = _cartpole_with(name, method)
    with pytest.raises(UsageError, match=message):
        env.step(torch.zeros(4, env.num_actions))


def test_a_time_out_flag_that_is_not_bool_is_one_line() -> None:
    class Wrong(CartpoleTask):
        def time_out_names(self) -> tuple[str, ...]:
            return ("held",)

        def time_outs(self, env: MjEnv) -> dict[str, torch.Tensor]:
            return {"held": torch.zeros(env.num_envs, dtype=torch.long)}

    env = MjEnv(Wrong(dataclasses.replace(balance_config(), num_envs=4)))
    with pytest.raises(UsageError, match=r"Wrong\.time_outs\(\)\['held'\] must be a bool tensor .*got a int64"):
        env.step(torch.zeros(4, env.num_actions))


def _end_episodes(env: MjEnv, rows: list[int]) -> None:
    """Step ``env`` once with the episodes of ``rows`` at their length limit."""
    env.episode_length_buf[rows] = env.max_episode_length - 1
    env.step(torch.zeros(env.num_envs, env.num_actions))


def test_a_success_over_every_environment_is_one_line_once_fewer_episodes_end() -> None:
    """The slip of leaving out ``[env_ids]``: while every episode ends at once its shape is right; the first step
    in which some do not, one line (it summed every environment's flags into the ended episodes' success)."""
    env = _cartpole_with("success", lambda self, env, env_ids, time_outs: time_outs.new_ones(env.num_envs))
    _end_episodes(env, [0, 1, 2, 3])
    with pytest.raises(
        UsageError,
        match=r"Wrong\.success\(\) must return one value per episode ending in env_ids, "
        r"shape \(1,\); got a bool tensor of shape \(4,\)",
    ):
        _end_episodes(env, [2])


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        (
            lambda self, env, env_ids: {"pole_up_fraction": torch.zeros(env.num_envs)},
            r"Wrong\.episode_metrics\(\)\['pole_up_fraction'\] must be one value per episode ending in env_ids, "
            r"shape \(1,\); got a float32 tensor of shape \(4,\)",
        ),
        (
            lambda self, env, env_ids: {"up": torch.zeros(len(env_ids))},
            r"Wrong\.episode_metrics\(\) returned \['up'\], but metric_names\(\) declares \['pole_up_fraction'\]",
        ),
        (
            lambda self, env, env_ids: {},
            r"returned \[\], but metric_names\(\) declares \['pole_up_fraction'\]",
        ),
    ],
)
def test_episode_metrics_of_the_wrong_shape_or_names_are_one_line(metrics: object, message: str) -> None:
    env = _cartpole_with("episode_metrics", metrics)
    with pytest.raises(UsageError, match=message):
        _end_episodes(env, [1])
