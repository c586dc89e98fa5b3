//! One lab experiment at a time on this machine.
//!
//! Lab figures depend on the two cores not being shared with another lab
//! (and lab tests share the namespace list), so tests and sweeps take this
//! lock — an `flock` on `/tmp/pathsonde-lab.lock`, which serialises threads
//! and processes alike and is released when the guard is dropped, or when the
//! process dies.

use crate::error::{LabError, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;

pub const LOCK_PATH: &str = "/tmp/pathsonde-lab.lock";

/// Held while the lock is ours.
pub struct LabLock(#[allow(dead_code)] File);

/// Blocks until no other lab experiment holds the lock.
pub fn lab_lock() -> Result<LabLock> {
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_PATH)
        .map_err(|e| LabError::io(format!("opening {LOCK_PATH}"), e))?;
    // SAFETY: flock on a descriptor we own.  The lock belongs to this open
    // file description, so it serialises threads of one process too.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    if rc != 0 {
        return Err(LabError::io(
            format!("locking {LOCK_PATH}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(LabLock(f))
}

impl AsRawFd for LabLock {
    /// The locked descriptor, so that a parent holding the lock can hand it
    /// to a child (clear `FD_CLOEXEC`), which then finds it with
    /// [`lab_lock_or_inherit`].
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

/// The lab lock for a whole command, such as a `compare` sweep.  If this
/// process inherited a descriptor of the lock file that holds the lock — run
/// as `flock /tmp/pathsonde-lab.lock pathsonde compare …`, or by a test that
/// holds the lock — the lock is already ours and is taken through that
/// descriptor (same open file, so `flock` succeeds at once).  Otherwise it
/// blocks like [`lab_lock`], calling `waiting` first if another experiment
/// holds the lock.
pub fn lab_lock_or_inherit(waiting: impl FnOnce()) -> Result<LabLock> {
    if let Some(f) = inherited_lock_file() {
        // SAFETY: flock on a descriptor we own (a dup of the inherited one).
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(LabLock(f));
        }
    }
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK_PATH)
        .map_err(|e| LabError::io(format!("opening {LOCK_PATH}"), e))?;
    // SAFETY: as above.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(LabLock(f));
    }
    waiting();
    // SAFETY: as above.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(LabError::io(
            format!("locking {LOCK_PATH}"),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(LabLock(f))
}

/// A duplicate of an inherited descriptor open on the lock file, if any.
fn inherited_lock_file() -> Option<File> {
    use std::os::fd::FromRawFd;
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    for e in entries.flatten() {
        let Ok(fd) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if target == std::path::Path::new(LOCK_PATH) {
            // SAFETY: dup of a descriptor that is open in this process; the
            // new descriptor is ours alone and closed when the File drops.
            let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
            if dup >= 0 {
                // SAFETY: `dup` is a fresh descriptor owned by nobody else.
                return Some(unsafe { File::from_raw_fd(dup) });
            }
        }
    }
    None
}

/// What a lab test does when it cannot run here (not root, a tool missing):
/// under CI (`CI` set) it fails, since a CI that skips its lab tests would
/// pass without having checked them; elsewhere it says why and passes.
/// Returns normally only outside CI.
pub fn cannot_run(why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("this lab test cannot run under CI: {why} (CI runs as root with iproute2, ethtool and procps; .ci/run installs them)");
    }
    eprintln!("skipped: {why}");
}

/// Whether this process runs as root, as every lab needs.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A lab test's start: the lab lock, or `None` (through [`cannot_run`],
/// which fails under CI) where the lab cannot run because this is not root.
pub fn lab_or_skip() -> Option<LabLock> {
    if !is_root() {
        cannot_run("the lab needs root");
        return None;
    }
    Some(lab_lock().expect("taking the lab lock"))
}
