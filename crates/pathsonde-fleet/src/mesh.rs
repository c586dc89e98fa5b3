//! The mesh file: one TOML file, given to every agent, naming the hosts,
//! the tests, and which host originates which test (docs/fleet.md).
//!
//! ```toml
//! [defaults]
//! interval = "30s"
//!
//! [[host]]
//! name = "chicago"
//! address = "10.0.0.1"          # host[:port], port 5310 when left out
//! key_file = "/etc/pathsonde/fleet.key"
//!
//! [[test]]
//! name = "abw"
//! method = "fac2"
//! between = "all"               # every host measures every other host
//! shared = ["transatlantic"]    # paths two tests must not load at once
//! ```
//!
//! Reading is two steps with two kinds of error: the TOML syntax (the
//! parser's message, with line and column), then the meaning, where every
//! problem found is one line ([`Problem`]) so a user fixes all at once.
//! Passwords never belong here: a host names a key *file*, and a field that
//! looks like a secret is refused with a line saying where secrets go.

use pathsonde_core::{BitRate, DurationNs};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// The port `serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5310;

/// Defaults when neither the test nor `[defaults]` says.
const DEFAULT_INTERVAL: DurationNs = DurationNs::from_secs(60);
const DEFAULT_LEASE: DurationNs = DurationNs::from_secs(120);
const DEFAULT_METHOD: &str = "fac2";

/// One problem in a mesh file: where, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// e.g. `host 2 (geneva)`, `test abw`.
    pub at: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// Why a mesh file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MeshError {
    #[error("mesh file {path}: {message}")]
    Read { path: String, message: String },
    /// Not TOML, or not the shape of a mesh file (the parser's message).
    #[error("mesh file {path}: {message}")]
    Syntax { path: String, message: String },
    /// Well-formed but wrong: one line per problem.
    #[error("mesh file {path}: {}", problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid {
        path: String,
        problems: Vec<Problem>,
    },
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    defaults: Defaults,
    #[serde(rename = "host", default)]
    hosts: Vec<HostEntry>,
    #[serde(rename = "test", default)]
    tests: Vec<TestEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Defaults {
    method: Option<String>,
    interval: Option<String>,
    wait: Option<String>,
    lease: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostEntry {
    name: String,
    address: String,
    key_file: Option<PathBuf>,
    key_id: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestEntry {
    name: String,
    method: Option<String>,
    interval: Option<String>,
    wait: Option<String>,
    lease: Option<String>,
    #[serde(default)]
    options: OptionsEntry,
    #[serde(default)]
    shared: Vec<String>,
    between: Option<String>,
    pairs: Option<Vec<[String; 2]>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsEntry {
    max_rate: Option<String>,
    known_capacity: Option<String>,
    timeout: Option<String>,
}

/// One host of the mesh: an agent's name and where its `serve` listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    /// Host name or address, without the port.
    pub host: String,
    pub port: u16,
    /// The key file a client presents to this host's `serve` (a path,
    /// never the secret itself).
    pub key_file: Option<PathBuf>,
    pub key_id: Option<String>,
}

/// What a test's method is told, in units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TestOptions {
    pub max_rate: Option<BitRate>,
    pub known_capacity: Option<BitRate>,
    /// How long to wait for any answer from the server.
    pub timeout: Option<DurationNs>,
}

/// One test one agent runs: a source measuring a destination.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshTest {
    /// The test's name in the mesh file.
    pub test: String,
    pub source: String,
    pub destination: Host,
    pub method: String,
    pub interval: DurationNs,
    /// How long a due test waits for its leases before it is skipped.
    pub wait: DurationNs,
    /// How long a lease holds; a killed agent's leases lapse after this.
    pub lease: DurationNs,
    pub options: TestOptions,
    /// Paths declared shared: leased as well as the server.
    pub shared: Vec<String>,
}

impl MeshTest {
    /// `test/source->destination`: unique within a mesh.
    pub fn id(&self) -> String {
        format!("{}/{}->{}", self.test, self.source, self.destination.name)
    }

    /// What this test leases before it starts: the destination's server
    /// and every shared path, in a fixed order (so two agents taking
    /// overlapping sets never wait on each other in a cycle).
    pub fn resources(&self) -> Vec<String> {
        let mut r: Vec<String> = std::iter::once(format!("server:{}", self.destination.name))
            .chain(self.shared.iter().map(|p| format!("path:{p}")))
            .collect();
        r.sort();
        r.dedup();
        r
    }
}

/// A checked mesh.
#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    pub hosts: Vec<Host>,
    /// Every (test, source, destination), in file order.
    pub tests: Vec<MeshTest>,
}

