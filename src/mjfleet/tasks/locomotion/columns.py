"""Column selection and concatenation that stay cheap per step on the CPU."""

from __future__ import annotations

import torch

Index = slice | torch.Tensor
"""Column selection: a slice (a view, no copy) where the columns are contiguous, else an index tensor."""


def columns(indices: list[int], device: torch.device) -> Index:
    """``indices`` as a slice when they are consecutive (the usual case: actuators in joint order, sensors in the
    order they were added), because gathering with an index tensor copies and costs far more per step."""
    if indices and indices == list(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return torch.as_tensor(indices, dtype=torch.long, device=device)  # none at all: an index still (not float32)


def concat_columns(parts: tuple[torch.Tensor, ...], rows: int, device: torch.device) -> torch.Tensor:
    """Column-concatenate 2-D ``parts`` (any dtype) into one float tensor.

    Copying each part into its columns keeps every operation as small as one part: on a CPU, ``torch.cat`` of a
    1024 x 50 result crosses PyTorch's parallelisation threshold, and a parallel region stalls for milliseconds
    when another process holds the second core.
    """
    out = torch.empty(rows, sum(p.shape[-1] for p in parts), device=device)
    col = 0
    for part in parts:
        width = part.shape[-1]
        out[:, col : col + width] = part
        col += width
    return out


def column_amplitudes(parts: tuple[tuple[int, float], ...], scale: float, device: torch.device) -> torch.Tensor:
    """One value per column of an observation laid out as ``parts`` (columns, amplitude), times ``scale``: the
    uniform noise each column gets."""
    return torch.cat([torch.full((k,), a, device=device) for k, a in parts]) * scale


Term = tuple[str, int, str]
"""An observation term: its name, its columns and what they hold (the ONNX sidecar's ``observation_terms``)."""


def first_column(terms: list[Term], name: str) -> int:
    """Where term ``name`` starts in an observation laid out as ``terms``."""
    names = [term[0] for term in terms]
    return sum(size for _, size, _ in terms[: names.index(name)])
