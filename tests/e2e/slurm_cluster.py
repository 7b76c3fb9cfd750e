"""A throwaway single-node Slurm cluster for the tests: munged, slurmctld and slurmd started from
a temporary folder (key, socket, state, spool, logs all in it; ports picked free, so it never
meets a real cluster's 6817/6818), torn down after.

    with SlurmCluster(tmp_path) as cluster:
        subprocess.run(["sbatch", ...], env=cluster.env)

`SlurmCluster.missing()` says why one cannot start here (not root, a program missing), or None.
Run alone, `python3 tests/e2e/slurm_cluster.py DIR` starts one and waits for Ctrl-C, which is
handy for trying the executor by hand: it prints the SLURM_CONF to export.
"""
import ctypes
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo", "srun",
            "mpirun")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self, folder, cpus=2):
        self.dir = pathlib.Path(folder)
        self.cpus = cpus
        self.node = socket.gethostname().split(".")[0]
        self.procs = []
        self.conf = self.dir / "slurm.conf"
        self.socket = self.dir / "munge.socket"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))

    @staticmethod
    def missing():
        """Why a cluster cannot start here, or None."""
        if os.geteuid() != 0:
            return "the Slurm tests start slurmctld and slurmd, which needs root"
        gone = [p for p in PROGRAMS if not shutil.which(p, path=os.environ.get("PATH", "") +
                                                        ":/usr/sbin:/sbin")]
        if gone:
            return ("not installed: " + ", ".join(gone) + " (Debian: apt-get install slurmctld "
                    "slurmd slurm-client munge openmpi-bin libopenmpi-dev)")
        return None

    def _write_conf(self):
        d = self.dir
        for sub in ("state", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(f"""\
ClusterName=trainyard-test
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SchedulerType=sched/builtin
ReturnToService=2
KillWait=2
MinJobAge=300
InactiveLimit=0
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")

    def _start(self, argv, log):
        out = open(self.dir / log, "ab")
        self.procs.append(subprocess.Popen(argv, env=self.env, stdout=out, stderr=out,
                                           start_new_session=True))

    def start(self, timeout=30):
        # slurmstepd leaves slurmd's process tree (it forks twice); as the subreaper this
        # process inherits it when it ends, and stop() reaps it, instead of a zombie under an
        # init that may not reap (a container's)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(128))
        os.chmod(key, 0o400)
        self._write_conf()
        self._start(["munged", "--foreground", "--force", f"--key-file={key}",
                     f"--socket={self.socket}", f"--pid-file={self.dir}/munged.pid",
                     f"--log-file={self.dir}/munged.log", f"--seed-file={self.dir}/munged.seed"],
                    "munged.out")
        self._wait(lambda: self.socket.exists(), timeout, "munged made no socket")
        # -i: ignore state from an earlier run (there is none: the folder is new)
        self._start(["slurmctld", "-D", "-i"], "slurmctld.out")
        self._start(["slurmd", "-D"], "slurmd.out")
        self._wait(self.idle, timeout, "the node did not come up idle")
        return self

    def idle(self):
        p = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True,
                           text=True, timeout=10)
        return p.returncode == 0 and p.stdout.strip() == "idle"

    def _wait(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        raise RuntimeError(f"{what}; logs in {self.dir}:\n{self.logs()}")

    def logs(self):
        text = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out",
                     "slurmd.out"):
            path = self.dir / name
            if path.exists():
                text.append(f"--- {name}\n" + "\n".join(path.read_text(
                    errors="replace").splitlines()[-30:]))
        return "\n".join(text)

    def squeue(self):
        """{job id: state} of every job slurmctld lists."""
        p = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=self.env, capture_output=True,
                           text=True, timeout=10)
        return dict(line.split() for line in p.stdout.splitlines() if line.strip())

    def drain(self, timeout=20):
        """Cancels every job and waits until slurmctld lists none: a step still ending when
        the daemons stop (its srun, its slurmstepd) would be left behind, waiting on them."""
        try:
            subprocess.run(["scancel", "--user=root"], env=self.env, capture_output=True,
                           timeout=10)
            end = time.time() + timeout
            while time.time() < end and self.squeue():
                time.sleep(0.3)
        except (subprocess.SubprocessError, OSError):
            pass

    def stop(self):
        if self.procs and all(p.poll() is None for p in self.procs):
            self.drain()
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        end = time.time() + 5
        while time.time() < end:  # the slurmstepds this process inherited
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.1)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


if __name__ == "__main__":
    why = SlurmCluster.missing()
    if why:
        sys.exit(why)
    with SlurmCluster(sys.argv[1] if len(sys.argv) > 1 else "/tmp/trainyard-slurm") as c:
        print(f"export SLURM_CONF={c.conf}", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
