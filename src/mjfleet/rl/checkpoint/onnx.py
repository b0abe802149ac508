# pyright: reportAttributeAccessIssue=false
# (mujoco ships compiled bindings without type stubs.)
"""ONNX copies of the policy for deployment: written beside every checkpoint, run with onnxruntime by ``play``.

Each ``model_<iteration>.pt`` gets ``model_<iteration>.onnx`` (the actor with its observation normaliser, batch
dimension dynamic) and ``model_<iteration>.onnx.json`` (what a robot needs to feed it: the observation groups and
sizes, action scale, control step, joint order). ``policy.onnx`` and ``policy.onnx.json`` are the newest pair.
"""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import onnx
import torch
from tensordict import TensorDict

from mjfleet.errors import UsageError
from mjfleet.files import write_atomic, write_text_atomic

if TYPE_CHECKING:
    from mjfleet.envs.env import MjEnv
    from mjfleet.envs.task import ExportedTables, ForeignExport
    from mjfleet.rl.learners.base import ExportablePolicy

logger = logging.getLogger(__name__)

OPSET = 18
"""ONNX opset of the exported graphs (recorded in the JSON as ``opset``)."""
FORMAT = "mjfleet-onnx-policy"
"""Marker of the JSON sidecar, so ``play`` refuses an ONNX file that mjfleet did not write."""
METADATA_KEY = "mjfleet"
"""The key of the ONNX file's own metadata (``metadata_props``) holding the same JSON as its sidecar."""
FORMAT_VERSION = 1
LAYOUT_KEY = "mjfleet_layout"
"""The metadata key of an export in another framework's layout naming that layout (``play`` refuses such a file)."""
INPUT_NAME = "obs"
OUTPUT_NAME = "actions"
TARGETS_NAME = "joint_targets"
"""Output of a graph with :class:`~mjfleet.envs.task.ExportedTables` that have ``zero_targets``: servo targets."""
LATEST_NAME = "policy.onnx"
"""The newest export of a run directory (overwritten at every checkpoint)."""


def metadata_path(onnx_path: Path) -> Path:
    """The JSON sidecar of an ONNX file: ``<name>.onnx.json``."""
    return onnx_path.with_name(onnx_path.name + ".json")


def policy_metadata(env: MjEnv, policy: ExportablePolicy, iteration: int) -> dict[str, Any]:
    """Inputs and outputs of the exported actor as the environment defines them (nothing here is configured twice),
    and :func:`environment_metadata`.

    Observation groups are those the actor reads, concatenated in this order.
    """
    obs = env.get_observations()
    groups = [{"name": g, "size": int(obs[g].shape[-1])} for g in policy.obs_groups]
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "opset": OPSET,
        "iteration": iteration,
        "task_class": f"{type(env.task).__module__}:{type(env.task).__name__}",
        "inputs": [{"name": INPUT_NAME, "shape": ["batch", int(policy.obs_dim)], "observation_groups": groups}],
        "outputs": [{"name": OUTPUT_NAME, "shape": ["batch", int(env.num_actions)]}],
        "observation_normalization": bool(policy.obs_normalization),
        **environment_metadata(env),
    }


def environment_metadata(env: MjEnv) -> dict[str, Any]:
    """What a control loop needs of the environment a policy was exported from: how actions become controls, the
    timing, the actuators and joints (in actuator = action order), and what the task adds
    (:meth:`~mjfleet.envs.task.Task.export_metadata`); ``play`` of an ONNX file compares it with its own."""
    import mujoco

    model = env.sim.mj_model
    actuators, joints = [], []
    for i in range(model.nu):
        actuators.append(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) or f"actuator_{i}")
        if model.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT:
            joints.append(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[i, 0])))
    scale: Any = getattr(env.cfg, "action_scale", None)
    per_actuator = getattr(env.task, "action_scale", None)
    if isinstance(per_actuator, torch.Tensor) and per_actuator.numel() == env.num_actions:
        values = _float32_values(per_actuator)
        scale = values[0] if len(set(values)) == 1 else values
    default = getattr(env.task, "default_joint_pos", None)
    meta: dict[str, Any] = {
        "clip_actions": float(env.cfg.clip_actions),
        "action_scale": None if scale is None else scale if isinstance(scale, list) else float(scale),
        "control_dt": float(env.step_dt),
        # The file's timestep, which the policy is judged and deployed on, not a longer training one
        # (``--env.sim.training-contacts.timestep-scale``): the control step over the configured decimation.
        "physics_dt": float(env.step_dt) / env.cfg.sim.decimation,
        "actuator_names": actuators,
        "joint_names": joints,
        # MuJoCo clips each control to its range: the targets the recipes give may lie past it (a deployment clips too).
        "ctrl_range": [
            [float(lo), float(hi)] if _ctrl_limited(model, i) else None
            for i, (lo, hi) in enumerate(model.actuator_ctrlrange)
        ],
    }
    if isinstance(default, torch.Tensor) and default.shape == (env.num_actions,):
        meta["default_joint_pos"] = _float32_values(default)
    if model.nu and all(_position_servo(model, i) for i in range(model.nu)):
        # force = kp * (target - q) - kd * qdot: the nominal gains, before any randomization.
        meta["servo_gains"] = {
            "kp": [float(v) for v in model.actuator_gainprm[:, 0]],
            "kd": [float(-v) for v in model.actuator_biasprm[:, 2]],
        }
    meta.update(env.task.export_metadata())
    return meta


