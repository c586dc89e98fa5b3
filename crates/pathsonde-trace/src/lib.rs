//! pathsonde-trace: micro-time-scale latency traces.
//!
//! A uniform high-speed packet stream acts as a "network ultrasound probe"
//! (Carson & Santay, *Micro-time-scale network measurements and harmonic
//! effects*): the one-way latency of each packet exposes the clocks and the
//! queue cycles inside the routers and NICs it crosses.  This crate holds
//! everything about such traces that needs no socket:
//!
//! - [`trace`]: the trace itself and its file formats (binary, CSV);
//! - [`analysis`]: distribution, banding (quantum step), periodicity (FFT),
//!   queue cycles and the regime, each with its evidence;
//! - [`model`]: truncated-Fourier models with the inverse-CDF nudge, and the
//!   fast regenerator;
//! - [`oracle`]: a small deterministic router model (a service clock and a
//!   finite queue) whose traces have a *known* band step and cycle period;
//! - [`plot`]: the paper's figures (trace, distribution, spectrum, model vs
//!   original) as PNG and SVG;
//! - [`bench`]: speed figures against a baseline run in the same process;
//! - [`capture`]: a captured train's observation turned into a trace, with
//!   the rates achieved and whether the host drove the load;
//! - [`commands`]: the file work of the `pathsonde trace` commands (model,
//!   generate, plot, synth, two-router), returned as typed values.
//!
//! The sockets of a capture are `pathsonde-net`'s (`pathsonde_net::capture`),
//! the lab it may run across `pathsonde-lab`'s; the CLI joins them.

// Every `unsafe` block says why it is sound (`// SAFETY: ...`); CI denies warnings.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod analysis;
pub mod bench;
pub mod capture;
pub mod commands;
pub mod error;
pub mod fft;
pub mod model;
pub mod oracle;
pub mod plot;
pub mod quantile;
pub mod trace;

pub use error::TraceError;
pub use trace::{Trace, TraceMeta, LOST};
