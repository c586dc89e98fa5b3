//! Exit codes: one per kind of failure, the same with and without `--json`.
//! Documented in `docs/exit-codes.md`; keep the two in step.

use pathsonde_lab::LabError;
use pathsonde_net::NetError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Anything not covered below (I/O failure on this host, a bug).
    Internal = 1,
    /// Bad command line (clap's own code).
    Usage = 2,
    /// No server: refused, unreachable, name not resolved, connect timeout.
    Connect = 3,
    /// Client and server speak different protocol versions.
    Version = 4,
    /// The server is busy with another measurement (or refused us).
    Busy = 5,
    /// The server stopped answering or closed the connection mid-measurement.
    Timeout = 6,
    /// Whole trains were lost: probes do not get through.
    ProbesLost = 7,
    /// The peer spoke garbage or reported an error.
    Protocol = 8,
    /// The method ended without an answer.
    NoEstimate = 9,
    /// The lab could not be built or run here (not root, a tool missing,
    /// a kernel feature absent, more than the lab can carry).
    Lab = 10,
    /// Authentication failed or is required, or the server's --allow list
    /// refused this address (docs/security.md).
    Auth = 11,
}

impl Exit {
    pub fn of(e: &NetError) -> Exit {
        match e {
            NetError::Connect { .. } | NetError::Resolve { .. } => Exit::Connect,
            NetError::VersionMismatch { .. } => Exit::Version,
            NetError::Busy { .. } => Exit::Busy,
            NetError::Refused { .. } | NetError::Auth(_) => Exit::Auth,
            NetError::Timeout { .. } | NetError::Closed { .. } => Exit::Timeout,
            NetError::ProbesLost { .. } => Exit::ProbesLost,
            NetError::Protocol(_) | NetError::Server(_) | NetError::Limit(_) => Exit::Protocol,
            NetError::NoEstimate(_) => Exit::NoEstimate,
            NetError::Input(_) => Exit::Usage,
            NetError::Io { .. } => Exit::Internal,
        }
    }

    /// Short machine-readable name used in `--json` error objects.
    pub fn kind(self) -> &'static str {
        match self {
            Exit::Internal => "internal",
            Exit::Usage => "usage",
            Exit::Connect => "connect",
            Exit::Version => "version_mismatch",
            Exit::Busy => "busy",
            Exit::Timeout => "timeout",
            Exit::ProbesLost => "probes_lost",
            Exit::Protocol => "protocol",
            Exit::NoEstimate => "no_estimate",
            Exit::Lab => "lab",
            Exit::Auth => "auth",
        }
    }
}

/// A failure with the exit code it maps to: every command returns this, and
/// each library error converts into it here, once.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    pub(crate) message: String,
}

impl From<NetError> for Failure {
    fn from(e: NetError) -> Self {
        Failure {
            exit: Exit::of(&e),
            message: e.to_string(),
        }
    }
}

/// A bad command line, in words.
pub(crate) fn usage(message: String) -> Failure {
    Failure {
        exit: Exit::Usage,
        message,
    }
}

/// A lab error's exit code: a bad spec is the user's, a missing tool or
/// kernel feature the lab's.  A `From` (not a helper in `lab_cmd`) so every
/// command that builds a lab converts with `?` and imports no other command.
impl From<LabError> for Failure {
    fn from(e: LabError) -> Self {
        let exit = match &e {
            LabError::Spec(_) | LabError::Exists(_) | LabError::NoSuchLab(_) => Exit::Usage,
            LabError::Net(n) => Exit::of(n),
            LabError::Io { .. } => Exit::Internal,
            LabError::Command { .. }
            | LabError::Missing { .. }
            | LabError::NotPermitted(_)
            | LabError::Capability(_) => Exit::Lab,
        };
        Failure {
            exit,
            message: e.to_string(),
        }
    }
}
