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
