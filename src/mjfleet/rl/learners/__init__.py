"""The learners behind ``--agent.learner``: the interface a runner drives, the registry, rsl-rl's PPO and skrl's
learners."""
