"""The lab lock the sweep scripts hold around each lab command
(/tmp/pathsonde-lab.lock, the file `pathsonde_lab::exclusive` takes), so a
sweep never runs beside a lab test or another sweep.  Standard library only.

    from lablock import LabLock
    with LabLock():
        subprocess.run([...])
"""
import fcntl
import json
import os
import subprocess
import sys

LOCK = "/tmp/pathsonde-lab.lock"


class LabLock:
    def __enter__(self):
        self.f = open(LOCK, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *a):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def run_lab_json(tool, cmd):
    """Runs one `lab run ... --json` command under the lab lock and returns
    its report with the machine's load average before and after.  Exit 9
    (no run gave an estimate) still prints a JSON report (the error
    object); any other failure ends the sweep, naming `tool` and the
    command."""
    with LabLock():
        before = os.getloadavg()
        out = subprocess.run(cmd, capture_output=True, text=True)
        after = os.getloadavg()
    if out.returncode not in (0, 9):
        sys.exit(f"{tool}: {' '.join(cmd)} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout), before, after
