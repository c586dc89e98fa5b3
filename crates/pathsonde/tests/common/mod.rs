//! Helpers shared by the report tests: a headless Chromium that loads a page
//! and says what the browser saw.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium on PATH, or `None`.  Under CI (`CI` set) a missing browser is a
/// failure, not a skip: `.ci/run` installs Debian's `chromium`.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    if std::env::var_os("CI").is_some() {
        panic!("no chromium on PATH under CI: .ci/run should have installed it");
    }
    eprintln!("skipped: no chromium on PATH (apt-get install chromium)");
    None
}

/// What the browser saw of a page.
pub struct Loaded {
    /// The DOM after scripts ran.
    pub dom: String,
    /// Every console message (errors, warnings, CSP violations, uncaught
    /// exceptions: Chromium logs them all as `CONSOLE` lines).
    pub console: Vec<String>,
}

impl Loaded {
    /// An attribute of `<body>`, e.g. `data-plots-drawn`.
    pub fn body_attr(&self, name: &str) -> Option<String> {
        let start = self.dom.find("<body")?;
        let tag = &self.dom[start..start + self.dom[start..].find('>')?];
        let at = tag.find(&format!("{name}=\""))? + name.len() + 2;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    }
}

/// Loads `page` in headless Chromium and returns the DOM after scripts ran
/// and the console messages.
pub fn load(browser: &Path, page: &Path) -> Loaded {
    let profile = std::env::temp_dir().join(format!(
        "pathsonde-chromium-{}-{}",
        std::process::id(),
        page.file_stem().and_then(|s| s.to_str()).unwrap_or("page")
    ));
    let _ = std::fs::remove_dir_all(&profile);
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let out_path = profile.with_extension("out");
    let err_path = profile.with_extension("err");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish loading {url} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let dom = std::fs::read_to_string(&out_path).unwrap_or_default();
    let err = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(&out_path);
    let _ = std::fs::remove_file(&err_path);
    assert!(status.success(), "chromium exited {status}: {err}");
    assert!(
        dom.contains("</html>"),
        "no DOM from chromium; stderr: {err}"
    );
    Loaded {
        dom,
        console: err
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}

/// The page loaded with no console message at all, and every plot it
/// carries was laid out by the browser with a non-empty box.
pub fn assert_report_renders(browser: &Path, page: &Path, want_plots: usize) {
    let seen = load(browser, page);
    assert!(
        seen.console.is_empty(),
        "console messages while loading {}: {:#?}",
        page.display(),
        seen.console
    );
    let plots = seen.body_attr("data-plots").expect("data-plots on <body>");
    let drawn = seen
        .body_attr("data-plots-drawn")
        .expect("the page's script did not run (no data-plots-drawn)");
    assert_eq!(plots, want_plots.to_string());
    assert_eq!(drawn, plots, "plots drawn by the browser");
    // The headline card is laid out in the first screenful.
    assert_eq!(
        seen.body_attr("data-headline").as_deref(),
        Some("visible"),
        "the headline card is not visible"
    );
    assert!(seen.dom.matches("<svg").count() >= want_plots);
}
