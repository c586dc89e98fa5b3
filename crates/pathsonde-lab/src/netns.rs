//! Network namespaces, veth links and qdiscs, through iproute2.
//!
//! Configuration goes through the `ip` and `tc` programs (`ip -n NS`, never a
//! forked `ip netns exec` where `-n` will do); work that must happen *inside*
//! a namespace — a server, a client, a traffic generator, the delay relay —
//! runs on a thread that has entered it with `setns`, so the whole lab lives
//! in one process and dies with it.

use crate::error::{LabError, Result};
use nix::sched::{setns, CloneFlags};
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::thread::JoinHandle;

/// Every namespace pathsonde makes starts with this, so leftovers can be found.
pub const PREFIX: &str = "pathsonde-";
const NETNS_DIR: &str = "/var/run/netns";

/// Runs `program args…`, returning stdout; a non-zero exit is an error that
/// quotes the command and its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| LabError::Missing {
            program: program.to_string(),
            package: match program {
                "ip" | "tc" => "iproute2",
                "ethtool" => "ethtool",
                "nft" => "nftables",
                "sysctl" => "procps",
                _ => "it",
            },
            source,
        })?;
    if !out.status.success() {
        return Err(LabError::Command {
            command: format!("{program} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

pub fn tc(args: &[&str]) -> Result<String> {
    run("tc", args)
}

/// Runs a program inside namespace `ns` (for the few tools without `-n`).
pub fn exec_in(ns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut full = vec!["netns", "exec", ns, program];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// Sets a sysctl inside `ns`.
pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<()> {
    exec_in(ns, "sysctl", &["-q", "-w", &format!("{key}={value}")]).map(|_| ())
}

/// Names of all network namespaces.
pub fn list() -> Result<Vec<String>> {
    let dir = match std::fs::read_dir(NETNS_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(LabError::io(format!("listing {NETNS_DIR}"), e)),
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// The namespaces of lab `name` (`pathsonde-<name>-<node>`) that exist
/// now: what a test checks is empty after the lab is gone.
pub fn of_lab(name: &str) -> Vec<String> {
    let prefix = format!("pathsonde-{name}-");
    list()
        .unwrap_or_default()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

pub fn exists(ns: &str) -> bool {
    Path::new(NETNS_DIR).join(ns).exists()
}

pub fn add(ns: &str) -> Result<()> {
    ip(&["netns", "add", ns]).map(|_| ())
}

/// Deletes a namespace; its interfaces go with it (a veth whose peer lives
/// elsewhere is destroyed on both ends).
pub fn delete(ns: &str) -> Result<()> {
    ip(&["netns", "delete", ns]).map(|_| ())
}

/// Moves the calling thread into namespace `ns`.  Only this thread moves;
/// sockets it creates belong to `ns` and stay usable from any thread.
pub fn enter(ns: &str) -> Result<()> {
    let path = Path::new(NETNS_DIR).join(ns);
    let f =
        File::open(&path).map_err(|e| LabError::io(format!("opening {}", path.display()), e))?;
    setns(&f, CloneFlags::CLONE_NEWNET)
        .map_err(|e| LabError::io(format!("entering namespace {ns}"), e.into()))
}

/// Runs `f` on a new thread inside namespace `ns`.
pub fn spawn_in<F, T>(ns: &str, thread_name: &str, f: F) -> Result<JoinHandle<Result<T>>>
where
    F: FnOnce() -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    let ns = ns.to_string();
    std::thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || {
            enter(&ns)?;
            f()
        })
        .map_err(|e| LabError::io("starting a lab thread", e))
}

/// Runs `f` inside `ns` and waits for it.
pub fn run_in<F, T>(ns: &str, f: F) -> Result<T>
where
    F: FnOnce() -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    spawn_in(ns, "pathsonde-lab", f)?
        .join()
        .unwrap_or_else(|_| Err(LabError::Capability("a lab thread panicked".into())))
}

/// Checks that this process may build a lab: root, and the tools the lab
/// drives (`ip`, `tc`, `ethtool`, `sysctl`) present.
pub fn check_permitted() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(LabError::NotPermitted("not running as root".into()));
    }
    ip(&["-V"])?;
    tc(&["-V"])?;
    run("ethtool", &["--version"])?;
    run("sysctl", &["--version"])?;
    Ok(())
}
