"""Device discovery on machines whose drivers are not set up for the ICD loader (kernels/icd.h).

A CUDA container image often holds the driver's OpenCL library but no .icd file naming it. Here
that is played for real with PoCL: /etc/OpenCL/vendors is hidden behind an empty folder in a
mount namespace of the test's own (unshare -m, which needs root: skipped otherwise), and
TRAINYARD_OPENCL_DRIVER_PATH names the folder that holds libpocl.so.2. The ICD loader, PoCL and
`trainyard devices` are the real ones.
"""
import json
import os
import pathlib
import shutil
import subprocess

import pytest
from conftest import BIN

VENDORS = "/etc/OpenCL/vendors"
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]


def pocl_dir():
    for d in LIB_DIRS:
        if (pathlib.Path(d) / "libpocl.so.2").exists():
            return d
    pytest.skip("no libpocl.so.2 in " + ", ".join(LIB_DIRS))


def hidden_vendors(tmp_path, argv, env, **kw):
    """Runs argv with VENDORS hidden behind an empty folder, in a mount namespace of its own."""
    if not shutil.which("unshare") or not os.path.isdir(VENDORS):
        pytest.skip("needs unshare(1) and " + VENDORS)
    empty = tmp_path / "no-vendors"
    empty.mkdir(exist_ok=True)
    probe = subprocess.run(["unshare", "-m", "mount", "--bind", str(empty), VENDORS],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot bind-mount in a mount namespace here (needs root): "
                    + probe.stderr.decode(errors="replace").strip())
    script = 'mount --bind "$0" ' + VENDORS + ' && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(empty)] + argv, env=env,
                          capture_output=True, text=True, **kw)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH", "TRAINYARD_OPENCL_DRIVER_PATH")}
    env.update(extra)
    return env


def test_driver_search_finds_a_library_no_icd_file_names(tmp_path):
    lib_dir = pocl_dir()
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = hidden_vendors(tmp_path, [str(BIN), "devices", "--json"],
                         clean_env(TRAINYARD_OPENCL_DRIVER_PATH="/nonexistent:" + lib_dir,
                                   TMPDIR=str(tmp)))
    assert out.returncode == 0, out.stderr
    devices = json.loads(out.stdout)["devices"]
    assert devices, out.stderr
    lib = lib_dir + "/libpocl.so.2"
    assert devices[0]["platform"] == "Portable Computing Language"
    assert devices[0]["found_by"] == "opencl via driver search: " + lib
    lines = [line for line in out.stderr.splitlines() if "driver search" in line]
    assert len(lines) == 1 and lib in lines[0], out.stderr
    # the temporary vendors folder is gone once the loader read it
    assert list(tmp.iterdir()) == []


def test_without_a_driver_devices_says_so(tmp_path):
    nothing = tmp_path / "no-drivers"
    nothing.mkdir()
    out = hidden_vendors(tmp_path, [str(BIN), "devices"],
                         clean_env(TRAINYARD_OPENCL_DRIVER_PATH=str(nothing), PATH="/usr/bin:/bin"))
    assert out.returncode == 0, out.stderr
    assert "no device found" in out.stdout
    assert "TRAINYARD_OPENCL_DRIVER_PATH" in out.stdout
    assert "driver search" not in out.stderr


def test_the_users_vendors_folder_wins(tmp_path):
    """OCL_ICD_VENDORS set by the user: nothing is searched, even with a driver in the path."""
    lib_dir = pocl_dir()
    own = tmp_path / "own-vendors"
    own.mkdir()
    out = hidden_vendors(tmp_path, [str(BIN), "devices", "--json"],
                         clean_env(OCL_ICD_VENDORS=str(own), TRAINYARD_OPENCL_DRIVER_PATH=lib_dir))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["devices"] == []
    assert "driver search" not in out.stderr


def test_an_installed_icd_is_left_alone():
    out = subprocess.run([str(BIN), "devices", "--json"], capture_output=True, text=True,
                         env=clean_env())
    assert out.returncode == 0, out.stderr
    devices = json.loads(out.stdout)["devices"]
    if not devices:
        pytest.skip("no OpenCL device here")
    assert all(d["found_by"] == "opencl via " + VENDORS for d in devices)
    assert "driver search" not in out.stderr
