//! The methods a `compare` sweep runs, from the user's list: registry
//! names, `capacity` (RFC 9097's test, by name only), `hops` (on a chain
//! only) and `all` (every available-bandwidth method, and `hops` first on a
//! chain), each once, in the order first named.
//!
//! With the sweep's other rules in the lab crate, not the binary, so the
//! binary only parses flags (issue 31).

use pathsonde_core::methods::registry::MethodName;

/// A method list the sweep cannot run (the messages name the flag).
#[derive(Debug, thiserror::Error)]
pub enum MethodsError {
    #[error(
        "--methods: unknown method '{name}' (known: {}, capacity, hops, or all)",
        MethodName::list()
    )]
    Unknown { name: String },
    #[error("--methods names no method")]
    Empty,
}

/// The methods `list` names, `all` expanded (with `hops` first when the
/// sweep runs `on_chain`), duplicates dropped.  `hops` named off a chain is
/// kept: the sweep's own check says what it needs.
pub fn method_names(list: &[String], on_chain: bool) -> Result<Vec<String>, MethodsError> {
    let mut out: Vec<String> = Vec::new();
    for m in list {
        let m = m.trim();
        let add: Vec<String> = if m == "all" {
            let hops = on_chain.then(|| crate::hops_lab::METHOD.to_string());
            hops.into_iter()
                .chain(MethodName::ALL.iter().map(|m| m.to_string()))
                .collect()
        } else if m.parse::<MethodName>().is_ok()
            || m == crate::capacity::METHOD
            || m == crate::hops_lab::METHOD
        {
            vec![m.to_string()]
        } else {
            return Err(MethodsError::Unknown {
                name: m.to_string(),
            });
        };
        for a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    if out.is_empty() {
        return Err(MethodsError::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn all_means_every_registry_method_once() {
        let m = method_names(&names(&["fac2", "all"]), false).unwrap();
        assert_eq!(m.len(), MethodName::ALL.len());
        assert_eq!(m[0], "fac2");
        // `all` is the available-bandwidth methods; capacity is asked for by name.
        assert!(!m.iter().any(|x| x == "capacity" || x == "hops"));
        assert_eq!(
            method_names(&names(&["fac2", "capacity"]), false).unwrap(),
            ["fac2", "capacity"]
        );
        assert!(method_names(&names(&["warp"]), false).is_err());
        assert!(method_names(&[], false).is_err());
        // On a chain `all` starts with hops.
        let m = method_names(&names(&["all"]), true).unwrap();
        assert_eq!(m.len(), MethodName::ALL.len() + 1);
        assert_eq!(m[0], "hops");
        assert_eq!(
            method_names(&names(&["fac2", "hops"]), true).unwrap(),
            ["fac2", "hops"]
        );
    }
}
