//! A minimal HTTP endpoint for Prometheus: `GET /metrics` answers the text
//! exposition format (version 0.0.4), `GET /` a line saying so, anything else
//! 404 or 405.  Hand-written on std because it needs one path and nothing
//! else; bounded so that a bad or slow client costs little: at most
//! `MAX_CONNECTIONS` (8) handled at once (more are answered 503), a request
//! head of at most 8 KiB, 2 s to send it, and no request can make it panic.
//!
//! Here, beside the server it reports on, so that `serve` and the fleet's
//! agent (whose status page is built with [`Exposition`]) share one endpoint.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

const MAX_CONNECTIONS: usize = 8;
const MAX_HEAD: usize = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Renders the current metrics page.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// A running metrics endpoint; [`MetricsServer::stop`] ends it.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    pub fn start(addr: SocketAddr, render: Render) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pathsonde-metrics".into())
            .spawn(move || accept_loop(listener, render, &stop2))?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, render: Render, stop: &AtomicBool) {
    let active = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(_) => {
                // Out of descriptors, a reset before accept: keep serving.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
        let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
        if active.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            active.fetch_sub(1, Ordering::SeqCst);
            let mut s = stream;
            let _ = respond(&mut s, 503, "text/plain", "busy\n", false);
            continue;
        }
        let (render, mine) = (render.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name("pathsonde-metrics-conn".into())
            .spawn(move || {
                let mut s = stream;
                handle(&mut s, &render);
                mine.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            // The closure (and its stream) was dropped unrun: undo the count.
            active.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Reads the request head (up to the blank line) within the bounds.
fn read_head(s: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        if buf.len() >= MAX_HEAD {
            return None;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n.min(MAX_HEAD - buf.len())]),
        }
    }
    String::from_utf8(buf).ok()
}

fn handle(s: &mut TcpStream, render: &Render) {
    let Some(head) = read_head(s) else {
        let _ = respond(s, 400, "text/plain", "bad request\n", false);
        return;
    };
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    let _ = match (method, path) {
        ("GET" | "HEAD", "/metrics") => respond(
            s,
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            &render(),
            head_only,
        ),
        ("GET" | "HEAD", "/") => respond(
            s,
            200,
            "text/plain; charset=utf-8",
            "pathsonde: Prometheus metrics at /metrics\n",
            head_only,
        ),
        ("GET" | "HEAD", _) => respond(s, 404, "text/plain", "not found\n", head_only),
        ("", _) => respond(s, 400, "text/plain", "bad request\n", false),
        _ => respond(s, 405, "text/plain", "method not allowed\n", false),
    };
}

fn respond(
    s: &mut TcpStream,
    code: u16,
    ctype: &str,
    body: &str,
    head_only: bool,
) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !head_only {
        out.push_str(body);
    }
    s.write_all(out.as_bytes())?;
    s.flush()
}

/// Builds a page in the Prometheus text exposition format.
#[derive(Default)]
pub struct Exposition {
    text: String,
}

