//! The user contract of the binary, run as a user runs it: a closed pipe
//! ends a command quietly (exit 141, no panic), a usage error under `--json`
//! or `--json-lines` still prints JSON, and SIGINT/SIGTERM under them print
//! the error object or event and exit 130/143 (docs/exit-codes.md).

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A scenario that simulates in about a second, and one that takes several.
const SHORT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/fac2-10g.toml");
const LONG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../scenarios/icim-fig5.toml"
);

fn pathsonde() -> Command {
    Command::cargo_bin("pathsonde").unwrap()
}

/// Runs `args` with stdout a pipe whose reader is already gone, so the
/// first write fails whatever its size; returns (exit code, stderr).
fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills both descriptors; we own them from here on.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (reader, writer) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(reader);
    let out = pathsonde()
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn a_closed_pipe_ends_every_kind_of_output_quietly() {
    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["sim", "run", SHORT, "--json"],
        &["sim", "run", SHORT],
    ] {
        let (code, stderr) = with_closed_stdout(args);
        assert_eq!(code, Some(141), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_usage_error_under_json_still_prints_the_error_object() {
    let out = pathsonde()
        .args(["abw", "127.0.0.1", "--max-rate", "abc", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object on stdout");
    assert_eq!(v["error"]["kind"], "usage");
    assert_eq!(v["error"]["exit_code"], 2);
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--max-rate") && message.contains("abc"),
        "{message}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--max-rate"), "{stderr}");

    let out = pathsonde()
        .args(["sim", "run", "--no-such-flag", "--json-lines"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let last = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(last.lines().last().expect("an event")).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["data"]["kind"], "usage");

    // Without --json: clap's message on stderr, nothing on stdout.
    let out = pathsonde()
        .args(["abw", "127.0.0.1", "--max-rate", "abc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// Starts a simulation long enough to be interrupted, sends `signal` once it
/// runs, and returns (exit code, stdout).
fn interrupted(signal: i32, mode: &str) -> (Option<i32>, String) {
    let mut child = pathsonde()
        .args(["sim", "run", LONG, mode])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Long enough for the signal handler to be installed; the run itself
    // takes seconds even in a release build.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid, with a valid signal number.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(sent, 0);
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), out)
}

#[test]
fn sigterm_and_sigint_under_json_say_so_and_exit_128_plus_the_signal() {
    let (code, out) = interrupted(libc::SIGTERM, "--json");
    assert_eq!(code, Some(143), "{out}");
    let v: Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["error"]["kind"], "interrupted");
    assert_eq!(v["error"]["exit_code"], 143);

    let (code, out) = interrupted(libc::SIGINT, "--json-lines");
    assert_eq!(code, Some(130), "{out}");
    let v: Value = serde_json::from_str(out.lines().last().expect("an event")).unwrap();
    assert_eq!(v["type"], "error");
    assert_eq!(v["data"]["exit_code"], 130);
}

#[test]
fn durations_take_a_unit_or_bare_seconds_as_iperf3_does() {
    // Port 9 on loopback refuses: the command gets as far as connecting,
    // so the duration was accepted.
    for timeout in ["0.5s", "500ms", "0.5"] {
        let out = pathsonde()
            .args(["abw", "127.0.0.1:9", "--timeout", timeout, "--json"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "--timeout {timeout}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["error"]["kind"], "connect");
    }
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "--timeout", "soon", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn iperf3_spellings_work() {
    // -V names the commit the binary was built from.
    let out = pathsonde().arg("-V").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = String::from_utf8_lossy(&out.stdout);
    let commit = v
        .split_once('(')
        .and_then(|(_, c)| c.split_once(')'))
        .map(|(c, _)| c.trim_end_matches("+dirty"))
        .unwrap_or_else(|| panic!("no commit in {v}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{v}"
    );
    // -J is --json; --json-stream is --json-lines.
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "-J"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "connect");
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "--json-stream"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let last = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(last.lines().last().unwrap()).unwrap();
    assert_eq!(v["type"], "error");
}

#[test]
fn logfile_takes_stdout_and_leaves_stderr() {
    let dir = std::env::temp_dir().join(format!("pathsonde-logfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("run.log");
    let _ = std::fs::remove_file(&log);
    for _ in 0..2 {
        let out = pathsonde()
            .args(["abw", "127.0.0.1:9", "-J", "--logfile"])
            .arg(&log)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert!(out.stdout.is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect"));
    }
    // Appended, one object per run.
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["error"]["kind"], "connect");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "--logfile", "/nonexistent/dir/x.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_max_rate_too_slow_for_a_first_train_is_refused_before_sending() {
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "--max-rate", "1k", "-J"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("first train would take") && message.contains("use --max-rate"),
        "{message}"
    );
    // A slow rate whose first train fits gets as far as connecting.
    let out = pathsonde()
        .args(["abw", "127.0.0.1:9", "--max-rate", "100k", "-J"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
}

/// Every line of `out` is a `{"type", "data"}` event and the last is the
/// result; returns the result's data.
fn only_events(args: &[String], out: &std::process::Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut last = Value::Null;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{args:?}: not a JSON line ({e}): {line}"));
        assert!(
            v["type"].is_string() && !v["data"].is_null(),
            "{args:?}: {line}"
        );
        last = v;
    }
    assert_eq!(last["type"], "result", "{args:?}: {text}");
    last["data"].clone()
}

/// `--json-lines` prints events, never text, in every command that offers
/// it and runs in a second without a server or a lab; the main.rs unit test
/// keeps the flag off the commands that print nothing.
#[test]
fn json_lines_streams_events_in_every_command_that_offers_it() {
    let dir = std::env::temp_dir().join(format!("pathsonde-contract-lines-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |name: &str| dir.join(name).display().to_string();
    let archive = p("a.sqlite");
    let (trace, model, generated) = (p("t.pstrace"), p("t.model.json"), p("g.pstrace"));
    let plots = p("plots");
    let html = p("r.html");
    let commands: Vec<Vec<&str>> = vec![
        vec![
            "trace", "synth", "--preset", "banded", "-n", "3000", "-o", &trace,
        ],
        vec!["trace", "analyze", &trace],
        vec!["trace", "model", &trace, "-k", "8", "-o", &model],
        vec!["trace", "generate", &model, "-n", "1000", "-o", &generated],
        vec!["trace", "two-router", "--steps", "3", "--packets", "1000"],
        vec!["trace", "bench", "-n", "64", "-k", "2", "--seconds", "0.01"],
        vec!["sim", "bench", "--scale", "0.01"],
        vec!["sim", "run", SHORT],
        vec!["lab", "list"],
        vec!["host", "--archive", &archive],
        vec!["history", "--archive", &archive],
        vec!["show", "1", "--archive", &archive],
        vec!["report", "1", "--archive", &archive, "--html", &html],
    ];
    for args in commands {
        let mut args: Vec<String> = args.into_iter().map(String::from).collect();
        args.push("--json-lines".into());
        let out = pathsonde().args(&args).output().unwrap();
        let result = only_events(&args, &out);
        assert!(result.is_object(), "{args:?}: {result}");
    }
    // A host run has nothing to plot: the failure is an event too.
    let out = pathsonde()
        .args([
            "plot",
            "1",
            "--archive",
            &archive,
            "-o",
            &plots,
            "--json-lines",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    assert_eq!(v["type"], "error");
    let args: Vec<String> = ["rm", "1", "--archive", &archive, "--json-lines"]
        .map(String::from)
        .into();
    let removed = only_events(&args, &pathsonde().args(&args).output().unwrap());
    assert_eq!(removed["removed"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trace_analyze_streams_a_result_event_under_json_lines() {
    let dir = std::env::temp_dir().join(format!("pathsonde-contract-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.pstrace");
    let out = pathsonde()
        .args(["trace", "synth", "--preset", "banded", "-n", "3000", "-o"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = pathsonde()
        .args(["trace", "analyze", "--json-lines"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value =
        serde_json::from_str(text.lines().last().unwrap()).expect("JSON lines, not text");
    assert_eq!(v["type"], "result");
    assert!(v["data"]["analysis"].is_object());
    std::fs::remove_dir_all(&dir).unwrap();
}
