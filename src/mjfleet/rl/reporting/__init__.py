"""What a run says: progress lines, per-iteration records, TensorBoard / W&B scalars."""
