"""``quarry serve`` as a user runs it: a process that prints its URL, answers
over real HTTP, and stops cleanly (exit 0, within seconds) on SIGTERM or
SIGINT; with ``--auto-index`` it builds missing indexes itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import numpy as np
import pytest
import servers


def _start(*argv: str, host: str = "127.0.0.1") -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "quarry.cli.main", "serve", *argv, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith(f"quarry serving 1 root(s) at http://{host}:"), first
    assert process.stdout.readline().startswith("catalog: ")
    return process, first.split(" at ", 1)[1].split("/ ", 1)[0].replace("0.0.0.0", "127.0.0.1")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_url_answers_and_stops_cleanly_on_a_signal(tmp_path, stop):
    columns = servers.particles(str(tmp_path / "root" / "p.h5"), n=1000)
    process, url = _start(
        str(tmp_path / "root"), "--catalog", str(tmp_path / "c.sqlite"), "--max-rows", "10"
    )
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            body = {"dataset": "p.h5", "query": "q > 100"}
            answer = client.post("/api/v1/query", json=body)
            too_many = client.post("/api/v1/query", json={**body, "output": "ids"})
        assert answer.json() == {"count": int(np.count_nonzero(columns["q"] > 100))}
        assert too_many.status_code == 413 and "(10 rows" in too_many.json()["error"]
        process.send_signal(stop)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert out == ""
    assert err.endswith("quarry serve: stopped\n")
    assert "Traceback" not in err


def test_serve_refuses_a_root_that_is_not_a_directory_and_an_empty_token_file(tmp_path):
    token = tmp_path / "token"
    token.write_text("  \n")
    for argv, message in [
        ([str(tmp_path / "none")], f"the root {tmp_path / 'none'} is not a directory"),
        ([str(tmp_path), "--token-file", str(token)], "is empty; put a secret in it"),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "quarry.cli.main", "serve", *argv, "--port", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 1
        assert done.stderr.startswith("quarry: error: ") and message in done.stderr


@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_a_token_file_others_may_read_is_warned_of(tmp_path, mode):
    (tmp_path / "root").mkdir()
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(mode)
    process, _ = _start(str(tmp_path / "root"), "--catalog", str(tmp_path / "c.sqlite"),
                        "--token-file", str(token))  # fmt: skip
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=10)
    warned = (
        f"quarry: warning: the token file {token} may be read by others (mode 644): "
        f"chmod 600 {token}"
    )
    assert (warned in err) == (mode == 0o644), err


def test_auto_index_builds_missing_indexes_in_the_background(tmp_path):
    servers.particles(str(tmp_path / "root" / "p.h5"), n=3000)
    token = tmp_path / "token"
    token.write_text(servers.TOKEN)
    process, url = _start(
        str(tmp_path / "root"),
        "--catalog",
        str(tmp_path / "c.sqlite"),
        "--auto-index",
        "--token-file",
        str(token),
        "--scan-every",
        "0",
    )
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            # The build the start-up scan queued is the file's one job: asking
            # for another gives it, and waiting on it sees the index built.
            auth = {"Authorization": f"Bearer {servers.TOKEN}"}
            job = client.post("/api/v1/index", json={"dataset": "p.h5"}, headers=auth).json()
            ended = client.get(f"/api/v1/jobs/{job['job']}", params={"wait": 60}).json()
            assert ended["state"] == "done"
            listed = client.get("/api/v1/datasets").json()["datasets"]
            assert (listed[0]["indexed"], listed[0]["fresh"]) == (True, True)
        assert os.path.exists(tmp_path / "root" / "p.h5.qidx")
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workers", "0"], "--workers and --builds take 1 or more"),
        (["--builds", "0"], "--workers and --builds take 1 or more"),
        (["--query-seconds", "0"], "--query-seconds must be more than 0"),
        (["--port", "70000"], "--port must be from 0 to 65535"),
    ],
)
def test_serve_options_out_of_range_are_usage_errors(tmp_path, argv, message):
    done = subprocess.run(
        [sys.executable, "-m", "quarry.cli.main", "serve", str(tmp_path), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"quarry: error: {message}")
    assert len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "answered", "refused"),
    [
        ((), ["localhost", "127.0.0.1"], ["data.example"]),
        (("--allow-host", "Data.Example"), ["data.example:80", "localhost"], ["other.example"]),
        (("--host", "0.0.0.0"), ["data.example", "other.example"], []),
    ],
)
def test_serve_answers_the_names_it_is_allowed_and_any_on_every_address(
    tmp_path, argv, answered, refused
):
    servers.particles(str(tmp_path / "root" / "p.h5"), n=10)
    host = "0.0.0.0" if "0.0.0.0" in argv else "127.0.0.1"
    process, url = _start(
        str(tmp_path / "root"), "--catalog", str(tmp_path / "c.sqlite"), *argv, host=host
    )
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            for name in answered:
                answer = client.get("/api/v1/datasets", headers={"Host": name})
                assert answer.status_code == 200, name
            for name in refused:
                answer = client.get("/api/v1/datasets", headers={"Host": name})
                assert answer.status_code == 421, name
    finally:
        process.terminate()
        process.communicate(timeout=30)
