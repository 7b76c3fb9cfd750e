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
from conftest import BIN, Service, sanitizer_reports
from helpers import job_doc, submit, until, wait_for
from test_scripts import logs, run_script

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


# ---- a machine whose GPUs only nvidia-smi shows ------------------------------------------------

UUIDS = ["GPU-2f1c3a4b-5d6e-7f80-91a2-b3c4d5e6f708", "GPU-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"]
SMI = "#!/bin/sh\n[ \"$1\" = -L ] || exit 2\n" + "".join(
    f"echo 'GPU {i}: NVIDIA H200 (UUID: {u})'\n" for i, u in enumerate(UUIDS))
SCRIPT = """import os, time
print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "unset"), flush=True)
time.sleep(2)
"""


def no_opencl_gpu_machine(tmp_path, monkeypatch):
    """What serve runs as: trainyard in a mount namespace where /etc/OpenCL/vendors is empty,
    no driver folder holds an OpenCL library, NVML is absent, and nvidia-smi (a real executable
    stand-in for the driver's tool, first on PATH) prints two H200s."""
    hidden_vendors(tmp_path, ["true"], clean_env())  # skips where this cannot be done
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(SMI)
    smi.chmod(0o755)
    empty = tmp_path / "no-vendors"
    wrapper = bin_dir / "trainyard-no-opencl"
    wrapper.write_text("#!/bin/sh\nexec unshare -m sh -c 'mount --bind \"$0\" " + VENDORS
                       + " && exec \"$@\"' " + str(empty) + " " + str(BIN) + " \"$@\"\n")
    wrapper.chmod(0o755)
    for name in ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINYARD_OPENCL_DRIVER_PATH", str(tmp_path / "no-drivers"))
    monkeypatch.setenv("TRAINYARD_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return wrapper


def test_gpus_without_opencl_run_script_jobs_only(tmp_path, monkeypatch, blobs):
    wrapper = no_opencl_gpu_machine(tmp_path, monkeypatch)
    listed = subprocess.run([str(wrapper), "devices", "--json"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    devices = json.loads(listed.stdout)["devices"]
    assert [(d["uuid"], d["opencl"], d["found_by"]) for d in devices] == \
        [(u, False, "nvidia-smi") for u in UUIDS]

    svc = Service(wrapper, tmp_path / "data", ("--dataset-allow", "127.0.0.1", "--allow-scripts",
                                               "--python", "/usr/bin/python3"))
    try:
        assert "local workers: 2 on NVIDIA H200 (script jobs only)" in svc.output()
        until(lambda: len(svc.http.get(f"{svc.url}/devices").json()["devices"]) == 2, 60,
              "both local workers registered")
        offered = svc.http.get(f"{svc.url}/devices").json()["devices"]
        assert sorted(d["uuid"] for d in offered) == sorted(UUIDS)
        assert all(d["opencl"] is False and d["found_by"] == "nvidia-smi" for d in offered)

        # a built-in job is never leased to them: it stays queued while scripts run
        builtin = submit(svc, job_doc(blobs, epochs=1)).json()
        jobs = [run_script(svc, SCRIPT) for _ in UUIDS]
        seen = set()
        for job in jobs:
            done = wait_for(svc, job["id"], {"succeeded", "failed", "cancelled"}, timeout=120)
            text = logs(svc, job["id"])
            assert done["status"] == "succeeded", text + svc.output()[-3000:]
            seen.update(line.split("=", 1)[1] for line in text.splitlines()
                        if "CUDA_VISIBLE_DEVICES=" in line)
        assert seen == set(UUIDS), seen  # each script had a GPU of its own
        assert svc.http.get(f"{svc.url}/jobs/{builtin['id']}").json()["status"] == "queued"
        assert "has no OpenCL: taking script jobs only" in svc.output()
    finally:
        svc.stop()
    assert sanitizer_reports(svc.final_output) is None, svc.final_output


def test_serve_without_allow_scripts_starts_no_worker_on_them(tmp_path, monkeypatch):
    wrapper = no_opencl_gpu_machine(tmp_path, monkeypatch)
    svc = Service(wrapper, tmp_path / "data", ())
    try:
        out = svc.output()
        assert "local workers: 0" in out
        assert "2 GPU(s) without OpenCL (found by nvidia-smi) run script jobs only" in out
    finally:
        svc.stop()
    assert sanitizer_reports(svc.final_output) is None, svc.final_output
