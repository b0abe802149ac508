"""What a run writes to continue and to deploy: checkpoint files, per-rank state, ONNX policies."""
