//! Measurement methods, each a [`crate::Method`].

mod common;
pub mod fac2;
pub mod igi;
pub mod pair;
pub mod registry;
pub mod slops;

#[cfg(test)]
mod testpaths;