def _float32_values(tensor: torch.Tensor) -> list[float]:
    """A float32 tensor's values as the shortest decimals that are them (0.1, not 0.10000000149011612)."""
    return [float(str(v)) for v in tensor.detach().cpu().to(torch.float32).numpy().reshape(-1)]


def _position_servo(model: Any, actuator: int) -> bool:
    """Whether ``actuator`` is a position servo (MJCF's ``position``: a fixed gain kp, a bias of -kp q - kd qdot)."""
    import mujoco

    gain, bias = model.actuator_gainprm[actuator], model.actuator_biasprm[actuator]
    return (
        int(model.actuator_gaintype[actuator]) == mujoco.mjtGain.mjGAIN_FIXED
        and int(model.actuator_biastype[actuator]) == mujoco.mjtBias.mjBIAS_AFFINE
        and float(bias[0]) == 0.0
        and float(bias[1]) == -float(gain[0])
        and float(gain[0]) > 0.0
    )


def _ctrl_limited(model: Any, actuator: int) -> bool:
    """Whether MuJoCo clips actuator ``actuator``'s control to its ``ctrlrange`` (``ctrllimited`` "auto" reads the
    range: limited where one is given)."""
    import mujoco

    limited = int(model.actuator_ctrllimited[actuator])
    if limited == mujoco.mjtLimited.mjLIMITED_AUTO:
        lo, hi = model.actuator_ctrlrange[actuator]
        return bool(lo < hi)
    return limited == mujoco.mjtLimited.mjLIMITED_TRUE


def _tables_metadata(tables: ExportedTables | None) -> dict[str, Any]:
    """The index input and the outputs that ``tables`` add to the graph, as ``policy_metadata`` lists them."""
    if tables is None:
        return {}
    rows = next(iter(tables.tables.values())).shape[0]
    outputs = []
    # `depends_on`: what an output is computed from; those of the index alone can be read once for every row.
    if tables.zero_targets is not None and tables.action_scale is not None:
        shape = ["batch", int(tables.zero_targets.shape[-1])]
        outputs.append({"name": TARGETS_NAME, "shape": shape, "depends_on": [INPUT_NAME, tables.index]})
    outputs += [
        {"name": name, "shape": ["batch", *table.shape[1:]], "depends_on": [tables.index]}
        for name, table in tables.tables.items()
    ]
    index = {"name": tables.index, "shape": ["batch"], "type": "int64", "rows": int(rows)}
    return {"index_input": index, "table_outputs": outputs}


class _WithTables(torch.nn.Module):
    """The actor, then the servo targets and each table's row at the index (clamped to the tables); the tables
    become constants of the traced graph."""

    def __init__(self, actor: torch.nn.Module, tables: ExportedTables) -> None:
        super().__init__()
        self.actor = actor
        self.tables = [table.detach().float().cpu() for table in tables.tables.values()]
        self.targets: tuple[torch.Tensor, torch.Tensor] | None = None
        if tables.zero_targets is not None and tables.action_scale is not None:
            self.targets = (tables.zero_targets.detach().float().cpu(), tables.action_scale.detach().float().cpu())
        self.clip = tables.action_clip
        self.last = int(self.tables[0].shape[0]) - 1

    def forward(self, obs: torch.Tensor, index: torch.Tensor) -> tuple[torch.Tensor, ...]:
        actions = self.actor(obs)
        row = torch.clamp(index, 0, self.last)
        rows = [table[row] for table in self.tables]
        if self.targets is not None:
            zero_targets, scale = self.targets
            clipped = actions if self.clip is None else torch.clamp(actions, -self.clip, self.clip)
            rows.insert(0, zero_targets[row] + scale * clipped)
        return (actions, *rows)