impl Mesh {
    /// Reads and checks the mesh file at `path`.
    pub fn load(path: &Path) -> Result<Mesh, MeshError> {
        let text = std::fs::read_to_string(path).map_err(|e| MeshError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Mesh::parse(&text, &path.display().to_string())
    }

    /// Checks mesh text; `path` names it in messages.
    pub fn parse(text: &str, path: &str) -> Result<Mesh, MeshError> {
        if let Some(p) = secrets_in(text) {
            return Err(MeshError::Invalid {
                path: path.into(),
                problems: vec![p],
            });
        }
        let file: File = toml::from_str(text).map_err(|e| MeshError::Syntax {
            path: path.into(),
            message: e.message().to_string() + &line_of(text, e.span()),
        })?;
        let mut problems = Vec::new();
        let mesh = check(file, &mut problems);
        if problems.is_empty() {
            Ok(mesh)
        } else {
            Err(MeshError::Invalid {
                path: path.into(),
                problems,
            })
        }
    }

    /// The tests the agent named `name` originates.
    pub fn originated_by(&self, name: &str) -> Vec<MeshTest> {
        self.tests
            .iter()
            .filter(|t| t.source == name)
            .cloned()
            .collect()
    }

    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }
}

/// ` (line N)` for a parser error's span.
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    span.map(|s| {
        let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
        format!(" (line {line})")
    })
    .unwrap_or_default()
}

/// A key that looks like a secret, anywhere in the file: refused before
/// parsing, so the message is about where secrets go, not "unknown field".
fn secrets_in(text: &str) -> Option<Problem> {
    for (n, line) in text.lines().enumerate() {
        let key = line
            .split('=')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if line.contains('=')
            && matches!(key.as_str(), "password" | "secret" | "passphrase" | "key")
        {
            return Some(Problem {
                at: format!("line {}", n + 1),
                message: format!(
                    "`{key}` is refused: secrets never go in the mesh file (it is copied to every \
                     host); name a key file with key_file, and put database passwords in \
                     ~/.pgpass (docs/fleet.md)"
                ),
            });
        }
    }
    None
}

fn duration(p: &mut Vec<Problem>, at: &str, field: &str, v: Option<&String>) -> Option<DurationNs> {
    let s = v?;
    match s.parse::<DurationNs>() {
        Ok(d) if d.ns() > 0 => Some(d),
        Ok(_) => {
            p.push(problem(at, format!("{field} {s:?} must be above zero")));
            None
        }
        Err(e) => {
            p.push(problem(at, format!("{field}: {e}")));
            None
        }
    }
}

fn rate(p: &mut Vec<Problem>, at: &str, field: &str, v: Option<&String>) -> Option<BitRate> {
    let s = v?;
    match s.parse::<BitRate>() {
        Ok(r) if r.is_positive() => Some(r),
        Ok(_) => {
            p.push(problem(at, format!("{field} {s:?} must be above zero")));
            None
        }
        Err(e) => {
            p.push(problem(at, format!("{field}: {e}")));
            None
        }
    }
}

fn problem(at: &str, message: String) -> Problem {
    Problem {
        at: at.to_string(),
        message,
    }
}

