//! Measurement methods, each a [`crate::Method`].

pub mod fac2;
pub mod registry;
