"""Several processes, one mesh: join a multi-process JAX job on this machine's CPUs (Lab 03).

:mod:`labkit.sharding.launch` (or a cluster) starts the processes and sets the variables
below; each process calls :func:`init_distributed` before any other JAX work.
"""

from __future__ import annotations

import os

from labkit.runtime.device import jax_backend_initialized, requested_cpu_devices, simulate_devices


# What labkit.sharding.launch (or a cluster) tells each process; torchrun's RANK/WORLD_SIZE/MASTER_*
# are set alongside for the PyTorch counterpart.
COORDINATOR_ENV = "LABKIT_COORDINATOR"  # "127.0.0.1:PORT"
NUM_PROCESSES_ENV = "LABKIT_NUM_PROCESSES"
PROCESS_ID_ENV = "LABKIT_PROCESS_ID"
DIST_TIMEOUT_ENV = "LABKIT_DIST_TIMEOUT_S"  # seconds to wait for the other processes


def init_distributed(coordinator: str | None = None, num_processes: int | None = None,
                     process_id: int | None = None, cpu_devices: int | None = None,
                     timeout_s: int | None = None) -> tuple[int, int]:
    """Join a multi-process JAX job on CPU: gloo collectives, local devices, a coordinator (Lab 03).

    Arguments default to $LABKIT_COORDINATOR, $LABKIT_NUM_PROCESSES, $LABKIT_PROCESS_ID,
    $LABKIT_CPU_DEVICES (devices *per process*) and $LABKIT_DIST_TIMEOUT_S (default 60). Must
    run before any JAX work in the process. Returns (process_id, num_processes).
    """
    env = os.environ
    coordinator = coordinator or env.get(COORDINATOR_ENV)
    if not coordinator:
        raise RuntimeError(f"no coordinator address: pass coordinator='127.0.0.1:PORT' or set "
                           f"${COORDINATOR_ENV} (python -m labkit.sharding.launch sets it for you)")
    n = int(num_processes if num_processes is not None else env.get(NUM_PROCESSES_ENV, "0"))
    pid = int(process_id if process_id is not None else env.get(PROCESS_ID_ENV, "-1"))
    if n < 1 or not 0 <= pid < n:
        raise RuntimeError(f"bad process layout: process_id={pid}, num_processes={n}; set "
                           f"${NUM_PROCESSES_ENV} >= 1 and 0 <= ${PROCESS_ID_ENV} < it")
    if jax_backend_initialized():
        raise RuntimeError("JAX has already initialised its backends in this process; "
                           "init_distributed must be the first JAX call (restart the process).")
    timeout = int(timeout_s if timeout_s is not None else env.get(DIST_TIMEOUT_ENV, "60"))
    import jax

    # Every process runs on its CPU: several processes must not fight over one GPU/TPU here.
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # cross-process CPU collectives
    simulate_devices(cpu_devices or requested_cpu_devices())
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=n, process_id=pid,
        initialization_timeout=timeout, heartbeat_timeout_seconds=max(5, timeout // 4),
        shutdown_timeout_seconds=max(5, timeout // 4),
        coordinator_bind_address=coordinator if pid == 0 else None)
    return pid, n
