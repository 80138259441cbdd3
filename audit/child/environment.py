"""The environment of `audit run`'s child, fixed before JAX starts: devices, backend, XLA flags."""

from __future__ import annotations

import re

_DEVICE_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")
_COMMAND_BUFFER_FLAG = re.compile(r"(?:^|\s)--xla_gpu_enable_command_buffer(?:=|\s|$)")
_GPU_PLATFORMS = {"cuda", "rocm", "gpu"}


def configure_environment(env: dict[str, str], devices: int | None, platform: str | None) -> dict[str, str]:
    """The environment a capture needs, set before JAX starts.

    `devices` simulated host devices replace any device count already in XLA_FLAGS (other
    flags are kept). Without `platform` JAX is pinned to the CPU backend, so an installed
    but unusable libtpu or GPU plugin cannot hang or flood a local run. On a GPU platform the
    flags of `added_gpu_flags` are added.
    """
    env = dict(env)
    if devices is not None:
        flags = _DEVICE_FLAG.sub("", env.get("XLA_FLAGS", "")).split()
        env["XLA_FLAGS"] = " ".join([*flags, f"--xla_force_host_platform_device_count={devices}"])
    added = added_gpu_flags(env, platform)
    if added:
        env["XLA_FLAGS"] = " ".join([*env.get("XLA_FLAGS", "").split(), *added])
    env["JAX_PLATFORMS"] = platform or "cpu"
    return env


def added_gpu_flags(env: dict[str, str], platform: str | None) -> dict[str, str]:
    """XLA flags a GPU capture adds, each with why: command buffers off, so that the trace times each op
    (XLA runs a step's ops as CUDA graphs by default, and the trace then times each graph as one op).
    A flag the user already set in XLA_FLAGS is left as it is (nsys-jax leaves a user's settings so)."""
    if not platform or not {p.strip().lower() for p in platform.split(",")} & _GPU_PLATFORMS:
        return {}
    if _COMMAND_BUFFER_FLAG.search(env.get("XLA_FLAGS", "")):
        return {}
    return {"--xla_gpu_enable_command_buffer=": "command buffers (CUDA graphs) off, so the trace times each op "
                                                "on its own rather than each graph as one"}
