//! `lab up --hops …` as root: a standing chain of two routers (tight link 2
//! at 60 % Poisson, narrow link 3 idle at 60 Mb/s) that any program can be
//! run across from the sender's namespace.  `lab up --json` names the
//! routers and `hops`' target; `lab truth --json` gives every link each
//! 100 ms from the chain's own counters; FAC² run across it from the sender
//! reads the narrow link's capacity; `lab down` removes every
//! namespace and the state directory.  Bad chains are refused in one line
//! with exit 2 before anything is built.  Skipped with a message when not
//! root; under CI that is a failure.

use pathsonde_lab::exclusive::is_root;
use pathsonde_lab::netns::of_lab as namespaces_of;
use serde_json::Value;
use std::process::Command;

fn pathsonde() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pathsonde"))
}

/// A standing chain, taken down on drop (also when an assertion fails),
/// which then checks that nothing was left.
struct Standing(String);

impl Drop for Standing {
    fn drop(&mut self) {
        let _ = pathsonde().args(["lab", "down", &self.0]).output();
        let left = namespaces_of(&self.0);
        let state = std::path::Path::new("/run/pathsonde/labs").join(&self.0);
        assert!(
            (left.is_empty() && !state.exists()) || std::thread::panicking(),
            "left behind: {left:?}, state {}",
            state.exists()
        );
    }
}

fn json_of(out: &std::process::Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn lab_up_leaves_a_chain_standing_with_per_link_truth() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let name = format!("hu{}", std::process::id() % 100_000);
    let out = pathsonde()
        .args(["lab", "up", "--name", &name, "--hops", "2"])
        .args(["--tight-at", "2", "--narrow-at", "3", "--json"])
        .output()
        .expect("running pathsonde lab up");
    let lab = Standing(name.clone());
    let info = json_of(&out, "lab up");
    let chain = &info["chain"];
    assert_eq!(
        chain["routers"],
        serde_json::json!(["198.19.1.2", "198.19.2.2"]),
        "{info}"
    );
    assert_eq!(chain["target"], "198.19.3.2:33434");
    assert_eq!(chain["plan"]["tight_at"], 2);
    assert_eq!(
        info["namespaces"][0]["namespace"],
        format!("pathsonde-{name}-snd")
    );
    // Three links: four nodes, the cross source and sink.
    assert_eq!(namespaces_of(&name).len(), 6, "{:?}", namespaces_of(&name));

    // Across it from the sender: FAC² against the receiver's server.
    let out = Command::new("ip")
        .args(["netns", "exec", &format!("pathsonde-{name}-snd")])
        .arg(env!("CARGO_BIN_EXE_pathsonde"))
        .args(["abw", "198.19.3.2", "--json", "--no-save"])
        .output()
        .expect("running pathsonde abw in the sender");
    let abw = json_of(&out, "abw across the chain");

    let truth = json_of(
        &pathsonde()
            .args(["lab", "truth", &name, "--json"])
            .output()
            .expect("running pathsonde lab truth"),
        "lab truth",
    );
    let lines = truth["truth"].as_array().expect("truth lines");
    assert!(lines.len() >= 5, "{} lines", lines.len());
    let link = |j: usize, key: &str| -> Vec<f64> {
        lines
            .iter()
            .filter_map(|l| l["links"][j - 1][key].as_f64())
            .collect()
    };
    assert!(lines
        .iter()
        .all(|l| l["links"][0]["capacity_l2_bps"].is_null()));
    let cross = median(link(2, "cross_l2_bps")) / 1e6;
    assert!((50.0..70.0).contains(&cross), "tight link's cross {cross}");
    let a = median(link(2, "available_ip_bps")) / 1e6;
    assert!((27.0..47.0).contains(&a), "tight link's A {a}");
    assert!(link(3, "cross_l2_bps").iter().all(|&x| x == 0.0));
    assert!((median(link(3, "capacity_l2_bps")) - 60e6).abs() < 1.0);
    assert!(
        median(link(2, "qdisc_l2_bps")) / 1e6 > 40.0,
        "the tbf's own counters"
    );

    // Across the chain FAC² meets both shaped links: its capacity reading is
    // the narrow link's (60 Mb/s tbf, 58.4 at the IP layer; 59.4-61.7 in 8
    // runs at the commit that added this test), which only a live chain with
    // its shapers in place gives.  Its A is not asserted: with an idle
    // narrow link after the tight one, 1 of those 8 runs gave a band of
    // 50.0-59.5 Mb/s for an A of 38 (docs/lab.md).
    let c = abw["capacity_bps"].as_f64().expect("a capacity reading") / 1e6;
    assert!(
        (0.85 * 58.4..1.2 * 58.4).contains(&c),
        "capacity {c} Mb/s across the chain"
    );
    assert!(abw["probe_bytes"].as_u64().unwrap_or(0) > 0);
    drop(lab);
}

