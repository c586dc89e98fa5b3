//! RFC 9097's maximum IP-layer capacity test over the UDP Speed Test
//! Protocol (UDPSTP v20, `shared/specs/udp-speed-test-protocol.md`), on real
//! sockets: the client ([`run`]) behind `pathsonde capacity`, and the server
//! ([`UdpstServer`], [`spawn_server`]) that `pathsonde serve` starts on UDP
//! port 24601.  Both interoperate with the reference OB-UDPST.
//!
//! The PDUs are `pathsonde_wire::udpst`'s; the rate table, the load
//! receiver's accounting, the Type B / Type C searches and the summary are
//! `pathsonde_core::capacity`'s.  What lives here: sockets, timers, pacing,
//! HMAC (mode-1 authentication), and the server's admission checks
//! (`docs/capacity.md`, "Server").
//!
//! Layout: [`client`] (one thread per connection, results gathered on the
//! caller's thread; its setup, activation, load and status parts are its
//! children), [`server`] (control socket, one thread per admitted
//! connection), `rx` (the one load-receive loop: the server upstream, the
//! client downstream), `tx` (the two-transmitter load sender and the one
//! load-send loop around it: the client upstream, the server downstream),
//! `pdu` (wire ↔ core conversions and the Status PDU builder), `keys`
//! (KBKDF and HMAC-SHA256 over control PDUs).

pub mod client;
mod keys;
mod pdu;
mod rx;
pub mod server;
mod tx;

pub use client::run;
pub use pathsonde_core::capacity::adjust::Algorithm;
pub use pathsonde_wire::udpst::activation::Direction;
pub use server::{spawn_server, UdpstServer, UdpstServerConfig, UdpstServerHandle};

use pathsonde_core::capacity::summary::CapacityReport;
use pathsonde_core::{BitRate, Bytes, DurationNs};
use std::fmt;
use std::net::SocketAddr;
use std::time::SystemTime;
use thiserror::Error;

/// The longest shared secret the protocol carries (the reference takes 64 characters).
pub const MAX_SECRET_BYTES: usize = 64;

/// A key file's keys as UDPST can use them: UDPST names keys by a number
/// 0–255, so only the keys whose id is such a number and whose secret fits
/// [`MAX_SECRET_BYTES`].  Empty: every UDPST client will be refused.
pub fn numeric_keys(ring: &crate::auth::KeyRing) -> std::collections::BTreeMap<u8, Vec<u8>> {
    ring.keys()
        .iter()
        .filter_map(|k| Some((k.id.parse::<u8>().ok()?, k.secret().to_vec())))
        .filter(|(_, s)| s.len() <= MAX_SECRET_BYTES)
        .collect()
}

/// A shared secret for mode-1 authentication.
#[derive(Clone, PartialEq, Eq)]
pub struct UdpstKey {
    /// Selects the secret on the server (0–255; the reference's `-y`).
    pub key_id: u8,
    /// The secret's bytes (the reference's `-a` string, as bytes, without a NUL).
    pub secret: Vec<u8>,
}

impl fmt::Debug for UdpstKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print a secret, not even in a debug dump.
        write!(
            f,
            "UdpstKey {{ key_id: {}, secret: <{} bytes> }}",
            self.key_id,
            self.secret.len()
        )
    }
}

