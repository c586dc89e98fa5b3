//! The three output modes and the one place that knows them.
//!
//! - text: the readable report on stdout, progress on stderr (terminal only);
//! - `--json`: exactly one JSON object on stdout, the result or the error;
//! - `--json-lines`: one `{"type": ..., "data": ...}` object per line on
//!   stdout while the command runs (`start`, `progress`, `train`, `run`,
//!   `result`, `saved`, `error`), flushed line by line so a pipe sees each
//!   event as it happens.
//!
//! Exit codes do not depend on the mode (docs/exit-codes.md).  Commands call
//! [`event`] freely (it prints only under `--json-lines`) and end with
//! [`result`], which prints the final object in the mode chosen.

use serde_json::{json, Value};
use std::io::Write;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Text,
    Json,
    JsonLines,
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// Sets the mode once, from the command line (later calls are ignored).
pub fn init(mode: Mode) {
    let _ = MODE.set(mode);
}

pub fn mode() -> Mode {
    MODE.get().copied().unwrap_or(Mode::Text)
}

/// The terminal's progress bar of `len` steps: `percent` a bar with an ETA
/// (abw, capacity), else `{pos}/{len} runs` (compare).  One style for every
/// command that shows one.
pub fn progress_bar(len: u64, percent: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    let template = if percent {
        "{spinner} {elapsed_precise} [{bar:30}] {percent:>3} %, eta {eta}  {msg}"
    } else {
        "{elapsed_precise} [{bar:30}] {pos}/{len} runs, eta {eta}  {msg}"
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(if percent {
        120
    } else {
        200
    }));
    bar
}

/// Whether a person is reading: text mode and stderr on a terminal.
pub fn show_progress() -> bool {
    use std::io::IsTerminal;
    mode() == Mode::Text && std::io::stderr().is_terminal()
}

/// One event line under `--json-lines`; nothing otherwise.
pub fn event(kind: &str, data: Value) {
    if mode() != Mode::JsonLines {
        return;
    }
    let line = json!({ "type": kind, "data": data });
    let out = std::io::stdout();
    let mut o = out.lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// A progress message: on a terminal in text mode, as a `progress` event
/// under `--json-lines`, nowhere under `--json`.
pub fn progress(message: &str) {
    if show_progress() {
        eprintln!("{message}");
    }
    event("progress", json!({ "message": message }));
}

/// The command's final result: the text report, the one `--json` object, or
/// the `result` event.
pub fn result(value: &Value, text: impl FnOnce() -> String) {
    match mode() {
        Mode::Text => print!("{}", text()),
        Mode::Json => println!("{value}"),
        Mode::JsonLines => event("result", value.clone()),
    }
}

/// A failure, in the mode chosen (stderr always gets the one-line message
/// from `main`).
pub fn error(kind: &str, message: &str, exit_code: u8) {
    let e = json!({ "kind": kind, "message": message, "exit_code": exit_code });
    match mode() {
        Mode::Text => {}
        Mode::Json => println!("{}", json!({ "error": e })),
        Mode::JsonLines => event("error", e),
    }
}

/// The `train` event: one executed train, as the runner saw it.
pub fn train_event(o: &pathsonde_core::Observation) -> Value {
    json!({
        "train": o.train,
        "target_bps": o.spec.rate.bps(),
        "packets_sent": o.sent_packets(),
        "packets_received": o.received_packets(),
        "bytes_sent": o.sent_bytes().get(),
        "loss_fraction": o.loss_fraction(),
        "send_span_s": o.send_span().secs_f64(),
    })
}
