use thiserror::Error;

#[derive(Debug, Error)]
pub enum LabError {
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("cannot run `{program}`: {source} (is {package} installed?)")]
    Missing {
        program: String,
        package: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("the lab needs root and network namespaces: {0}")]
    NotPermitted(String),
    #[error("bad lab specification: {0}")]
    Spec(String),
    #[error("lab '{0}' does not exist")]
    NoSuchLab(String),
    #[error("lab '{0}' already exists (remove it with `pathsonde lab down {0}`)")]
    Exists(String),
    #[error("the lab cannot do this: {0}")]
    Capability(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Net(#[from] pathsonde_net::NetError),
}

impl LabError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        LabError::Io {
            context: context.into(),
            source,
        }
    }
}

pub type Result<T, E = LabError> = std::result::Result<T, E>;
