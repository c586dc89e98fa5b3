//! The names of the methods pathsonde builds: one enum, spelt one way in the
//! CLI, the archive and JSON.  A leaf module, so estimates can carry a name
//! without depending on the registry that builds the methods.

/// A method the registry ([`crate::methods::registry::build`]) knows.  The CLI, the archive and JSON spell it by
/// [`MethodName::as_str`] (`fac2`, ...); code names it by this type, so a
/// misspelt name is a compile error or one parse error at the edge, never a
/// lookup that silently finds nothing.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MethodName {
    Fac2,
    Slops,
    Pair,
    Igi,
    Ptr,
    Chirp,
    Burst,
}

impl MethodName {
    /// Every method, in the order reports list them.
    pub const ALL: [MethodName; 7] = [
        MethodName::Fac2,
        MethodName::Slops,
        MethodName::Pair,
        MethodName::Igi,
        MethodName::Ptr,
        MethodName::Chirp,
        MethodName::Burst,
    ];

    /// The name users type and JSON carries.
    pub const fn as_str(self) -> &'static str {
        match self {
            MethodName::Fac2 => "fac2",
            MethodName::Slops => "slops",
            MethodName::Pair => "pair",
            MethodName::Igi => "igi",
            MethodName::Ptr => "ptr",
            MethodName::Chirp => "chirp",
            MethodName::Burst => "burst",
        }
    }

    /// Every name, as users type them (for error messages and help).
    pub fn list() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl std::fmt::Display for MethodName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for MethodName {
    type Err = UnknownMethod;
    fn from_str(s: &str) -> Result<Self, UnknownMethod> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| UnknownMethod {
                name: s.to_string(),
            })
    }
}

impl PartialEq<&str> for MethodName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A name that is no method's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown method '{name}' (known: {})", MethodName::list())]
pub struct UnknownMethod {
    pub name: String,
}
