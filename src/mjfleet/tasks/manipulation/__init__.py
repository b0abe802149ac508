"""Manipulation with a fixed-base arm on a table: reach a target, lift a cube."""
