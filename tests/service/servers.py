"""A real server for the service tests: uvicorn on a loopback socket in a
thread, and the data files they serve."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator

import h5py
import numpy as np
import uvicorn

from quarry.service.app import create_app
from quarry.service.config import Config

TOKEN = "s3cret-token"


@contextlib.contextmanager
def running(config: Config) -> Iterator[str]:
    """Serve ``config`` until the block ends; yields the base URL. The socket
    listens before the thread starts, so a request sent at once waits in
    the backlog until the server (its catalog scanned) accepts it."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)
    server = uvicorn.Server(
        uvicorn.Config(create_app(config), log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        listener.close()
        assert not thread.is_alive(), "the server did not stop"


def particles(path: str, n: int = 5000, seed: int = 0) -> dict[str, np.ndarray]:
    """A particle file of ``n`` rows with NaNs and several dtypes; returns its columns."""
    rng = np.random.default_rng(seed)
    columns = {
        "energy": rng.gamma(2.0, 0.5, n),
        "x": rng.normal(0, 50, n).astype(np.float32),
        "id": rng.permutation(n).astype(np.int64),
        "q": rng.integers(0, 200, n).astype(np.uint8),
    }
    columns["energy"][rng.random(n) < 0.02] = np.nan
    columns["x"][rng.random(n) < 0.02] = np.nan
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        for name, values in columns.items():
            f[name] = values
    return columns


def steps(path: str, n_steps: int = 3, n: int = 700, seed: int = 1) -> list[np.ndarray]:
    """A file of ``n_steps`` step groups (``Step#k/px``); returns each step's px."""
    rng = np.random.default_rng(seed)
    out = []
    with h5py.File(path, "w") as f:
        for k in range(n_steps):
            px = rng.normal(k, 1.0, n + 13 * k)
            f[f"Step#{k}/px"] = px
            out.append(px)
    return out


def config(root: str, catalog_dir: str, **options: object) -> Config:
    return Config.make([root], os.path.join(catalog_dir, "catalog.sqlite"), **options)
