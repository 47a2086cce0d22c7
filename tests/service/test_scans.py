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


def test_a_damaged_index_a_request_found_is_rebuilt_by_the_next_auto_index_scan(tmp_path):
    """A scan sees only stats, which damage leaves as they were: the catalog
    learns of it from the request that read it, and ``auto_index`` then
    forces the rebuild a plain one would skip as up to date."""
    import anyio

    import quarry
    from quarry.service.config import ServiceError

    root = tmp_path / "root"
    root.mkdir()
    path = root / "d.h5"
    with h5py.File(path, "w") as f:
        f["e"] = np.arange(100_000.0)
    with quarry.open(str(path)) as ds:
        ds.build_index(block_len=10_000)
    index = root / "d.h5.qidx"
    damaged = bytearray(index.read_bytes())
    damaged[len(damaged) // 3] ^= 0xFF
    index.write_bytes(bytes(damaged))
    config = Config.make([str(root)], str(tmp_path / "c.sqlite"), auto_index=True)
    service = app.Service(config)
    try:
        anyio.run(service.rescan)
        assert service.catalog.get("d.h5").fresh and not service.builds.busy("d.h5")
        with (
            pytest.raises(ServiceError) as refused,
            service.files.use(service.catalog.get("d.h5")) as ds,
        ):
            ds.query("e > 5").count()
        assert refused.value.status == 409
        assert service.catalog.get("d.h5").index["state"] == "damaged"
        anyio.run(service.rescan)  # queues the forced build
    finally:
        service.stop()  # waits for the running build
    assert service.catalog.get("d.h5").index["state"] == "fresh"
    with quarry.open(str(path)) as ds:
        assert ds.query("e > 5").count() == 99_994


def test_a_damaged_copy_a_request_found_is_listed_damaged(tmp_path):
    import anyio

    import quarry
    from quarry.service.config import ServiceError

    root = tmp_path / "root"
    root.mkdir()
    with h5py.File(root / "d.h5", "w") as f:
        f["e"] = np.random.default_rng(0).random(200_000)
    with quarry.open(str(root / "d.h5")) as ds:
        ds.reorganize(["e"], bins=64)
    copy = root / "d.h5.qmd"
    damaged = bytearray(copy.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    copy.write_bytes(bytes(damaged))
    service = app.Service(Config.make([str(root)], str(tmp_path / "c.sqlite")))
    try:
        anyio.run(service.rescan)
        assert service.catalog.get("d.h5").copy["state"] == "fresh"
        refusals = []
        for low in np.arange(0.0, 1.0, 0.05):  # the ranges whose runs hold the damage refused
            try:
                with service.files.use(service.catalog.get("d.h5")) as ds:
                    ds.query(f"{low} < e < {low + 0.05}").ids()
            except ServiceError as exc:
                refusals.append(exc)
        assert refusals and {r.status for r in refusals} == {409}
        detail = service.catalog.get("d.h5").detail()
        assert detail["reorganised"]["state"] == "damaged"
        assert detail["reorganised"]["error"].startswith("the reorganised copy d.h5.qmd is damaged")
        assert detail["index"]["state"] == "none"
    finally:
        service.stop()