def export_policy(
    policy: ExportablePolicy, path: Path, metadata: dict[str, Any], tables: ExportedTables | None = None
) -> Path:
    """Write the deterministic actor (normaliser included) to ``path`` and its JSON beside it, each atomically;
    with ``tables`` the graph carries them and takes their index as its second input (the JSON's ``index_input``
    and ``table_outputs`` say so)."""
    module = policy.as_onnx(verbose=False)
    dummy: tuple[torch.Tensor, ...] = (torch.zeros(1, int(policy.obs_dim)),)
    inputs, outputs = [INPUT_NAME], [OUTPUT_NAME]
    if tables is not None:
        described = _tables_metadata(tables)
        module = _WithTables(module, tables)
        dummy = (*dummy, torch.zeros(1, dtype=torch.long))
        inputs.append(tables.index)
        outputs += [entry["name"] for entry in described["table_outputs"]]
        metadata = {**metadata, **described}
    text = json.dumps(metadata, indent=2) + "\n"
    # The file describes itself; the sidecar is a copy.
    _write_graph(module, dummy, inputs, outputs, {METADATA_KEY: text}, path)
    write_text_atomic(metadata_path(path), text)
    return path


def _write_graph(
    module: torch.nn.Module,
    dummy: tuple[torch.Tensor, ...],
    inputs: list[str],
    outputs: list[str],
    props: dict[str, str],
    path: Path,
    dynamic_batch: bool = True,
) -> None:
    """Trace ``module`` on ``dummy`` into an ONNX graph (with ``dynamic_batch`` every input's and output's first axis
    the batch, else the dummy's shapes) with the metadata ``props``, written atomically to ``path``."""
    module.to("cpu")
    module.eval()
    axes = {name: {0: "batch"} for name in (*inputs, *outputs)} if dynamic_batch else {}
    graph = io.BytesIO()
    with warnings.catch_warnings():
        # dynamo=False is the TorchScript exporter: it needs only ``onnx`` (not onnxscript) and is deprecated upstream.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            dummy,
            cast(Any, graph),  # a binary file object works; torch's annotation names paths only
            opset_version=OPSET,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=axes,
            dynamo=False,
        )
    model = onnx.load_from_string(graph.getvalue())
    onnx.helper.set_model_props(model, props)
    data = model.SerializeToString()
    write_atomic(path, lambda f: f.write(data))


def foreign_path(onnx_path: Path, layout: str) -> Path:
    """Where the export in another framework's ``layout`` goes beside ``onnx_path``: ``<name>.<layout>.onnx``."""
    return onnx_path.with_name(f"{onnx_path.stem}.{layout}.onnx")


def export_foreign(policy: ExportablePolicy, onnx_path: Path, foreign: ForeignExport) -> Path:
    """Write the deterministic actor in ``foreign``'s layout beside mjfleet's export ``onnx_path``, its shapes those
    of ``foreign.inputs``' examples (as other frameworks export theirs)."""
    path = foreign_path(onnx_path, foreign.name)
    module = foreign.wrap(policy.as_onnx(verbose=False))
    names = [name for name, _ in foreign.inputs]
    dummy = tuple(value for _, value in foreign.inputs)
    _write_graph(module, dummy, names, list(foreign.outputs), foreign.metadata, path, dynamic_batch=False)
    return path


def publish_latest(onnx_path: Path, layouts: tuple[str, ...] = ()) -> Path:
    """Copy ``onnx_path`` and its JSON to ``policy.onnx`` and ``policy.onnx.json`` in the same directory, and its
    exports in other frameworks' ``layouts`` to ``policy.<layout>.onnx``."""
    latest = onnx_path.with_name(LATEST_NAME)
    pairs = [(onnx_path, latest), (metadata_path(onnx_path), metadata_path(latest))]
    pairs += [(foreign_path(onnx_path, layout), foreign_path(latest, layout)) for layout in layouts]
    for src, dst in pairs:
        data = src.read_bytes()
        write_atomic(dst, lambda f, data=data: f.write(data))
    return latest


