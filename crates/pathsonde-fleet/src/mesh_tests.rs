//! Unit tests of the mesh file: a good file expands to the right tests,
//! and every kind of bad file gets one clear line per problem.

use super::*;

const GOOD: &str = r#"
[defaults]
interval = "30s"
method = "fac2"

[[host]]
name = "chicago"
address = "10.0.0.1"
key_file = "/etc/pathsonde/fleet.key"

[[host]]
name = "geneva"
address = "10.0.0.2:6000"

[[host]]
name = "tokyo"
address = "[2001:db8::3]:5311"

[[test]]
name = "abw"
between = "all"
shared = ["transatlantic"]
options = { max_rate = "1G", timeout = "3s" }

[[test]]
name = "cap"
method = "slops"
interval = "5min"
pairs = [["chicago", "tokyo"]]
"#;

fn problems(text: &str) -> Vec<String> {
    match Mesh::parse(text, "m.toml") {
        Err(MeshError::Invalid { problems, .. }) => {
            problems.iter().map(|p| p.to_string()).collect()
        }
        other => panic!("expected problems, got {other:?}"),
    }
}

#[test]
fn a_good_file_expands_to_every_pair() {
    let m = Mesh::parse(GOOD, "m.toml").unwrap();
    assert_eq!(m.hosts.len(), 3);
    assert_eq!(m.hosts[1].port, 6000);
    assert_eq!(m.hosts[0].port, DEFAULT_PORT);
    assert_eq!(m.hosts[2].host, "2001:db8::3");
    assert_eq!(m.tests.len(), 6 + 1);
    let mine = m.originated_by("chicago");
    assert_eq!(
        mine.iter().map(|t| t.id()).collect::<Vec<_>>(),
        [
            "abw/chicago->geneva",
            "abw/chicago->tokyo",
            "cap/chicago->tokyo"
        ]
    );
    let abw = &mine[0];
    assert_eq!(abw.interval, DurationNs::from_secs(30));
    assert_eq!(abw.wait, DurationNs::from_secs(15));
    assert_eq!(abw.lease, DurationNs::from_secs(120));
    assert_eq!(abw.method, "fac2");
    assert_eq!(abw.options.max_rate.unwrap().mbps(), 1000.0);
    assert_eq!(abw.resources(), ["path:transatlantic", "server:geneva"]);
    assert_eq!(mine[2].method, "slops");
    assert_eq!(mine[2].interval, DurationNs::from_secs(300));
    assert_eq!(mine[2].resources(), ["server:tokyo"]);
    assert!(m.originated_by("nobody").is_empty());
}

#[test]
fn every_problem_is_one_line() {
    let text = r#"
[[host]]
name = "a"
address = "10.0.0.1:0"
[[host]]
name = "a"
address = "10.0.0.2"
[[test]]
name = "t"
interval = "10"
pairs = [["a", "zz"], ["a", "a"]]
options = { max_rate = "fast" }
"#;
    let p = problems(text);
    let joined = p.join("\n");
    assert!(
        joined.contains("host 1 (a): address \"10.0.0.1:0\": port \"0\""),
        "{joined}"
    );
    assert!(
        joined.contains("host 2 (a): name \"a\" is used twice"),
        "{joined}"
    );
    assert!(joined.contains("test 1 (t): interval: "), "{joined}");
    assert!(joined.contains("no host named \"zz\""), "{joined}");
    assert!(
        joined.contains("a host does not measure itself"),
        "{joined}"
    );
    assert!(joined.contains("options.max_rate"), "{joined}");
    assert!(p.iter().all(|l| !l.contains('\n')), "{joined}");
}

#[test]
fn a_test_names_its_pairs_exactly_one_way() {
    let base =
        "[[host]]\nname = \"a\"\naddress = \"h1\"\n[[host]]\nname = \"b\"\naddress = \"h2\"\n";
    let both =
        format!("{base}[[test]]\nname = \"t\"\nbetween = \"all\"\npairs = [[\"a\", \"b\"]]\n");
    assert!(problems(&both)[0].contains("exactly one of"));
    let neither = format!("{base}[[test]]\nname = \"t\"\n");
    assert!(problems(&neither)[0].contains("exactly one of"));
    let some = format!("{base}[[test]]\nname = \"t\"\nbetween = \"some\"\n");
    assert!(problems(&some)[0].contains("the only value is \"all\""));
    let slow_wait = format!(
        "{base}[[test]]\nname = \"t\"\nbetween = \"all\"\ninterval = \"10s\"\nwait = \"10s\"\n"
    );
    assert!(problems(&slow_wait)[0].contains("wait 10.000 s must be shorter"));
}

#[test]
fn secrets_are_refused_with_where_they_go() {
    let text = "[[host]]\nname = \"a\"\naddress = \"h\"\npassword = \"hunter2\"\n";
    let p = problems(text);
    assert_eq!(p.len(), 1);
    assert!(
        p[0].starts_with("line 4: `password` is refused"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("~/.pgpass") && !p[0].contains("hunter2"));
}

#[test]
fn syntax_and_shape_errors_say_where() {
    match Mesh::parse("[[host]\nname = 1", "m.toml") {
        Err(MeshError::Syntax { message, .. }) => assert!(message.contains("line 1"), "{message}"),
        other => panic!("{other:?}"),
    }
    match Mesh::parse(
        "[[host]]\nname = \"a\"\naddress = \"h\"\nport = 5\n",
        "m.toml",
    ) {
        Err(MeshError::Syntax { message, .. }) => {
            assert!(message.contains("unknown field `port`"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let e = Mesh::load(Path::new("/nonexistent/mesh.toml")).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("mesh file /nonexistent/mesh.toml: "),
        "{e}"
    );
}

#[test]
fn two_names_for_one_server_are_refused() {
    let text = "[[host]]\nname = \"a\"\naddress = \"h:5310\"\n[[host]]\nname = \"b\"\naddress = \"h\"\n[[test]]\nname = \"t\"\nbetween = \"all\"\n";
    assert!(problems(text)[0].contains("same address h:5310 as host a"));
}

/// The example in docs/fleet.md is a mesh file this parser accepts, and
/// means what the page says.
#[test]
fn the_documented_example_parses() {
    let doc = include_str!("../../../docs/fleet.md");
    let start = doc
        .find("# /etc/pathsonde/mesh.toml")
        .expect("the example in docs/fleet.md");
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let m = Mesh::parse(text, "docs/fleet.md").unwrap();
    assert_eq!(m.hosts.len(), 3);
    assert_eq!(m.tests.len(), 6 + 2);
    let t = &m.originated_by("chicago")[0];
    assert_eq!(t.interval, DurationNs::from_secs(30));
    assert_eq!(t.wait, DurationNs::from_secs(15));
    assert_eq!(t.resources(), ["path:transatlantic", "server:geneva"]);
    assert_eq!(m.hosts[2].port, DEFAULT_PORT);
    assert_eq!(
        m.hosts[0].key_file.as_deref(),
        Some(Path::new("/etc/pathsonde/fleet.key"))
    );
}
