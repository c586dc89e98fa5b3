//! pathsonde-lab: emulated paths on one Linux box, with ground truth.
//!
//! Network namespaces joined by veth pairs, a real kernel qdisc (tbf) as the
//! bottleneck, pathsonde's own cross-traffic generators, a user-space delay
//! line, and a sampler that records what crossed the bottleneck, so every
//! estimate can be set beside the truth over its own time window.  Methods
//! run through the real client (pathsonde-net); estimates are scored with
//! core's `accuracy`.  The lab must not leave a namespace, qdisc or `ip rule`
//! behind, nor tell a method its truth.

// Every `unsafe` block says why it is sound (`// SAFETY: ...`); CI denies warnings.
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod capacity;
pub mod chain;
pub mod compare;
pub mod compare_methods;
pub mod cross;
pub mod delay;
pub mod error;
pub mod exclusive;
pub mod hops_lab;
pub mod live;
pub mod netns;
pub mod registry;
pub mod run;
pub mod standing;
pub mod topology;
pub mod trace_capture;
pub mod truth;

pub use error::{LabError, Result};
