"""Host checks before a launch (mjfleet.cluster.hosts) and the options that steer them; no SSH needed here."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from mjfleet.cluster import hosts
from mjfleet.cluster.hosts import (
    HostError,
    check_gloo_interface,
    check_host,
    launcher_address,
    master_address,
    remote_hosts,
)
from mjfleet.envs.config import EnvConfig
from mjfleet.errors import UsageError
from mjfleet.launch.worker_entry import REPORT_DIR_ENV
from mjfleet.rl.config import AgentConfig
from mjfleet.runtime.context import MASTER_ADDR_ENV
from mjfleet.runtime.devices import GpuRequest, describe_gpu_request
from mjfleet.train import api
from mjfleet.train.config import TrainConfig, validate

from .helpers import small_train_config

REMOTE = "192.0.2.77"  # TEST-NET-1: never this machine
"""A host that is not this machine; route lookups are stubbed, nothing is sent to it."""


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hosts.LAUNCHER_ADDRESS_ENV, raising=False)
    monkeypatch.setattr(hosts, "route_address", lambda ip: "192.0.2.10")


def test_only_local_hosts_need_no_launcher_address() -> None:
    assert remote_hosts(["localhost", "127.0.0.1"]) == []
    assert launcher_address(["localhost", "127.0.0.1"], None) is None


def test_launcher_address_routes_to_the_first_remote_host() -> None:
    assert remote_hosts(["localhost", REMOTE]) == [REMOTE]
    assert launcher_address(["localhost", REMOTE], None) == "192.0.2.10"


def test_flag_beats_environment_and_loopback_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(hosts.LAUNCHER_ADDRESS_ENV, "192.0.2.20")
    assert launcher_address(["localhost", REMOTE], None) == "192.0.2.20"
    assert launcher_address(["localhost", REMOTE], "192.0.2.30") == "192.0.2.30"
    with pytest.raises(HostError, match=r"--launcher-address localhost is a loopback address"):
        launcher_address(["localhost", REMOTE], "localhost")
    monkeypatch.setenv(hosts.LAUNCHER_ADDRESS_ENV, "127.0.1.1")
    with pytest.raises(HostError, match=r"MJFLEET_LAUNCHER_ADDRESS 127.0.1.1 is a loopback address"):
        launcher_address(["localhost", REMOTE], None)


def test_loopback_route_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosts, "route_address", lambda ip: "127.0.0.1")
    with pytest.raises(HostError, match=r"only through loopback.*--launcher-address"):
        launcher_address(["localhost", REMOTE], None)


def test_unresolvable_host_names_the_host() -> None:
    with pytest.raises(HostError, match=r"host 'no-such-host.invalid' does not resolve"):
        remote_hosts(["localhost", "no-such-host.invalid"])


def test_master_address_is_routable() -> None:
    assert master_address(["localhost", REMOTE], "192.0.2.10") == "192.0.2.10"  # rank 0 here: the launcher's
    assert master_address([REMOTE, "localhost"], "192.0.2.10") == REMOTE


def test_gloo_interface_needed_where_the_name_is_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "127.0.1.1")
    with pytest.raises(HostError, match="GLOO_SOCKET_IFNAME="):
        check_gloo_interface("192.0.2.10")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    check_gloo_interface("192.0.2.10")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "nosuchif0")
    with pytest.raises(HostError, match="GLOO_SOCKET_IFNAME=nosuchif0: no interface nosuchif0 on this machine"):
        check_gloo_interface("192.0.2.10")


def test_preflight_refuses_an_address_of_another_machine() -> None:
    with pytest.raises(HostError, match="not an address of this machine"):
        hosts.preflight([REMOTE], None, "192.0.2.99", None)


def test_the_preflight_sees_the_variables_torchrunx_exports_to_agents(monkeypatch: pytest.MonkeyPatch) -> None:
    # An environment installed through PYTHONPATH/LD_LIBRARY_PATH (module systems, an offline kit) imports mjfleet on
    # the other host only with them: the check must not refuse a host that the agent would reach with them set.
    from mjfleet.launch import launcher

    monkeypatch.setenv("PYTHONPATH", "/opt/site")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/lib")
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth9")
    monkeypatch.setenv("NOT_FOR_AGENTS", "1")
    seen: dict[str, str] = {}

    def preflight(hosts: object, ssh_config: object, address: str, log_file: object, env: dict[str, str]) -> None:
        seen.update(env)
        raise HostError("stopped after the pre-flight")

    monkeypatch.setattr(launcher, "preflight", preflight)
    monkeypatch.setattr(launcher, "check_gloo_interface", lambda address: None)
    plan = launcher.LaunchPlan(device_kind="cpu", workers_per_host=1, hostnames=("localhost", REMOTE))
    with pytest.raises(HostError, match="stopped after the pre-flight"):
        launcher.launch(print, plan=plan)
    assert seen["PYTHONPATH"] == "/opt/site" and seen["LD_LIBRARY_PATH"] == "/opt/lib"
    assert seen["GLOO_SOCKET_IFNAME"] == "eth9" and "NOT_FOR_AGENTS" not in seen
    assert seen[MASTER_ADDR_ENV] == "192.0.2.10"  # the workers' own variables ride along, as torchrunx sends them
    assert not Path(seen[REPORT_DIR_ENV]).exists(), "the launch's report directory was left behind"


def test_two_names_of_this_machine_cannot_each_take_its_gpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Measured on an H100: the two agents start, then NCCL fails with "Duplicate GPU detected"; refused up front,
    by the launcher as an invariant and by prepare() with the settings that fix it."""
    from mjfleet.launch import launcher

    def no_launch(*args: object, **kwargs: object) -> None:
        raise AssertionError("the launch went on past the check")

    monkeypatch.setattr(launcher, "_worker_env", no_launch)
    plan = launcher.LaunchPlan(device_kind="cuda", workers_per_host=1, hostnames=("localhost", "127.0.0.1"))
    with pytest.raises(UsageError, match=r"hosts localhost, 127\.0\.0\.1 are all this machine"):
        launcher.launch(print, plan=plan, stop=None)
    monkeypatch.setattr(api, "local_gpu_count", lambda: 1)
    cfg = small_train_config(log_root=tmp_path, gpu_ids=(0,), hostnames=("localhost", "127.0.0.1"))
    with pytest.raises(UsageError, match=r"localhost, 127\.0\.0\.1 are all this machine.*--workers-per-gpu 2"):
        api.prepare(cfg)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"agent_timeout_s": 0}, "--agent-timeout-s must be between 1 and"),
        ({"ssh_config": Path("/nonexistent/ssh_config")}, "--ssh-config /nonexistent/ssh_config is not a file"),
        ({"launcher_address": "127.0.0.1"}, "--launcher-address 127.0.0.1 is a loopback address"),
        ({"launcher_address": "::1"}, "--launcher-address ::1 is a loopback address"),
        ({"launcher_address": " "}, "is not a host name or address"),
    ],
)
def test_config_checks(changes: dict[str, object], message: str) -> None:
    cfg = TrainConfig(env=EnvConfig(), agent=AgentConfig(), **changes)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=message.replace(".", r"\.")):
        validate(cfg)


