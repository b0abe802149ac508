"""The checks of a video's size and path, shared by ``train`` and ``play`` (MP4 with H.264)."""

from __future__ import annotations

import os
from pathlib import Path

from mjfleet.errors import UsageError

MAX_VIDEO_SIDE = 4096
"""Pixels: the largest width or height a video may have."""


def check_video_size(width: int, height: int) -> None:
    """Refuse a size the encoder cannot take, in one line naming the flags."""
    size = f"{width}x{height}"
    if width < 1 or height < 1:
        raise UsageError(f"--video-width and --video-height must be at least 1 (got {size})")
    if width > MAX_VIDEO_SIDE or height > MAX_VIDEO_SIDE:
        raise UsageError(f"--video-width and --video-height must be at most {MAX_VIDEO_SIDE} (got {size})")
    if width % 2 or height % 2:
        raise UsageError(f"--video-width and --video-height must be even for H.264 (got {size})")


def check_video_path(path: Path, flag: str) -> None:
    """Refuse, in one line naming ``flag``, a video path that cannot be written: not ``.mp4``, a folder, or under
    a folder that cannot be created or written to. Checked before the episodes are played, not after."""
    if path.is_dir():
        raise UsageError(f"{flag} is a folder: {path} (name the .mp4 file in it)")
    if path.suffix.lower() != ".mp4":
        raise UsageError(f"{flag} must name an .mp4 file (got {path})")
    existing = path.absolute().parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag}: cannot write under {existing} (for {path})")
