use thiserror::Error;

/// Why a piece of bytes could not be decoded.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad magic: not a pathsonde {what}")]
    BadMagic { what: &'static str },
    #[error("unsupported protocol version {got} (this build speaks {ours})")]
    Version { got: u16, ours: u16 },
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLarge { len: usize, max: usize },
    #[error("unknown {what} code {code}")]
    UnknownCode { what: &'static str, code: u8 },
    #[error("malformed control message: {0}")]
    Malformed(String),
    #[error("{what} {value} out of range")]
    OutOfRange { what: &'static str, value: u64 },
}