def load_metadata(onnx_path: Path) -> dict[str, Any]:
    """The JSON sidecar of ``onnx_path``, or where there is none the same JSON in the file's own metadata
    (``metadata_props[METADATA_KEY]``); neither, or a foreign one, raises :class:`UsageError`."""
    meta_file = metadata_path(onnx_path)
    try:
        meta = json.loads(meta_file.read_text())
    except FileNotFoundError:
        meta_file = onnx_path
        props: dict[str, str] = {}
        try:
            props = {p.key: p.value for p in onnx.load(str(onnx_path), load_external_data=False).metadata_props}
            meta = json.loads(props[METADATA_KEY])
        except KeyError:
            if layout := props.get(LAYOUT_KEY):
                mine = onnx_path.with_name(onnx_path.name.removesuffix(f".{layout}.onnx") + ".onnx")
                raise UsageError(
                    f"{onnx_path} is the policy in {layout}'s layout, for control loops written for {layout}'s"
                    f" policies; play runs {mine.name} beside it"
                ) from None
            raise UsageError(
                f"{onnx_path} has no {metadata_path(onnx_path).name} beside it and no description of its own (export"
                " it with mjfleet)"
            ) from None
        except Exception as e:
            raise UsageError(f"{onnx_path} is unreadable ({type(e).__name__})") from None
    except (OSError, ValueError) as e:
        raise UsageError(f"{meta_file} is unreadable ({type(e).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise UsageError(f"{meta_file} is not an mjfleet ONNX policy description")
    return meta


class OnnxPolicy:
    """An exported policy run by onnxruntime on the CPU; called like the torch policy (observation groups in,
    actions out, on the observations' device). A graph with an index input (``index_input`` in its JSON) is fed
    what ``index`` returns at each call: each environment's index, e.g. its motion frame."""

    def __init__(self, path: Path, index: Callable[[], torch.Tensor] | None = None) -> None:
        import onnxruntime as ort

        if not path.is_file():
            raise UsageError(f"ONNX policy {path} does not exist")
        self.path = path
        self.metadata = load_metadata(path)
        try:
            groups = self.metadata["inputs"][0]["observation_groups"]
            self.groups: list[str] = [str(g["name"]) for g in groups]
            self.sizes: list[int] = [int(g["size"]) for g in groups]
            self.index_name: str | None = (self.metadata.get("index_input") or {}).get("name")
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            where = metadata_path(path)
            problem = f"{type(e).__name__}: {e}"
            raise UsageError(f"{where} lacks what a policy's inputs need ({problem}); export it again") from None
        if self.index_name is not None and index is None:
            raise UsageError(f"{path} reads {self.index_name!r} at every step, which this task does not count")
        self.index = index
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # batches of a few environments: threads cost more than they save
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise UsageError(f"ONNX policy {path} cannot be loaded ({type(e).__name__})") from None

    def check_compatible(self, obs: TensorDict, num_actions: int) -> None:
        """Raise :class:`UsageError` unless the environment's observations and actions match the export."""
        for name, size in zip(self.groups, self.sizes, strict=True):
            if name not in obs:
                raise UsageError(f"{self.path} reads observation group {name!r}, which this task does not provide")
            if int(obs[name].shape[-1]) != size:
                raise UsageError(
                    f"{self.path} expects {size} values of observation group {name!r}, the task gives"
                    f" {int(obs[name].shape[-1])} (exported from another task or configuration?)"
                )
        exported = int(self.metadata["outputs"][0]["shape"][-1])
        if exported != num_actions:
            raise UsageError(f"{self.path} outputs {exported} actions, the task takes {num_actions}")

    def __call__(self, obs: TensorDict) -> torch.Tensor:
        x = torch.cat([obs[g] for g in self.groups], dim=-1)
        feed = {INPUT_NAME: x.detach().float().cpu().numpy()}
        if self.index_name is not None and self.index is not None:
            feed[self.index_name] = self.index().detach().long().cpu().numpy()
        (actions,) = self.session.run([OUTPUT_NAME], feed)
        return torch.from_numpy(actions).to(x.device)
