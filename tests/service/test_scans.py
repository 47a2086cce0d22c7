"""The periodic rescan: each ``scan_every`` seconds the roots are walked again
(and with ``auto_index``, builds queued), without a request asking."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from quarry.service import app
from quarry.service.config import Config


class _StopScanningError(Exception):
    """Ends the scanning loop after the rounds a test wants."""


@pytest.mark.parametrize("auto_index", [False, True])
def test_the_scanner_rescans_every_scan_every_seconds(tmp_path, monkeypatch, auto_index):
    import anyio

    root = tmp_path / "root"
    root.mkdir()
    config = Config.make(
        [str(root)], str(tmp_path / "c.sqlite"), scan_every=7.5, auto_index=auto_index
    )
    service = app.Service(config)
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 1:  # the file appears while the scanner waits
            with h5py.File(root / "new.h5", "w") as f:
                f["x"] = np.arange(4.0)
        else:
            raise _StopScanningError

    monkeypatch.setattr(app.anyio, "sleep", sleep)
    with pytest.raises(_StopScanningError):
        anyio.run(service.scan_now_and_then)
    assert slept == [7.5, 7.5]
    assert [e.path for e in service.catalog.entries()] == ["new.h5"]
    service.stop()
    assert (root / "new.h5.qidx").exists() == auto_index
