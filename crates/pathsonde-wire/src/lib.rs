//! pathsonde-wire: what crosses the network between a pathsonde client and server.
//!
//! Two channels (described for people in `docs/protocol.md`):
//! - **control** (TCP): a fixed-layout [`handshake`] that carries the protocol
//!   version, then length-prefixed [`control`] messages encoded with postcard;
//! - **probe** (UDP): fixed-layout [`probe`] headers padded to the requested size.
//!
//! And, for `pathsonde capacity` and `pathsonde serve`, the PDUs of another
//! protocol: [`udpst`], the UDP Speed Test Protocol (RFC 9946, version 20) of
//! RFC 9097's maximum IP-layer capacity test, interoperable with OB-UDPST
//! (`docs/udpst-wire.md`).
//!
//! Every decoder here is bounds-checked and returns [`WireError`]; none panics on
//! any input, which property tests check by feeding arbitrary bytes.

// Nothing here needs `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

pub mod control;
pub mod error;
pub mod flow;
pub mod handshake;
pub mod probe;
pub mod udpst;

pub use error::WireError;

/// The protocol version this build speaks.  Bumped on any incompatible change
/// to the handshake, the control messages or the probe header.
///
/// 2: the session opens with `HostReportRequest` → `HostReport` (a protocol-1
/// server would end the session on the unknown message, so the version says
/// it up front instead).
pub const PROTOCOL_VERSION: u16 = 2;
