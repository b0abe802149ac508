"""skrl's PPO, SAC and TD3 behind the learner interface."""
