"""Where a tracking task's training episodes start in the motion (``--env.sampling``): at its first frame, anywhere,
or, adaptively, more often in the seconds where episodes fail (BeyondMimic's sampling)."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch


class StartSampler:
    """Start frames for training episodes, and the adaptive sampling's tally of where episodes failed.

    The motion's ``frames`` at the control step ``dt`` are cut into ceil(frames x dt) bins of equal length, each
    (frames - 1) / bins frames long: under a second (a 4 s motion at 50 Hz, 201 frames, has 5 bins of 0.8 s).
    mjlab's floor(frames x dt) + 1 is the same count, and one more where frames x dt is a whole number.
    ``failures`` holds, per bin, a running average of the episodes that failed there per batch of ended episodes.
    """

    def __init__(
        self,
        mode: Literal["adaptive", "uniform", "start"],
        frames: int,
        dt: float,
        uniform_share: float,
        decay: float,
        device: torch.device,
        generator: torch.Generator,
    ) -> None:
        self.mode = mode
        self.frames = frames
        """Frames of the motion at the control rate."""
        self.bins = max(1, math.ceil(frames * dt))
        """Bins of the motion: ceil(frames x dt), each under a second long."""
        self.failures = torch.zeros(self.bins, device=device)
        """Per bin, the running average of failed episodes per batch of ended ones."""
        self._uniform_share, self._decay = uniform_share, decay
        self._device, self._generator = device, generator

    def draw(self, n: int) -> torch.Tensor:
        """``n`` start frames, each before the motion's last frame."""
        dev, g = self._device, self._generator
        if self.mode == "start":
            return torch.zeros(n, dtype=torch.long, device=dev)
        if self.mode == "uniform":
            return torch.randint(0, self.frames - 1, (n,), device=dev, generator=g)
        bins = torch.multinomial(self.weights(), n, replacement=True, generator=g)
        within = torch.rand(n, device=dev, generator=g)
        return ((bins + within) / self.bins * (self.frames - 1)).long().clamp(max=self.frames - 2)

    def weights(self) -> torch.Tensor:
        """The adaptive sampling's share of starts in each bin (sums to 1)."""
        total = self.failures.sum()
        failed = self.failures / total if total > 0 else torch.full_like(self.failures, 1.0 / self.bins)
        share = self._uniform_share
        return (1.0 - share) * failed + share / self.bins  # every bin keeps its even share: none is forgotten

    def summary(self) -> dict[str, float]:
        """Where the adaptive sampling starts episodes: its distribution's entropy relative to the even one's (1: as
        even), the most favoured bin and its share of the starts. Empty for the other modes."""
        if self.mode != "adaptive":
            return {}
        weights = self.weights()
        entropy = -(weights * torch.log(weights.clamp(min=1e-12))).sum()
        top = int(torch.argmax(weights))
        evenness = float(entropy) / math.log(self.bins) if self.bins > 1 else 1.0
        return {"sampling_entropy": evenness, "sampling_top_bin": float(top), "sampling_top_share": float(weights[top])}

    def bin_of(self, frames: torch.Tensor) -> torch.Tensor:
        """The bin of each of ``frames``."""
        return (frames * self.bins // (self.frames - 1)).clamp(max=self.bins - 1)

    def count(self, frames: torch.Tensor, failed: torch.Tensor) -> None:
        """Fold one batch of ended episodes into the tally: the frames they ended at and whether each failed (this
        batch weighs ``decay``). Only the adaptive sampling keeps a tally."""
        if self.mode != "adaptive" or frames.numel() == 0:  # a step that ended evaluation rows alone: no batch
            return
        counts = torch.zeros_like(self.failures).index_add_(0, self.bin_of(frames), failed.float())
        self.failures.lerp_(counts, self._decay)

    def state_dict(self) -> dict[str, Any]:
        return {"failures": self.failures.detach().cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The tally of ``state`` where it has as many bins (another motion's is left out by the caller)."""
        failures = state.get("failures")
        if isinstance(failures, torch.Tensor) and failures.shape == self.failures.shape:
            self.failures.copy_(failures.to(self.failures.device))
