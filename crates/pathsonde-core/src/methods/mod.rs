//! Measurement methods, each a [`crate::Method`].

pub mod fac2;
