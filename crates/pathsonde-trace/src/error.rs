//! Errors of the trace library: every one says what was wrong with which input.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TraceError {
    /// The input is not a trace (or model) this version can read.
    #[error("{what}: {why}")]
    Format { what: String, why: String },
    /// The input is readable but unusable for the request (too short, all lost…).
    #[error("{0}")]
    Unusable(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("plotting {what}: {why}")]
    Plot { what: String, why: String },
    /// A file to read whole is larger than any input of its kind.
    #[error("{} is larger than {max} bytes", path.display())]
    TooLarge { path: std::path::PathBuf, max: u64 },
}

impl TraceError {
    pub fn format(what: impl Into<String>, why: impl Into<String>) -> Self {
        TraceError::Format {
            what: what.into(),
            why: why.into(),
        }
    }
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TraceError::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, TraceError>;