/// A label value as the format wants it: backslash, quote and newline escaped.
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Exposition {
    /// One metric family: `# HELP`, `# TYPE`, then one sample per label set.
    pub fn family(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: &[(Vec<(&str, String)>, f64)],
    ) {
        let _ = writeln!(self.text, "# HELP {name} {}", help.replace('\n', " "));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        for (labels, v) in samples {
            let value = if v.is_nan() {
                "NaN".to_string()
            } else if v.is_infinite() {
                if *v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
            } else {
                format!("{v}")
            };
            if labels.is_empty() {
                let _ = writeln!(self.text, "{name} {value}");
            } else {
                let l: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", label_value(v)))
                    .collect();
                let _ = writeln!(self.text, "{name}{{{}}} {value}", l.join(","));
            }
        }
    }

    /// One unlabelled sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help, &[(vec![], v)]);
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// The server's counters as a metrics page.
pub fn server_page(
    stats: &crate::ServerStats,
    udpst: Option<&crate::udpst::server::UdpstStats>,
    started: std::time::Instant,
) -> String {
    let s = stats.snapshot();
    let mut e = Exposition::default();
    let c = |e: &mut Exposition, n: &str, h: &str, v: u64| e.single(n, "counter", h, v as f64);
    if let Some(u) = udpst {
        use std::sync::atomic::Ordering::Relaxed;
        for (name, help, v) in [
            (
                "pathsonde_udpst_setups_accepted_total",
                "UDPST Setup Requests accepted (one per connection).",
                &u.setups_accepted,
            ),
            (
                "pathsonde_udpst_setups_rejected_total",
                "UDPST Setup Requests answered with a refusal code.",
                &u.setups_rejected,
            ),
            (
                "pathsonde_udpst_dropped_total",
                "UDPST datagrams dropped without a reply (not allowed, malformed, not a request).",
                &u.dropped,
            ),
            (
                "pathsonde_udpst_tests_completed_total",
                "UDPST test connections that ran to their end.",
                &u.tests_completed,
            ),
            (
                "pathsonde_udpst_sent_bytes_total",
                "UDP payload bytes the UDPST server sent (load and status).",
                &u.bytes_sent,
            ),
            (
                "pathsonde_udpst_received_bytes_total",
                "UDP payload bytes the UDPST server received.",
                &u.bytes_received,
            ),
        ] {
            c(&mut e, name, help, v.load(Relaxed));
        }
    }
    c(
        &mut e,
        "pathsonde_server_connections_total",
        "TCP control connections accepted.",
        s.connections,
    );
    c(
        &mut e,
        "pathsonde_server_busy_refusals_total",
        "Connections told busy because a measurement was running.",
        s.busy_refusals,
    );
    c(
        &mut e,
        "pathsonde_server_version_mismatches_total",
        "Connections whose client spoke another protocol version.",
        s.version_mismatches,
    );
    c(
        &mut e,
        "pathsonde_server_sessions_total",
        "Measurement sessions that passed the handshake.",
        s.sessions,
    );
    e.single(
        "pathsonde_server_sessions_active",
        "gauge",
        "Measurement sessions running now.",
        s.sessions_active as f64,
    );
    c(
        &mut e,
        "pathsonde_server_session_errors_total",
        "Sessions or handshakes that ended in an error.",
        s.session_errors,
    );
    c(
        &mut e,
        "pathsonde_server_trains_total",
        "Probe trains received and reported.",
        s.trains,
    );
    c(
        &mut e,
        "pathsonde_server_probe_packets_total",
        "Probe packets accepted into a train.",
        s.probe_packets,
    );
    c(
        &mut e,
        "pathsonde_server_probe_payload_bytes_total",
        "UDP payload bytes of accepted probes.",
        s.probe_payload_bytes,
    );
    c(
        &mut e,
        "pathsonde_server_probes_rejected_total",
        "Probes dropped as not belonging to the announced train.",
        s.probes_rejected,
    );
    c(
        &mut e,
        "pathsonde_server_probes_duplicate_total",
        "Probes that arrived twice.",
        s.probes_duplicate,
    );
    c(
        &mut e,
        "pathsonde_server_echo_replies_total",
        "Echo requests answered (RTT on the probe path).",
        s.echo_replies,
    );
    e.single(
        "pathsonde_server_uptime_seconds",
        "gauge",
        "Seconds since this server started.",
        started.elapsed().as_secs_f64(),
    );
    e.family(
        "pathsonde_build_info",
        "gauge",
        "Always 1; the version label says which pathsonde.",
        &[(
            vec![("version", env!("CARGO_PKG_VERSION").to_string())],
            1.0,
        )],
    );
    e.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn serves_metrics_and_refuses_the_rest_without_dying() {
        let m = MetricsServer::start(
            "127.0.0.1:0".parse().unwrap(),
            Arc::new(|| {
                let mut e = Exposition::default();
                e.family(
                    "x_total",
                    "counter",
                    "X.",
                    &[(vec![("peer", "a\"b".into())], 2.0)],
                );
                e.finish()
            }),
        )
        .unwrap();
        let a = m.local_addr();
        let r = get(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert!(r.contains("text/plain; version=0.0.4"));
        assert!(r.contains("x_total{peer=\"a\\\"b\"} 2\n"), "{r}");
        assert!(get(a, b"GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(a, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(a, b"\xff\xfe garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        // An endless head is cut off at 8 KiB and refused.
        let big = vec![b'a'; 64 * 1024];
        let mut s = TcpStream::connect(a).unwrap();
        let _ = s.write_all(&big);
        drop(s);
        // A client that says nothing is dropped after the timeout; meanwhile
        // others are served.
        let _idle = TcpStream::connect(a).unwrap();
        assert!(get(a, b"GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200"));
        assert!(get(a, b"GET /metrics HTTP/1.1\r\n\r\n").contains("x_total"));
        m.stop();
    }
}