/// One `pathsonde capacity` test (the reference client's options, by name).
#[derive(Debug, Clone)]
pub struct CapacityConfig {
    /// The server's control address (the CLI supplies port 24601 by default).
    pub server: SocketAddr,
    pub direction: Direction,
    /// Test duration: whole seconds, 5 ..= 3600 (`-t`).
    pub duration: DurationNs,
    /// Type B (default) or C (`-A`).
    pub algorithm: Algorithm,
    /// Connections (UDP flows) sharing one mc_ident, 1 ..= 24 (`-C`).
    pub connections: u8,
    /// Jumbo datagram sizes above 1 Gb/s allowed (default true; `-j` clears it).
    /// Must match the server's setting (else 103).
    pub jumbo: bool,
    /// 1500-byte packets (default false; `-T`).  Must match the server (else 111).
    pub traditional_mtu: bool,
    /// Mode-1 authentication; `None`: unauthenticated.
    pub key: Option<UdpstKey>,
    /// The user's ceiling (`-B`), split evenly over the connections and sent
    /// as each Setup Request's max_bandwidth (Mb/s, rounded up; bit 15 set
    /// for upstream).  A reference server with `-B` reserves it from the
    /// capacity it has free in that direction and refuses a request beyond
    /// what is free (110); a pathsonde server does the same against its
    /// `--max-rate` and also never chooses a row above it for that
    /// connection, so against pathsonde the load never exceeds it.  A
    /// reference server does not cap the search by it.
    pub max_rate: Option<BitRate>,
    /// Sub-interval (RFC 9097's dt), 100 ms ..= 10 s, whole ms (default 1 s; `-P`).
    pub sub_interval: DurationNs,
    /// Status-feedback (trial) interval, 5 ..= 250 ms (default 50 ms; `-F`).
    pub trial_interval: DurationNs,
    /// Use one-way delay variation instead of RTT variation (`-o`).
    pub use_owd: bool,
    /// `-I N`: a fixed sending-rate row (0 ..= 1152).
    pub fixed_row: Option<u16>,
    /// `-I @N`: search starting at this row.
    pub start_row: Option<u16>,
    /// Lower delay-variation threshold (default 30 ms; `-L`).
    pub low_thresh: DurationNs,
    /// Upper delay-variation threshold (default 90 ms; `-U`).
    pub upper_thresh: DurationNs,
    /// Fast-step size in rows (default 10; `-h`).
    pub high_speed_delta: u8,
    /// Congestion count for the back-off / slow mode (default 3; `-c`).
    pub slow_adj_thresh: u16,
    /// Sequence errors per trial interval above which it is BAD (default 10; `-q`).
    pub seq_err_thresh: u16,
    /// Only loss counts as a sequence error (default true; `-R` clears it).
    pub ignore_reorder_dup: bool,
    /// The TOS / traffic-class byte for test packets (default 0; `-m`).
    pub dscp_ecn: u8,
    /// ECN CE threshold (extension; default 0 = off; `-Z`).
    pub ecn_ce_thresh: u8,
    /// Initial sub-intervals with no rate adjustment (extension; default 0; `-i -N`).
    pub suppress_subints: u16,
    /// Ask for random payload content (`-X`; the server may refuse it).
    pub random_payload: bool,
}

impl Default for CapacityConfig {
    fn default() -> Self {
        CapacityConfig {
            server: SocketAddr::from(([127, 0, 0, 1], pathsonde_wire::udpst::DEFAULT_CONTROL_PORT)),
            direction: Direction::Upstream,
            duration: DurationNs::from_secs(10),
            algorithm: Algorithm::B,
            connections: 1,
            jumbo: true,
            traditional_mtu: false,
            key: None,
            max_rate: None,
            sub_interval: DurationNs::from_ms(1000),
            trial_interval: DurationNs::from_ms(50),
            use_owd: false,
            fixed_row: None,
            start_row: None,
            low_thresh: DurationNs::from_ms(30),
            upper_thresh: DurationNs::from_ms(90),
            high_speed_delta: 10,
            slow_adj_thresh: 3,
            seq_err_thresh: 10,
            ignore_reorder_dup: true,
            dscp_ecn: 0,
            ecn_ce_thresh: 0,
            suppress_subints: 0,
            random_payload: false,
        }
    }
}

/// A warning the test finished with (spec §11.4, codes 1–49): 1 server
/// response timeout (a connection's watchdog fired), 2 Status PDUs this
/// client sent were reported lost by the server, 3 Status PDUs from the
/// server arrived with a gap, 4 load / status traffic to this client
/// stopped for 1 s, 5 the server reports its received traffic stopped,
/// 6 an invalid data PDU arrived, 7 ECN bleaching seen here, 8 ECN
/// bleaching reported by the server.  Each code is recorded once per
/// connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpstWarning {
    pub code: u8,
    pub message: String,
}

