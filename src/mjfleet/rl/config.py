"""Typed learner settings: PPO's (turned into the nested dict rsl-rl-lib's PPO is built from; skrl's PPO maps the
same ones), skrl's SAC and TD3, FastTD3's, and the training loop's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from mjfleet.errors import UsageError

CPU_EVAL_STEPS_PER_STEP = 4
"""Default evaluation steps per training step on the CPU: on go1-velocity-flat (three seeds, one core each) the
condition read from the deterministic policy stopped as early, in total, as the one read from the training episodes
(17:02 against 17:08), where stepping once per training step took 19:29."""


Activation = Literal[
    "elu", "selu", "relu", "crelu", "lrelu", "tanh", "sigmoid", "softplus", "gelu", "swish", "mish", "identity"
]
"""The activations rsl-rl-lib's ``resolve_nn_activation`` knows (the skrl learners' networks use it too)."""


@dataclass
class PolicyConfig:
    """Actor and critic networks."""

    actor_hidden_dims: tuple[int, ...] = (128, 128)
    """Hidden layer sizes of the actor MLP."""
    critic_hidden_dims: tuple[int, ...] = (128, 128)
    """Hidden layer sizes of the critic MLP."""
    activation: Activation = "elu"
    """Activation function of both MLPs (rsl-rl-lib's names)."""
    init_std: float = 1.0
    """Initial standard deviation of the Gaussian action noise."""
    obs_normalization: bool = True
    """Normalise observations with running statistics (synchronised across workers)."""


@dataclass
class AlgorithmConfig:
    """PPO hyperparameters."""

    learning_rate: float = 1e-3
    """Initial Adam learning rate (adapted by KL when `schedule` is adaptive)."""
    schedule: Literal["adaptive", "fixed"] = "adaptive"
    """Learning-rate schedule."""
    desired_kl: float = 0.01
    """Target KL divergence of the adaptive schedule."""
    num_learning_epochs: int = 5
    """Passes over each rollout."""
    num_mini_batches: int = 4
    """Mini-batches per pass; gradients are averaged across workers after each one."""
    clip_param: float = 0.2
    """PPO ratio clip."""
    gamma: float = 0.99
    """Discount factor."""
    lam: float = 0.95
    """GAE lambda."""
    value_loss_coef: float = 1.0
    """Weight of the value loss."""
    entropy_coef: float = 0.005
    """Weight of the entropy bonus."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip."""
    use_clipped_value_loss: bool = True
    """Clip the value update like the policy ratio."""


DEFAULT_LEARNER = "rsl-rl-ppo"
"""The learner of a run that names none (and of checkpoints from before there was a choice)."""


@dataclass
class OffPolicyConfig:
    """Settings that skrl's SAC and TD3 share: the replay buffer, the updates, the bounded actions."""

    buffer_per_env: int = 1000
    """Replay buffer size in transitions per training environment: it holds the most recent this many steps of each
    of a worker's `--env.num-envs` environments, on the worker's device (the one its networks learn on)."""
    batch_size: int = 4096
    """Transitions sampled from the replay buffer for each gradient step, on every worker (the workers' gradients are
    averaged, so N workers learn from N times as many)."""
    gradient_steps: int = 32
    """Gradient steps of each iteration's update, after its `--agent.num-steps-per-env` environment steps."""
    learning_rate: float = 1e-3
    """Adam learning rate of the actor and the critics (SAC: and of its entropy coefficient)."""
    gamma: float = 0.99
    """Discount factor."""
    polyak: float = 0.005
    """At every gradient step (TD3: every `--agent.td3.policy-delay`-th, with the actor) the target networks move
    this fraction of the way towards the networks they follow."""
    random_steps: int = 0
    """Steps per environment at the start of a run taken with uniformly random actions instead of the policy's."""
    learning_starts: int = 0
    """Steps per environment at the start of a run before the first gradient step (the buffer fills meanwhile)."""
    action_limit: float = 1.0
    """The actor's actions lie in [-action_limit, action_limit], squashed by tanh (SAC: its samples, TD3: its output).
    The task scales and clips them further (`--env.clip-actions`, the task's action scale)."""
    grad_norm_clip: float = 0.0
    """Clip the gradients' global norm to this; 0: no clipping."""
    reward_scale: float | None = None
    """Factor on the rewards the replay buffer stores. None: one over the task's step time. The tasks' rewards are
    rates times the step time (a few hundredths per step at 50-100 Hz); scaled back to rates they are of order 1, the
    scale that SAC's entropy coefficient (`initial-entropy`) is weighed against and the learning rates were tried
    at."""


@dataclass
class SacConfig(OffPolicyConfig):
    """skrl's Soft Actor-Critic (`--agent.learner skrl-sac`)."""

    learn_entropy: bool = True
    """Tune the entropy coefficient so that the policy's entropy approaches `target_entropy`; else it stays
    `initial_entropy`."""
    initial_entropy: float = 0.2
    """Entropy coefficient (alpha) at the start of a run."""
    target_entropy: float | None = None
    """Entropy the tuning aims for; None: minus the number of actions."""


@dataclass
class Td3Config(OffPolicyConfig):
    """skrl's Twin Delayed DDPG (`--agent.learner skrl-td3`)."""

    exploration_noise: float = 0.1
    """Standard deviation of the Gaussian noise added to the actor's actions while collecting."""
    policy_delay: int = 2
    """The actor and the target networks update once every this many critic updates."""
    smooth_noise: float = 0.2
    """Standard deviation of the noise added to the target actor's actions (target policy smoothing)."""
    smooth_clip: float = 0.5
    """The target policy smoothing noise is clipped to [-smooth_clip, smooth_clip]."""


@dataclass
class FastTd3Config(OffPolicyConfig):
    """TD3 with FastTD3's ingredients (`--agent.learner fast-td3`): distributional twin critics, exploration noise of
    its own size in each environment, no target actor, AdamW."""

    learning_rate: float = 3e-4
    """AdamW learning rate of the actor and the critics."""
    polyak: float = 0.1
    """At every gradient step the target critics move this fraction of the way towards the critics."""
    weight_decay: float = 0.1
    """AdamW's weight decay of the actor and the critics."""
    noise_min: float = 0.05
    """Each training environment's exploration noise (the standard deviation of the Gaussian added to the actor's
    actions) is drawn from [noise_min, noise_max] when its episode starts."""
    noise_max: float = 0.4
    """Upper end of the exploration noise's range (see `noise_min`)."""
    policy_delay: int = 2
    """The actor updates once every this many critic updates."""
    smooth_noise: float = 0.2
    """Standard deviation of the noise added to the actor's actions in the critics' targets (target smoothing)."""
    smooth_clip: float = 0.5
    """The target smoothing noise is clipped to [-smooth_clip, smooth_clip]."""
    atoms: int = 101
    """Values of the critics' distributions (evenly spaced over [-value_limit, value_limit])."""
    value_limit: float | None = None
    """The critics' distributions span [-value_limit, value_limit]: discounted returns beyond are clipped to its ends.
    None: 3 / (1 - gamma), the return of a reward of 3 per second (`reward-scale`'s units) held forever."""

    def support_limit(self) -> float:
        """:attr:`value_limit`, or its default for :attr:`gamma`."""
        return self.value_limit if self.value_limit is not None else 3.0 / max(1.0 - self.gamma, 1e-3)


@dataclass
class AgentConfig:
    """Training-loop settings."""

    experiment_name: str = "default"
    """Runs are written under `<log_root>/<experiment_name>/`."""
    run_name: str = ""
    """Suffix of the run directory name (`<timestamp>_<run_name>`)."""
    max_iterations: int = 300
    """Learning iterations (one rollout plus one update of the learner each). Not rescaled by the number of workers."""
    num_steps_per_env: int = 24
    """Environment steps per environment per rollout."""
    save_interval: int = 50
    """Write a checkpoint every this many iterations (and always after the last one)."""
    export_onnx: bool = True
    """With every checkpoint `model_<it>.pt` also write `model_<it>.onnx` + `model_<it>.onnx.json` (the
    deterministic actor with its observation normaliser, and its inputs and outputs) and refresh `policy.onnx`."""
    logger: Literal["tensorboard", "wandb"] = "tensorboard"
    """Where metrics go besides the console; `wandb` also writes TensorBoard events (honours WANDB_MODE)."""
    wandb_project: str = "mjfleet"
    """Weights & Biases project when `logger` is `wandb`."""
    eval_envs: int = 128
    """Environments of the whole job that run the deterministic policy, the actor's mean that `play` runs, split
    evenly across its workers (at most a quarter of `--env.num-envs` each): their episodes are logged as
    `Eval/...` and are what `--stop-when` reads; their transitions never reach the learner. They come on top of
    `--env.num-envs`, which the learner trains on, on every device. 0: none (`--stop-when` reads the training
    episodes)."""
    eval_steps_per_step: int | None = None
    """Steps the evaluation environments take per training step. 1: they step with the others, in the same
    simulation. Above 1: they are a simulation of their own, of `--agent.eval-envs` / this many environments,
    stepped this many times per training step (the same physics; from when `--agent.eval-speedup` says), so an
    evaluation episode spans this many times fewer iterations and `Eval/...` trail the policy less. None: 4 on the
    CPU, where a step costs in proportion to the environments it advances; 1 on a GPU, where a second simulation
    would add its own launches to every step."""
    eval_speedup: Literal["near-stop", "always"] = "near-stop"
    """When evaluation environments of their own take `--agent.eval-steps-per-step` steps per training step:
    `near-stop`, once the run nears its `--stop-when` condition (the condition's statistic on the training or the
    evaluation episodes within a tenth of its threshold), one step per training step before that and in a run without
    a condition (the evaluation then costs a few percent of an iteration; `Eval/...` trail the policy by that many
    times more iterations until their lag decides when the run stops); `always`, from the first iteration."""
    eval_step_interval: int = 1
    """Until the run nears its `--stop-when` condition (`--agent.eval-speedup near-stop`), and throughout a run
    without one, the evaluation's own simulation takes one step every this many training steps (1: with each). A task
    with few training environments beside its evaluation's takes 2 on the CPU, which halves what the evaluation costs
    until then; its statistics trail the policy that many times more iterations, and the run nears its condition by
    the training episodes' statistic as early as before. Near the condition (or with `always`) it steps
    `--agent.eval-steps-per-step` times per training step."""
    eval_episodes: int = 50
    """`Eval/...` statistics are means over the most recent evaluation episodes of every worker, at least this many
    (whole iterations); `--stop-when` reads them once that many have ended."""
    eval_confirm: bool = True
    """When `--stop-when` holds on the evaluation episodes, which ran the policies of the last iterations, the
    current policy first plays at least `--agent.eval-confirm-episodes` fresh episodes from a reset, as `play`
    runs it, and the run stops only if they meet the condition too (else training goes on). Where the evaluation has
    a simulation of its own (the CPU's default; a GPU with `--agent.eval-steps-per-step` above 1); where it steps in
    the training simulation (a GPU's default), the window decides alone."""
    eval_confirm_episodes: int = 100
    """Fresh episodes that check the current policy (`--agent.eval-confirm`), one in each environment of a
    simulation of the check's own (split across the workers, rounded up): as many as `play` judges a checkpoint
    by: on fewer, a policy just under the condition passes one of its checks by chance more often. The check runs
    when the window holds the condition; after one that fails, the next waits until training has taken as many
    environment steps as it played (checks take at most about half of a run's steps)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Networks."""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    """PPO (`rsl-rl-ppo` and `skrl-ppo`)."""
    learner: str = DEFAULT_LEARNER
    """What learns from the environments' steps: `rsl-rl-ppo` (rsl-rl-lib's PPO), `skrl-ppo` (skrl's PPO, from the
    same `--agent.algorithm.*` settings), `skrl-sac` or `skrl-td3` (skrl's off-policy agents with a replay
    buffer: `--agent.sac.*`, `--agent.td3.*`), `fast-td3` (TD3 with FastTD3's distributional critics:
    `--agent.fast-td3.*`), or one a package registered (docs/learners.md, "Adding a learner"). Every learner uses
    `--agent.policy.*` for its networks."""
    sac: SacConfig = field(default_factory=SacConfig)
    """skrl's SAC (`--agent.learner skrl-sac`)."""
    td3: Td3Config = field(default_factory=Td3Config)
    """skrl's TD3 (`--agent.learner skrl-td3`)."""
    fast_td3: FastTd3Config = field(default_factory=FastTd3Config)
    """TD3 with FastTD3's ingredients (`--agent.learner fast-td3`)."""

    def with_off_policy(self, **settings: Any) -> AgentConfig:
        """A copy whose settings groups of the off-policy learners (``sac``, ``td3``, ``fast_td3``) each take
        ``settings`` (names of :class:`OffPolicyConfig`); this config and its groups are left as they are."""
        groups = {name: dataclasses.replace(getattr(self, name), **settings) for name in ("sac", "td3", "fast_td3")}
        return dataclasses.replace(self, **groups)

    def evaluation_envs(self, num_envs: int, world_size: int = 1) -> int:
        """This worker's share of :attr:`eval_envs` (the job's, split evenly across its ``world_size`` workers,
        rounded up), at most ``num_envs // 4``. Raises :class:`UsageError` (naming the flag) for settings out of
        range."""
        if self.eval_envs < 0:
            raise UsageError(f"--agent.eval-envs must not be negative (got {self.eval_envs})")
        if self.eval_steps_per_step is not None and self.eval_steps_per_step < 1:
            raise UsageError(f"--agent.eval-steps-per-step must be at least 1 (got {self.eval_steps_per_step})")
        if self.eval_step_interval < 1:
            raise UsageError(f"--agent.eval-step-interval must be at least 1 (got {self.eval_step_interval})")
        if self.eval_episodes < 1:
            raise UsageError(f"--agent.eval-episodes must be at least 1 (got {self.eval_episodes})")
        if self.eval_confirm_episodes < 1:
            raise UsageError(f"--agent.eval-confirm-episodes must be at least 1 (got {self.eval_confirm_episodes})")
        return min(-(-self.eval_envs // max(1, world_size)), num_envs // 4)

    def confirm_envs(self, world_size: int = 1) -> int:
        """Environments of a worker's check of the current policy (``--agent.eval-confirm``): its share of
        :attr:`eval_confirm_episodes`, rounded up, so that the check plays one episode in each."""
        return -(-self.eval_confirm_episodes // max(1, world_size))

    def evaluation_steps(self, on_gpu: bool) -> int:
        """:attr:`eval_steps_per_step`, or its default for the device the environments run on."""
        if self.eval_steps_per_step is not None:
            return self.eval_steps_per_step
        return 1 if on_gpu else CPU_EVAL_STEPS_PER_STEP

    def first_evaluation_steps(self, on_gpu: bool) -> int:
        """Steps per training step of evaluation environments of their own in a run's first iteration
        (:attr:`eval_speedup`)."""
        return self.evaluation_steps(on_gpu) if self.eval_speedup == "always" else 1

    def first_evaluation_interval(self) -> int:
        """Training steps per step (or steps) of evaluation environments of their own in a run's first iteration
        (:attr:`eval_step_interval`, 1 with :attr:`eval_speedup` ``always``)."""
        return 1 if self.eval_speedup == "always" else self.eval_step_interval

    def separate_evaluation_envs(self, num_envs: int, on_gpu: bool, world_size: int = 1) -> int:
        """Environments of the evaluation's own simulation for a worker with ``num_envs`` (:meth:`evaluation_envs`
        divided by :meth:`evaluation_steps`, at least 1), or 0 where the evaluation steps in the training simulation."""
        eval_envs, steps = self.evaluation_envs(num_envs, world_size), self.evaluation_steps(on_gpu)
        return max(1, eval_envs // steps) if eval_envs and steps > 1 else 0

    def training_simulation_envs(self, num_envs: int, on_gpu: bool, world_size: int = 1) -> int:
        """Environments of a worker's training simulation: the ``num_envs`` the learner trains on, and after them its
        evaluation environments where they step in the same simulation."""
        separate = self.separate_evaluation_envs(num_envs, on_gpu, world_size)
        return num_envs + (0 if separate else self.evaluation_envs(num_envs, world_size))

    def env_steps_per_iteration(
        self, num_envs: int, on_gpu: bool, world_size: int = 1, evaluation_steps: int | None = None
    ) -> int:
        """Environment steps one iteration simulates over all ``world_size`` workers, each with ``--env.num-envs``
        ``num_envs``, evaluation environments included. Where they are a simulation of their own: stepped
        ``evaluation_steps`` times per training step (the pace near the condition), or by default at a run's first
        iteration's pace (:meth:`first_evaluation_steps` every :meth:`first_evaluation_interval` training steps,
        from the first). The one rule for the runner's count and the launch plan's line."""
        steps = self.num_steps_per_env
        simulated = self.training_simulation_envs(num_envs, on_gpu, world_size) * steps
        if separate := self.separate_evaluation_envs(num_envs, on_gpu, world_size):
            if evaluation_steps is None:
                interval = self.first_evaluation_interval()
                simulated += separate * self.first_evaluation_steps(on_gpu) * -(-steps // interval)
            else:
                simulated += separate * evaluation_steps * steps
        return world_size * simulated

    def to_rsl_rl(self, multi_gpu: dict[str, int] | None = None) -> dict[str, Any]:
        """The config dict that ``rsl_rl.algorithms.PPO.construct_algorithm`` reads (and nothing else).

        ``multi_gpu``: ``{"global_rank", "local_rank", "world_size"}`` for distributed training, else None.
        """
        p, a = self.policy, self.algorithm
        gaussian = {"class_name": "GaussianDistribution", "init_std": p.init_std}
        return {
            "num_steps_per_env": self.num_steps_per_env,
            "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
            "actor": {
                "class_name": "MLPModel",
                "hidden_dims": list(p.actor_hidden_dims),
                "activation": p.activation,
                "obs_normalization": p.obs_normalization,
                "distribution_cfg": gaussian,
            },
            "critic": {
                "class_name": "MLPModel",
                "hidden_dims": list(p.critic_hidden_dims),
                "activation": p.activation,
                "obs_normalization": p.obs_normalization,
            },
            "algorithm": {
                "class_name": "mjfleet.rl.learners.rsl_rl:SyncedPPO",
                "learning_rate": a.learning_rate,
                "schedule": a.schedule,
                "desired_kl": a.desired_kl,
                "num_learning_epochs": a.num_learning_epochs,
                "num_mini_batches": a.num_mini_batches,
                "clip_param": a.clip_param,
                "gamma": a.gamma,
                "lam": a.lam,
                "value_loss_coef": a.value_loss_coef,
                "entropy_coef": a.entropy_coef,
                "max_grad_norm": a.max_grad_norm,
                "use_clipped_value_loss": a.use_clipped_value_loss,
            },
            "multi_gpu": multi_gpu,
        }
