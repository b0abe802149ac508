"""Velocity-tracking locomotion tasks (Go1-class quadruped, G1-class humanoid) on flat and rough terrain."""