/// What one run saw; everything the CLI reports, including the
/// reference-JSON (`--format udpst-json`) fields.
#[derive(Debug, Clone)]
pub struct CapacityRun {
    pub config: CapacityConfig,
    /// Connection 0's TA Response, as the server policed it (the values used).
    pub negotiated: pathsonde_wire::udpst::activation::Repr,
    pub mc_ident: u16,
    /// Connection 0's local address.
    pub local: SocketAddr,
    /// Each connection's server test port, by connection index (0 where a
    /// connection never got one).
    pub server_test_ports: Vec<u16>,
    pub started: SystemTime,
    pub ended: SystemTime,
    /// Rows summed over connections; planned = duration / sub-interval.
    pub report: CapacityReport,
    pub warnings: Vec<UdpstWarning>,
    /// 0; the last warning's code; or 200 when a connection was lost
    /// (watchdog) before the server stopped the test.
    pub error_status: u16,
    pub ecn_bleaching: bool,
    /// UDP payload bytes this client sent and received, all PDUs (cost accounting).
    pub bytes_sent: Bytes,
    pub bytes_received: Bytes,
    /// Load datagrams this client sent smaller than their row asked, at
    /// the path MTU's largest payload (jumbo rows on a smaller MTU):
    /// upstream only; 0 otherwise.
    pub datagrams_clamped: u64,
    /// Upstream: the fastest sending-rate row (IP bits/s) the server asked
    /// this client for, summed over its connections.  A maximum well below it with no loss is the
    /// sender's shortfall, not the path's (`None` downstream, where the
    /// server picks and sends the rows).
    pub max_row_requested: Option<BitRate>,
}

impl CapacityRun {
    /// Whether the sending host, not the path, held the maximum (issue 26),
    /// in words: `core::capacity::host::sender_held` on the test's own
    /// figures (upstream: the fastest row the server asked for; a lossless
    /// maximum more than 10 % under it was never sent).  The maximum is then
    /// a lower bound on the path's capacity.
    pub fn sender_held_maximum(&self) -> Option<String> {
        use pathsonde_core::capacity::host::{sender_held, SenderEvidence};
        let s = self.report.summary.as_ref()?;
        if self.config.direction == Direction::Downstream {
            return self.downstream_climb_held();
        }
        let share = sender_held(&SenderEvidence {
            max: s.max_ip_layer_capacity_bps,
            asked: self.max_row_requested,
            loss_count: s.loss_count,
            clamped: self.datagrams_clamped,
            sub_intervals: self.report.sub_intervals.len(),
        })?;
        let (max, asked) = (s.max_ip_layer_capacity_bps, self.max_row_requested?);
        Some(format!(
            "client sender: the server asked for rows up to {asked}, the test lost nothing, yet at most {max} arrived ({:.0} %): the rest was never sent, so the sending host, not the path, set the maximum; the path carries at least {max}",
            share * 100.0
        ))
    }

    /// Downstream the client never sees the rows the server picked; a
    /// search that met no congestion signal (no loss, delay variation under
    /// the lower threshold throughout) and still stopped below the table's
    /// top was held by the server's sender or a ceiling it keeps
    /// (`core::capacity::host::climb_held`).
    fn downstream_climb_held(&self) -> Option<String> {
        use pathsonde_core::capacity::host::{climb_held, ClimbEvidence};
        use pathsonde_core::capacity::rate_table::{ip_rate, RowIndex, TableOptions};
        let s = self.report.summary.as_ref()?;
        let pdv_max: Vec<_> = self
            .report
            .sub_intervals
            .iter()
            .map(|r| r.pdv_max_s)
            .collect();
        let held = climb_held(&ClimbEvidence {
            max: s.max_ip_layer_capacity_bps,
            table_top: ip_rate(
                RowIndex::MAX,
                TableOptions {
                    jumbo: self.config.jumbo,
                    traditional_mtu: self.config.traditional_mtu,
                },
            ),
            searched: self.config.fixed_row.is_none(),
            loss_count: s.loss_count,
            pdv_max: pdv_max.clone(),
            low_thresh: self.config.low_thresh,
            rates: self
                .report
                .sub_intervals
                .iter()
                .map(|r| r.ip_layer_capacity_bps)
                .collect(),
        });
        let worst = pdv_max.iter().flatten().max()?;
        held.then(|| {
            format!(
                "server sender: the test lost nothing and the one-way delay varied at most {:.1} ms (under the search's {:.0} ms threshold), so the server's search met no limit of the path and kept raising its rate, yet at most {} arrived: the server's sender, or a rate ceiling the server keeps, set the maximum; the path carries at least {}",
                worst.ms_f64(),
                self.config.low_thresh.ms_f64(),
                s.max_ip_layer_capacity_bps,
                s.max_ip_layer_capacity_bps
            )
        })
    }
}

