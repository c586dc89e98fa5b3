"""The lab lock the sweep scripts hold around each lab command
(/tmp/pathsonde-lab.lock, the file `pathsonde_lab::exclusive` takes), so a
sweep never runs beside a lab test or another sweep.  Standard library only.

    from lablock import LabLock
    with LabLock():
        subprocess.run([...])
"""
import fcntl

LOCK = "/tmp/pathsonde-lab.lock"


class LabLock:
    def __enter__(self):
        self.f = open(LOCK, "a")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *a):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()
