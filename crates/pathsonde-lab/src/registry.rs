//! The namespaces this process has made, so that a signal handler can remove
//! them even while the main thread is blocked in a measurement.

use std::sync::Mutex;

static MADE: Mutex<Vec<String>> = Mutex::new(Vec::new());

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

/// Deletes every namespace this process made and has not yet removed.
/// Called from the signal-handling thread before the process exits.
pub fn remove_all() {
    let names: Vec<String> = MADE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain(..)
        .collect();
    for ns in names.iter().rev() {
        let _ = crate::netns::delete(ns);
    }
}