/// Why a test could not be run (spec §11.4's ErrorStatus in [`CapacityError::error_status`]).
#[derive(Debug, Error)]
pub enum CapacityError {
    #[error("invalid capacity test configuration: {0}")]
    Config(String),
    #[error("server {server} refused the setup request: {meaning} (code {code})")]
    SetupRejected {
        server: SocketAddr,
        code: u8,
        meaning: &'static str,
    },
    #[error("server {server}'s setup response failed authentication ({why})")]
    SetupResponseAuth {
        server: SocketAddr,
        /// true: the time window; false: the digest (or mode).
        time: bool,
        why: &'static str,
    },
    #[error("server {server} rejected the test activation request (code {code})")]
    ActivationRejected { server: SocketAddr, code: u8 },
    #[error("server {server}'s test activation response failed authentication ({why})")]
    ActivationResponseAuth {
        server: SocketAddr,
        time: bool,
        why: &'static str,
    },
    #[error("timeout awaiting response from {server} ({what})")]
    Timeout {
        server: SocketAddr,
        what: &'static str,
    },
    #[error("no live connection: {0}")]
    ConnectionLost(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Other(String),
}

impl CapacityError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CapacityError::Io {
            context: context.into(),
            source,
        }
    }

    /// The reference client's ErrorStatus for this error (spec §11.4): 50
    /// configuration; 100 + code setup rejections (100 for an unknown code),
    /// 107 / 108 a setup response that fails authentication; 152 activation
    /// rejected (150 unknown code), 157 / 158 its authentication; 200 no
    /// live connection (timeout awaiting a response, or every connection
    /// lost); 255 anything else.
    pub fn error_status(&self) -> u16 {
        match self {
            CapacityError::Config(_) => 50,
            CapacityError::SetupRejected { code, .. } => {
                if (2..=13).contains(code) {
                    100 + u16::from(*code)
                } else {
                    100
                }
            }
            CapacityError::SetupResponseAuth { time, .. } => {
                if *time {
                    108
                } else {
                    107
                }
            }
            CapacityError::ActivationRejected { code, .. } => {
                if *code == 2 {
                    152
                } else {
                    150
                }
            }
            CapacityError::ActivationResponseAuth { time, .. } => {
                if *time {
                    158
                } else {
                    157
                }
            }
            CapacityError::Timeout { .. } | CapacityError::ConnectionLost(_) => 200,
            CapacityError::Io { .. } | CapacityError::Other(_) => 255,
        }
    }
}

/// What a Setup Response code means (for messages).
pub fn setup_code_meaning(code: u8) -> &'static str {
    match code {
        1 => "accepted",
        2 => "protocol version not accepted",
        3 => "jumbo datagram setting does not match the server's",
        4 => "authentication used but none configured on the server",
        5 => "the server requires authentication",
        6 => "invalid authentication mode",
        7 => "authentication failure",
        8 => "authentication time outside the server's window",
        9 => "the server requires a maximum bandwidth",
        10 => "requested bandwidth exceeds what the server has free",
        11 => "traditional MTU setting does not match the server's",
        12 => "invalid multi-connection parameters",
        13 => "the server could not allocate a connection",
        _ => "unknown response code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_status_codes() {
        let s: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let rej = |code| CapacityError::SetupRejected {
            server: s,
            code,
            meaning: setup_code_meaning(code),
        };
        assert_eq!(rej(5).error_status(), 105);
        assert_eq!(rej(7).error_status(), 107);
        assert_eq!(rej(99).error_status(), 100);
        assert_eq!(
            CapacityError::ActivationRejected { server: s, code: 2 }.error_status(),
            152
        );
        assert_eq!(
            CapacityError::ActivationResponseAuth {
                server: s,
                time: true,
                why: "x"
            }
            .error_status(),
            158
        );
        assert_eq!(
            CapacityError::Timeout {
                server: s,
                what: "setup"
            }
            .error_status(),
            200
        );
        assert_eq!(CapacityError::Config("x".into()).error_status(), 50);
    }

    #[test]
    fn key_debug_hides_the_secret() {
        let k = UdpstKey {
            key_id: 7,
            secret: b"testkey123".to_vec(),
        };
        assert!(!format!("{k:?}").contains("testkey"));
    }
}
