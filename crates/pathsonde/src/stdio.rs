//! What the binary does when its own output cannot be written, and when it
//! is stopped: never a panic or a backtrace, always a documented exit code
//! (docs/exit-codes.md) and nothing left behind.
//!
//! - **A closed pipe** (`pathsonde show 5 --json | head`): the reader has
//!   what it wanted.  Exit quietly with 141, the code a shell shows for a
//!   process ended by SIGPIPE (as `git log | head` is), after removing any
//!   lab namespace this process made.
//! - **Any other write failure** (a full disk): one line on stderr, exit 1.
//! - **SIGINT or SIGTERM**: remove the lab's namespaces, say so in the output
//!   mode chosen (the `--json` error object or the `--json-lines` error
//!   event), exit 128 + the signal.
//!
//! Rust's `println!` panics when stdout fails; the panic hook below turns
//! those panics into the exits above.  Every other panic is a bug and is
//! reported as Rust reports it.

use crate::output;
use std::io::{self, Write as _};

/// The exit code for a closed stdout: 128 + SIGPIPE.
pub(crate) const CLOSED_PIPE_EXIT: i32 = 128 + 13;

/// Installs the panic hook and the signal handler; call once, first thing.
pub(crate) fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // Only a failed write of our own output: std's `println!` says
        // "failed printing to stdout: …", clap_complete "failed to write …".
        let writing =
            message.starts_with("failed printing to std") || message.starts_with("failed to write");
        if writing && (message.contains("os error 32") || message.contains("BrokenPipe")) {
            closed_pipe();
        }
        if writing {
            pathsonde_lab::registry::remove_all();
            // stderr may be gone as well: never panic inside the hook.
            let _ = writeln!(
                io::stderr(),
                "pathsonde: cannot write the output: {}",
                tail(message)
            );
            std::process::exit(1);
        }
        default(info);
    }));
    stop_on_signals();
}

/// Sends stdout to `path` (created, or appended to), for `--logfile`: every
/// report and JSON object goes there from now on; stderr stays.
pub(crate) fn log_to(path: &std::path::Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    io::stdout().flush()?;
    // SAFETY: dup2 onto fd 1 with a descriptor we own; `file` may close its
    // own copy afterwards, fd 1 keeps the file open.
    if unsafe { libc::dup2(file.as_raw_fd(), libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `e` says the reader of our output went away.
pub(crate) fn is_closed_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// The reader of stdout went away: clean up and exit quietly.
pub(crate) fn closed_pipe() -> ! {
    pathsonde_lab::registry::remove_all();
    std::process::exit(CLOSED_PIPE_EXIT);
}

/// `"failed printing to stdout: No space left on device (os error 28)"` →
/// the part after the first `": "`.
fn tail(message: &str) -> &str {
    message.split_once(": ").map_or(message, |(_, t)| t)
}

/// On SIGINT or SIGTERM, remove every namespace this process made, report
/// the interruption in the output mode chosen, then exit with the
/// conventional 128 + signal.  Runs on its own thread, so it works while the
/// main thread is blocked in a measurement.
fn stop_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
            let removed = pathsonde_lab::registry::remove_all();
            let message = if removed > 0 {
                format!("interrupted by {name}; removed {removed} lab namespace(s)")
            } else {
                format!("interrupted by {name}")
            };
            let code = 128 + sig;
            output::error("interrupted", &message, code as u8);
            eprintln!("pathsonde: {message}");
            std::process::exit(code);
        }
    });
}