/// `host`, `host:port`, `[v6]:port` or a bare IPv6 address.
fn split_address(a: &str) -> Result<(String, u16), String> {
    let bad_port = |p: &str| format!("port {p:?} is not a number from 1 to 65535");
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| bad_port(p))
    };
    if let Some(rest) = a.strip_prefix('[') {
        let (h, tail) = rest.split_once(']').ok_or("an unclosed [")?;
        return match tail.strip_prefix(':') {
            Some(p) => Ok((h.to_string(), port(p)?)),
            None if tail.is_empty() => Ok((h.to_string(), DEFAULT_PORT)),
            None => Err(format!("unexpected {tail:?} after ]")),
        };
    }
    match a.matches(':').count() {
        0 => Ok((a.to_string(), DEFAULT_PORT)),
        1 => {
            let (h, p) = a.split_once(':').expect("one colon");
            Ok((h.to_string(), port(p)?))
        }
        _ => Ok((a.to_string(), DEFAULT_PORT)),
    }
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn check(file: File, p: &mut Vec<Problem>) -> Mesh {
    let d = &file.defaults;
    let def_interval = duration(p, "defaults", "interval", d.interval.as_ref());
    let def_wait = duration(p, "defaults", "wait", d.wait.as_ref());
    let def_lease = duration(p, "defaults", "lease", d.lease.as_ref());
    if file.hosts.len() < 2 {
        p.push(problem(
            "mesh",
            "needs at least two [[host]] entries".into(),
        ));
    }
    if file.tests.is_empty() {
        p.push(problem("mesh", "needs at least one [[test]]".into()));
    }
    let mut hosts: Vec<Host> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, h) in file.hosts.iter().enumerate() {
        let at = format!("host {} ({})", i + 1, h.name);
        if !valid_name(&h.name) {
            p.push(problem(
                &at,
                "name must be 1-64 letters, digits, '-', '_' or '.'".into(),
            ));
        }
        if !seen.insert(h.name.clone()) {
            p.push(problem(&at, format!("name {:?} is used twice", h.name)));
        }
        match split_address(&h.address) {
            Ok((host, _)) if host.is_empty() => p.push(problem(&at, "address has no host".into())),
            Ok((host, port)) => hosts.push(Host {
                name: h.name.clone(),
                host,
                port,
                key_file: h.key_file.clone(),
                key_id: h.key_id.clone(),
            }),
            Err(e) => p.push(problem(&at, format!("address {:?}: {e}", h.address))),
        }
    }
    let names: BTreeSet<&str> = file.hosts.iter().map(|h| h.name.as_str()).collect();
    let mut tests = Vec::new();
    let mut test_names = BTreeSet::new();
    for (i, t) in file.tests.iter().enumerate() {
        let at = format!("test {} ({})", i + 1, t.name);
        if !valid_name(&t.name) {
            p.push(problem(
                &at,
                "name must be 1-64 letters, digits, '-', '_' or '.'".into(),
            ));
        }
        if !test_names.insert(t.name.clone()) {
            p.push(problem(&at, format!("name {:?} is used twice", t.name)));
        }
        let interval = duration(p, &at, "interval", t.interval.as_ref())
            .or(def_interval)
            .unwrap_or(DEFAULT_INTERVAL);
        let lease = duration(p, &at, "lease", t.lease.as_ref())
            .or(def_lease)
            .unwrap_or(DEFAULT_LEASE);
        // Half an interval by default: a test still waiting when its next
        // slot comes would only push the next one back.
        let wait = duration(p, &at, "wait", t.wait.as_ref())
            .or(def_wait)
            .unwrap_or(DurationNs::from_ns(interval.ns() / 2));
        if interval < DurationNs::from_secs(1) {
            p.push(problem(&at, format!("interval {interval} is below 1 s")));
        }
        if wait >= interval {
            p.push(problem(
                &at,
                format!("wait {wait} must be shorter than the interval {interval}"),
            ));
        }
        let o = &t.options;
        let options = TestOptions {
            max_rate: rate(p, &at, "options.max_rate", o.max_rate.as_ref()),
            known_capacity: rate(p, &at, "options.known_capacity", o.known_capacity.as_ref()),
            timeout: duration(p, &at, "options.timeout", o.timeout.as_ref()),
        };
        if let Some(to) = options.timeout {
            if to >= lease {
                p.push(problem(
                    &at,
                    format!("options.timeout {to} must be shorter than the lease {lease}"),
                ));
            }
        }
        for s in &t.shared {
            if !valid_name(s) {
                p.push(problem(
                    &at,
                    format!("shared path {s:?}: use letters, digits, '-', '_' or '.'"),
                ));
            }
        }
        let method = t
            .method
            .clone()
            .or_else(|| d.method.clone())
            .unwrap_or_else(|| DEFAULT_METHOD.into());
        let pairs: Vec<(String, String)> = match (&t.between, &t.pairs) {
            (Some(b), None) if b == "all" => file
                .hosts
                .iter()
                .flat_map(|a| {
                    file.hosts
                        .iter()
                        .map(move |b| (a.name.clone(), b.name.clone()))
                })
                .filter(|(a, b)| a != b)
                .collect(),
            (Some(b), None) => {
                p.push(problem(
                    &at,
                    format!("between = {b:?}: the only value is \"all\" (or give pairs)"),
                ));
                continue;
            }
            (None, Some(pairs)) => pairs.iter().map(|[a, b]| (a.clone(), b.clone())).collect(),
            _ => {
                p.push(problem(
                    &at,
                    "give exactly one of between = \"all\" and pairs = [[\"from\", \"to\"], …]"
                        .into(),
                ));
                continue;
            }
        };
        let mut seen_pairs = BTreeSet::new();
        for (a, b) in pairs {
            for n in [&a, &b] {
                if !names.contains(n.as_str()) {
                    p.push(problem(
                        &at,
                        format!("pair {a} -> {b}: no host named {n:?}"),
                    ));
                }
            }
            if a == b {
                p.push(problem(
                    &at,
                    format!("pair {a} -> {b}: a host does not measure itself"),
                ));
            }
            if !seen_pairs.insert((a.clone(), b.clone())) {
                p.push(problem(&at, format!("pair {a} -> {b} is listed twice")));
            }
            if let Some(dest) = hosts.iter().find(|h| h.name == b) {
                tests.push(MeshTest {
                    test: t.name.clone(),
                    source: a,
                    destination: dest.clone(),
                    method: method.clone(),
                    interval,
                    wait,
                    lease,
                    options: options.clone(),
                    shared: t.shared.clone(),
                });
            }
        }
    }
    // A host name and a port may appear once: two names for one server
    // would let two tests take "different" leases on it.
    let mut by_addr: BTreeMap<(String, u16), &str> = BTreeMap::new();
    for h in &hosts {
        if let Some(other) = by_addr.insert((h.host.clone(), h.port), &h.name) {
            p.push(problem(
                &format!("host {}", h.name),
                format!("same address {}:{} as host {other}", h.host, h.port),
            ));
        }
    }
    Mesh { hosts, tests }
}

#[cfg(test)]
#[path = "mesh_tests.rs"]
mod tests;
