//! Records the commit the binary is built from, for `pathsonde -V`: the
//! short hash, with `+dirty` when the tree had uncommitted changes, or
//! `unknown` outside a git checkout (a source tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    let commit = if dirty {
        format!("{commit}+dirty")
    } else {
        commit
    };
    println!("cargo:rustc-env=PATHSONDE_COMMIT={commit}");
    // Rebuild the stamp when HEAD or the index moves.
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
}
