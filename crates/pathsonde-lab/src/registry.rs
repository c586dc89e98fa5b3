//! The namespaces this process has made, so that a signal handler can remove
//! them even while the main thread is blocked in a measurement.

use crate::error::Result;
use crate::netns;
use std::sync::Mutex;

static MADE: Mutex<Vec<String>> = Mutex::new(Vec::new());
static DIRS: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

/// A state directory to remove along with the namespaces.
pub fn remember_dir(dir: &std::path::Path) {
    DIRS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(dir.to_path_buf());
}

pub fn remember(ns: &str) {
    let mut v = MADE.lock().unwrap_or_else(|p| p.into_inner());
    if !v.iter().any(|n| n == ns) {
        v.push(ns.to_string());
    }
}

pub fn forget(ns: &str) {
    let mut v = MADE.lock().unwrap_or_else(|p| p.into_inner());
    v.retain(|n| n != ns);
}

/// Deletes `made` (newest first), forgetting each in the lab registry;
/// the first error is returned after every namespace was tried.  One
/// teardown for the two-host lab and the multi-hop chain.
pub fn delete_all(made: &mut Vec<String>) -> Result<()> {
    let mut first_err = None;
    for ns in made.drain(..).rev() {
        if netns::exists(&ns) {
            if let Err(e) = netns::delete(&ns) {
                first_err.get_or_insert(e);
            }
        }
        forget(&ns);
    }
    first_err.map_or(Ok(()), Err)
}

/// Deletes every namespace this process made and has not yet removed (and
/// any registered state directory); returns how many namespaces it removed.
/// Called from the signal-handling thread before the process exits.
pub fn remove_all() -> usize {
    let names: Vec<String> = MADE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    for ns in names.iter().rev() {
        let _ = netns::delete(ns);
    }
    let dirs: Vec<std::path::PathBuf> = DIRS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    names.len()
}
