//! Measurement methods, each a [`crate::Method`].

pub mod burst;
pub mod chirp;
mod common;
pub mod fac2;
pub mod hops;
pub mod igi;
pub mod pair;
pub mod registry;
pub mod sanity;
pub mod search_range;
pub mod slops;
mod slot;
pub mod trust;

#[cfg(test)]
mod testpaths;
