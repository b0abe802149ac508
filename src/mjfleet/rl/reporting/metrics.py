"""Rank 0's metric sinks: TensorBoard events, optionally mirrored to Weights & Biases."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mjfleet.errors import UsageError

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

WANDB_RUN_ID_FILE = "wandb_run_id"
"""File of the run directory naming its W&B run: every later start of the run (a continuation, a restart) logs to
that W&B run instead of opening another."""


_LINK_NOTICE = re.compile(r"(Symlinked|Linked) \d+ files? into the W&B run directory")


def _quiet_writer_thread() -> None:
    """Leave a write error of TensorBoard's writer thread (a full disk) to :meth:`MetricsWriter._tensorboard`: the
    thread re-raises it, which Python prints as a traceback, and the writer raises it again at its next call in the
    training's thread, where it is said in one line."""
    previous = threading.excepthook
    if getattr(previous, "quiet_tensorboard", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__name__ == "_AsyncWriterThread":
            return
        previous(args)

    hook.quiet_tensorboard = True  # type: ignore[attr-defined]
    threading.excepthook = hook


@contextlib.contextmanager
def _without_link_notices() -> Iterator[None]:
    """W&B's ``save`` tells the terminal after every file that it linked it ("call wandb.save again to sync new
    files"): a line per checkpoint file that says nothing to a user of a run that saves each file once. Everything
    else it writes to stderr passes through."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            yield
    finally:
        kept = [line for line in captured.getvalue().splitlines(keepends=True) if not _LINK_NOTICE.search(line)]
        if kept:
            sys.stderr.write("".join(kept))


class MetricsWriter:
    """Writes scalars to TensorBoard in the run directory; with ``use_wandb`` W&B mirrors them.

    W&B honours ``WANDB_MODE`` (``offline`` writes under ``<run_dir>/wandb`` and never touches the network).
    """

    def __init__(
        self, run_dir: Path, use_wandb: bool = False, project: str = "mjfleet", config: dict[str, Any] | None = None
    ) -> None:
        self.run_dir = run_dir
        self._wandb_run: Any = None
        if use_wandb:
            import wandb
            import wandb.errors
            from wandb.integration import tensorboard as wandb_tensorboard

            id_file = run_dir / WANDB_RUN_ID_FILE
            run_id = id_file.read_text().strip() if id_file.is_file() else None
            # W&B mirrors the scalars of the TensorBoard events written from here on. Their root given: left to find
            # one, W&B waited 10 s at the run's end. The event file not saved with the run's files: W&B watches the run
            # directory with its own folder inside, and saved copies of the copies, nested ever deeper.
            wandb_tensorboard.unpatch()  # an earlier run's root, in this process
            wandb_tensorboard.patch(save=False, root_logdir=str(run_dir))
            try:
                self._wandb_run = wandb.init(
                    project=project,
                    name=run_dir.name,
                    dir=str(run_dir),
                    config=config or {},
                    id=run_id,
                    resume="allow" if run_id else None,
                )
            except wandb.errors.Error as e:
                wandb_tensorboard.unpatch()
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                why = f"{first} (WANDB_MODE=offline logs without an account)"
                if isinstance(e, wandb.errors.CommError):  # the network or W&B's servers: a retry may get through
                    raise ConnectionError(f"--agent.logger wandb: cannot reach W&B: {why}") from None
                raise UsageError(f"--agent.logger wandb: cannot start the W&B run: {why}") from None
            run = self._wandb_run
            if run_id is None:
                id_file.write_text(f"{run.id}\n")
            reference = f"wandb:{run.entity or '<entity>'}/{run.project}/{run.id}"
            if run.offline:  # nothing is on W&B's servers until it is synced
                logger.info(
                    "W&B run %s offline, in %s: `wandb sync %s` uploads it, then resume or play it with %s",
                    run.id,
                    run.dir,
                    Path(run.dir).parent,
                    reference,
                )
            else:
                logger.info("W&B run %s; resume or play it with %s", run.url or run.id, reference)
            self.save_files(sorted((run_dir / "params").glob("*.yaml")))
        # torch's FileWriter and summary builders rather than SummaryWriter: the GIF summary of add_video needs the
        # file writer, which SummaryWriter reaches only through a private method.
        from torch.utils.tensorboard.writer import FileWriter

        _quiet_writer_thread()
        self._tb: Any = FileWriter(str(run_dir), flush_secs=10)

    def _tensorboard(self, write: Any) -> None:
        """Call ``write`` with the event writer; when the run directory is gone or full, say so once and write no
        more events (the training goes on, as it does when progress records cannot be written)."""
        if self._tb is None:
            return
        try:
            if not self.run_dir.is_dir():  # checked here: the writer's own thread would fail on it with a traceback
                raise FileNotFoundError(f"{self.run_dir} is gone")
            write(self._tb)
        except OSError as e:
            logger.warning("could not write TensorBoard events in %s (%s); this start writes no more", self.run_dir, e)
            self._tb = None

    def start_at(self, step: int) -> None:
        """Mark that logging starts (again) at ``step``: TensorBoard drops what earlier event files of the run logged
        at this step and after (the iterations a restart trains again), as ``SummaryWriter(purge_step=...)`` does."""
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog  # pyright: ignore[reportAttributeAccessIssue]

        self._tensorboard(lambda tb: tb.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START))))

    def add_scalars(self, values: dict[str, float], step: int) -> None:
        """Log each value under its key at ``step``."""
        from torch.utils.tensorboard.summary import scalar

        def write(tb: Any) -> None:
            for key, value in values.items():
                tb.add_summary(scalar(key, value), step)

        self._tensorboard(write)

    def save_files(self, paths: list[Path]) -> None:
        """Store files of the run directory in the W&B run (same relative names), so ``wandb:`` references find
        them; without W&B nothing happens. Offline runs keep them until ``wandb sync``."""
        if self._wandb_run is None:
            return
        with _without_link_notices():
            for path in paths:
                if path.is_file():
                    self._wandb_run.save(str(path), base_path=str(self.run_dir), policy="now")

    def add_video(self, tag: str, mp4: Path, frames: Sequence[np.ndarray], fps: float, step: int) -> None:
        """Log a clip: an animated GIF in TensorBoard (its image tab; no moviepy needed), the mp4 file in W&B
        (``<tag>_mp4``)."""
        import imageio.v2 as imageio
        from tensorboard.compat.proto.summary_pb2 import Summary  # pyright: ignore[reportAttributeAccessIssue]

        gif = io.BytesIO()
        imageio.mimwrite(gif, list(frames), format="GIF", duration=1000.0 / fps, loop=0)  # type: ignore[arg-type]
        height, width = frames[0].shape[:2]
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif.getvalue())
        # SummaryWriter.add_video would need moviepy; the file writer takes the finished summary.
        self._tensorboard(lambda tb: tb.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step))
        if self._wandb_run is not None:
            import wandb

            # Its own key: the GIF reaches W&B under ``tag`` too, through the TensorBoard sync, at ``global_step``.
            self._wandb_run.log({f"{tag}_mp4": wandb.Video(str(mp4), format="mp4"), "global_step": step})

    def close(self, failed: bool = False) -> None:
        """Flush and close every sink; ``failed``: the W&B run ends marked as failed (exit code 1)."""
        self._tensorboard(lambda tb: (tb.flush(), tb.close()))
        self._tb = None
        if self._wandb_run is not None:
            from wandb.integration import tensorboard as wandb_tensorboard

            self._wandb_run.finish(exit_code=1 if failed else 0)
            wandb_tensorboard.unpatch()