/// The tight link on the sender's own interface (link 1: a 100 Mb/s tbf on
/// the sender carrying 60 Mb/s of traffic it forwards): the trains queue in
/// the sender's own egress queue, and their driver stamps already carry that
/// spread.  Read from them, FAC² called the sender unable to pace and gave
/// "A ≥ 53-63 Mb/s" for an A of 38 in 4 of 4 runs; from the queue-entry
/// stamps (`pacer::egress`) it reads the path, says why, and no run may give
/// a bound above the truth or a band that misses it by more than 25 %.
#[test]
fn a_shaped_sender_interface_is_read_as_the_path_not_as_the_host() {
    if !is_root() {
        pathsonde_lab::exclusive::cannot_run("the lab needs root");
        return;
    }
    let _lock = pathsonde_lab::exclusive::lab_lock().expect("taking the lab lock");
    let name = format!("he{}", std::process::id() % 100_000);
    let out = pathsonde()
        .args([
            "lab",
            "up",
            "--name",
            &name,
            "--hops",
            "1",
            "--tight-at",
            "1",
        ])
        .args(["--json"])
        .output()
        .expect("running pathsonde lab up");
    let lab = Standing(name.clone());
    json_of(&out, "lab up");
    let mut estimates = Vec::new();
    for _ in 0..3 {
        let out = Command::new("ip")
            .args(["netns", "exec", &format!("pathsonde-{name}-snd")])
            .arg(env!("CARGO_BIN_EXE_pathsonde"))
            .args(["abw", "198.19.2.2", "--json", "--no-save"])
            .output()
            .expect("running pathsonde abw in the sender");
        estimates.push(json_of(&out, "abw from behind a shaped interface"));
    }
    let truth = json_of(
        &pathsonde()
            .args(["lab", "truth", &name, "--json"])
            .output()
            .expect("running pathsonde lab truth"),
        "lab truth",
    );
    let a = median(
        truth["truth"]
            .as_array()
            .expect("truth lines")
            .iter()
            .filter_map(|l| l["links"][0]["available_ip_bps"].as_f64())
            .collect(),
    ) / 1e6;
    assert!((27.0..47.0).contains(&a), "A {a}");
    let mut read = Vec::new();
    for e in &estimates {
        let est = e["available_bps"].as_f64().unwrap_or(f64::NAN) / 1e6;
        if e["available_is_host_limit"] == true {
            assert!(
                est <= a * 1.02,
                "a host-limited bound {est} above the truth {a}: {e}"
            );
            continue;
        }
        read.push(est);
        let notes = e["notes"].to_string();
        assert!(notes.contains("egress queue held"), "{notes}");
    }
    assert!(!read.is_empty(), "no run read the path: {estimates:?}");
    let m = median(read.clone());
    assert!(
        (0.75 * a..1.25 * a).contains(&m),
        "FAC² read {read:?} Mb/s behind the shaped interface, truth {a}"
    );
    drop(lab);
}

#[test]
fn bad_chains_for_lab_up_exit_2_in_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--hops", "3"],
            "needs --hops N (routers) and --tight-at K",
        ),
        (&["--hops", "3", "--tight-at", "5"], "--tight-at 5"),
        (
            &["--hops", "3", "--tight-at", "2", "--end-to-end"],
            "--end-to-end go with lab run",
        ),
        (
            &["--hops", "3", "--tight-at", "2", "--mtu", "9000"],
            "--mtu",
        ),
    ];
    for (args, want) in cases {
        let name = format!("hb{}", std::process::id() % 100_000);
        let out = pathsonde()
            .args(["lab", "up", "--name", &name])
            .args(*args)
            .output()
            .expect("running pathsonde");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(namespaces_of(&name).is_empty());
        assert!(!std::path::Path::new("/run/pathsonde/labs")
            .join(&name)
            .exists());
    }
}