def test_config_accepts_remote_options(tmp_path: Path) -> None:
    (tmp_path / "ssh_config").write_text("Host *\n  BatchMode yes\n")
    validate(
        TrainConfig(
            env=EnvConfig(),
            agent=AgentConfig(),
            ssh_config=tmp_path / "ssh_config",
            launcher_address="node0.example",
            agent_timeout_s=30,
        )
    )


# --- a launcher on a login node: none of the hosts, no GPU of its own ------------------------------------------------


@pytest.mark.parametrize("gpu_ids", ["auto", "all", (0, 1)])
def test_a_gpu_less_launcher_that_is_none_of_the_hosts_says_where_to_run(
    gpu_ids: GpuRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api, "local_gpu_count", lambda: 0)
    cfg = small_train_config(log_root=tmp_path, gpu_ids=gpu_ids, hostnames=(REMOTE, "192.0.2.78"))
    with pytest.raises(UsageError) as info:
        api.prepare(cfg)
    message = str(info.value)
    assert message.startswith(
        f"--gpu-ids {describe_gpu_request(gpu_ids)}: this machine sees no CUDA GPU and is none of the hosts"
    )
    assert f"run train on {REMOTE} (rank 0's host), or train on the hosts' CPUs with --gpu-ids None" in message
    assert "\n" not in message
    assert not any(tmp_path.iterdir()), "nothing is created"


def test_a_gpu_less_launcher_among_the_hosts_or_asked_for_cpus_plans_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api, "local_gpu_count", lambda: 0)
    among = api.prepare(small_train_config(log_root=tmp_path, gpu_ids="auto", hostnames=("localhost", REMOTE)))
    assert among.selection.kind == "cpu" and (among.selection.notice or "").startswith("CUDA not available")
    cpus = api.prepare(small_train_config(log_root=tmp_path, gpu_ids=None, hostnames=(REMOTE, "192.0.2.78")))
    assert (
        cpus.launch_plan is not None
        and cpus.launch_plan.device_kind == "cpu"
        and cpus.launch_plan.hostnames == (REMOTE, "192.0.2.78")
    )


def test_this_machines_own_interface_address_is_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Also where the machine's name maps to loopback (torchrunx would SSH to that address: :func:`is_local_host`)."""
    import psutil

    own = next(
        (
            a.address
            for addrs in psutil.net_if_addrs().values()
            for a in addrs
            if a.family == socket.AF_INET and not a.address.startswith("127.")
        ),
        None,
    )
    if own is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    assert hosts.is_own_address(own) and hosts.is_own_address("127.0.0.1")
    assert not hosts.is_own_address(REMOTE)
    monkeypatch.setattr(api, "local_gpu_count", lambda: 0)
    prepared = api.prepare(small_train_config(log_root=tmp_path, gpu_ids="auto", hostnames=(own, REMOTE)))
    assert prepared.selection.kind == "cpu"


def test_the_host_check_waits_as_long_as_the_ssh_configs_connect_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import paramiko

    waited: list[float] = []

    def no_answer(self: object, *args: object, timeout: float | None = None, **kwargs: object) -> None:
        waited.append(float(timeout or 0))
        raise TimeoutError("timed out")

    monkeypatch.setattr(paramiko.SSHClient, "connect", no_answer)
    config = tmp_path / "ssh_config"
    config.write_text("Host slowbox\n  HostName 127.0.0.1\n  ConnectTimeout 30\n")
    for host, seconds in (("slowbox", 30), ("otherbox", 10)):
        problem = check_host(host, config, "127.0.0.1", 29500, tmp_path, sys.executable)
        assert problem is not None and f"no answer within {seconds} s" in problem[0]
        assert waited[-1] == seconds


def test_two_names_of_one_machine_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    addresses = {"node1": "10.0.0.1", "node2": "10.0.0.2", "10.0.0.2": "10.0.0.2"}
    monkeypatch.setattr(socket, "gethostbyname", lambda name: addresses[name])
    assert remote_hosts(["node1", "node2"]) == ["node1", "node2"]
    with pytest.raises(HostError, match=r"hosts 'node2' and '10\.0\.0\.2' are the same machine"):
        remote_hosts(["node1", "node2", "10.0.0.2"])
