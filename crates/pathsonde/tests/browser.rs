//! The HTML report in a real browser: headless Chromium loads a report made
//! from an archived loopback run and must see no console message (no script
//! error, no blocked fetch) and every plot laid out.  A deliberately broken
//! copy of the page shows that the check can fail.

mod common;

use assert_cmd::cargo::CommandCargoExt;
use pathsonde_net::{Server, ServerConfig};
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;

#[test]
fn the_html_report_loads_in_chromium_without_errors_and_shows_its_plots() {
    let Some(browser) = common::chromium() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("pathsonde-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let archive = dir.join("a.sqlite");
    let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
    cfg.host_report = false;
    let server = Server::bind(cfg).unwrap().spawn().unwrap();
    let ps = || {
        let mut c = Command::cargo_bin("pathsonde").unwrap();
        c.env("PATHSONDE_ARCHIVE", &archive);
        c
    };
    let out = ps()
        .args([
            "abw",
            "127.0.0.1",
            "--port",
            &server.local_addr().port().to_string(),
            "--max-rate",
            "200M",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["archive"]["id"].as_i64().unwrap().to_string();
    server.stop().unwrap();
    let page = dir.join("report.html");
    let out = ps()
        .args(["report", &id, "--html", page.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plots = r["plots"].as_u64().unwrap() as usize;
    assert!(plots >= 2, "{r}");

    common::assert_report_renders(&browser, &page, plots);
    let html = std::fs::read_to_string(&page).unwrap();
    let card = &html[html.find("id=\"headline\"").expect("a headline card")..];
    assert!(
        card.contains("Available bandwidth"),
        "{}",
        &card[..card.len().min(400)]
    );
    assert!(
        card.contains("Round-trip time"),
        "{}",
        &card[..card.len().min(400)]
    );

    // The check can fail: a copy that fetches from outside and has lost one
    // plot's drawing is caught on both counts.
    let html = std::fs::read_to_string(&page).unwrap();
    let start = html.find("<svg").unwrap();
    let end = html[start..].find("</svg>").unwrap() + start + "</svg>".len();
    let broken = format!(
        "{}<img src=\"http://127.0.0.1:9/x.png\">{}",
        &html[..start],
        &html[end..]
    );
    let bad = dir.join("broken.html");
    std::fs::write(&bad, broken).unwrap();
    let seen = common::load(&browser, &bad);
    assert!(
        seen.console
            .iter()
            .any(|l| l.contains("Content Security Policy")),
        "the blocked fetch was not reported: {:?}",
        seen.console
    );
    assert!(
        seen.console.iter().any(|l| l.contains("did not render")),
        "{:?}",
        seen.console
    );
    assert_eq!(
        seen.body_attr("data-plots-drawn"),
        Some((plots - 1).to_string())
    );
    let _ = std::fs::remove_dir_all(&dir);
}
