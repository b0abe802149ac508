"""The checks of a video's size, shared by ``train`` and ``play`` (MP4 with H.264)."""

from __future__ import annotations

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
