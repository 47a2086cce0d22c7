"""Install the built wheel as a user would, where no Rust toolchain can help.

``make test-wheel`` runs this after ``make dist``. It makes a fresh virtual
environment, puts on PATH only directories that hold no ``cargo`` or ``rustc``,
installs ``dist/quarry_index-<version>-*.whl`` with every runtime extra, binary
packages only (so nothing can be compiled), and then, from a directory outside
the clone, runs what a new user runs: ``quarry --version``, ``quarry demo``, a
query checked against NumPy, the same query under ``mpiexec`` from the ``mpi``
extra, and an import of each extra's package.

Usage: python tests/packaging/check_wheel.py [DIST_DIR]
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTRAS = "netcdf,zarr,adios2,interop,mpi,plot,service"
EXTRA_MODULES = [
    "netCDF4", "zarr", "adios2", "pandas", "pyarrow", "xarray", "mpi4py", "starlette", "uvicorn",
]  # fmt: skip
#: Files of the package that are not Python, which the wheel must carry.
DATA_FILES = ["quarry/py.typed", "quarry/service/static/index.html"]
QUERY = "energy > 1.0"


def _version() -> str:
    with open(os.path.join(ROOT, "Cargo.toml"), "rb") as f:
        return str(tomllib.load(f)["workspace"]["package"]["version"])


def _path_without_rust() -> str:
    """PATH with every directory that holds cargo or rustc left out."""
    keep = [
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not any(os.path.exists(os.path.join(d, tool)) for tool in ("cargo", "rustc"))
    ]
    return os.pathsep.join(keep)


def _run(env: dict[str, str], cwd: str, *argv: str) -> str:
    print("$", " ".join(argv), flush=True)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def main(dist: str) -> int:
    version = _version()
    wheels = glob.glob(os.path.join(dist, f"quarry_index-{version}-cp311-abi3-manylinux*.whl"))
    if len(wheels) != 1:
        sys.exit(f"expected one abi3 manylinux wheel of version {version} in {dist}: {wheels}")
    wheel = os.path.abspath(wheels[0])
    with zipfile.ZipFile(wheel) as archive:
        missing = sorted(set(DATA_FILES) - set(archive.namelist()))
    if missing:
        sys.exit(f"the wheel lacks {missing}")
    with tempfile.TemporaryDirectory(prefix="quarry-wheel-") as work:
        venv = os.path.join(work, "venv")
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        bin_dir = os.path.join(venv, "bin")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("CARGO", "RUSTUP", "PYTHON", "VIRTUAL_ENV"))
        }
        env["PATH"] = os.pathsep.join([bin_dir, _path_without_rust()])
        for tool in ("cargo", "rustc"):
            if shutil.which(tool, path=env["PATH"]):
                sys.exit(f"{tool} is still on PATH: {shutil.which(tool, path=env['PATH'])}")
        users_dir = os.path.join(work, "home")
        os.makedirs(users_dir)
        python = os.path.join(bin_dir, "python")
        _run(
            env,
            users_dir,
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--only-binary",
            ":all:",
            f"{wheel}[{EXTRAS}]",
        )

        said = _run(env, users_dir, "quarry", "--version")
        assert said == f"quarry {version}\n", said
        where = _run(
            env,
            users_dir,
            python,
            "-c",
            (
                "import importlib.metadata as m, quarry; "
                "print(m.version('quarry-index'), quarry.__version__, quarry._core.__file__)"
            ),
        ).split()
        assert where[:2] == [version, version], where
        assert where[2].startswith(venv) and where[2].endswith("_core.abi3.so"), where
        _run(env, users_dir, python, "-c", "import " + ", ".join(EXTRA_MODULES))

        _run(env, users_dir, "quarry", "demo", "--rows", "200000")
        data = os.path.join(users_dir, "quarry-demo", "particles.h5")
        count = ["quarry", "query", data, QUERY, "--count", "--json"]
        answer = json.loads(_run(env, users_dir, *count))
        expect = int(
            _run(
                env,
                users_dir,
                python,
                "-c",
                (
                    "import h5py, sys; f = h5py.File(sys.argv[1]); "
                    "print(int((f['Step#0/energy'][()] > 1.0).sum()))"
                ),
                data,
            )
        )
        assert answer["count"] == expect > 0, (answer, expect)
        under_mpi = _run(env, users_dir, "mpiexec", "-n", "2", *count)
        assert json.loads(under_mpi)["count"] == expect, under_mpi
    print(f"the wheel {os.path.basename(wheel)} installs and runs without a Rust toolchain")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist")))
