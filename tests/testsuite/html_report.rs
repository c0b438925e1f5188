//! The HTML report (`--html FILE`) of a real run, loaded in a real headless browser (Debian's
//! `chromium`): the rendered DOM shows the run's counts, the filter script ran, and a screenshot
//! is taken (under the cargo target dir, never committed). Without a chromium binary the test
//! says so and passes without checking (PROTOMCP_CONFORM_CHROMIUM names another binary), but
//! not in CI (CI=true), where .ci/run installs it: there a missing browser fails the test.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{EXE, Sandbox, code, text, wrong_rid_run};

/// The browser, or `None` after saying why `what` is skipped; in CI a missing browser panics.
pub(crate) fn chromium_or_skip(what: &str) -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
        assert!(!ci, "no chromium binary found, and CI is set: .ci/run installs Debian's chromium");
        eprintln!(
            "SKIPPED {what}: no chromium binary found (install Debian's `chromium`, or set PROTOMCP_CONFORM_CHROMIUM)"
        );
    }
    found
}

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PROTOMCP_CONFORM_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// The page after its scripts ran, as `--dump-dom` prints it; a screenshot to `png`.
fn render(browser: &Path, url: &str, png: &Path, profile: &Path) -> String {
    render_sized(browser, url, png, profile, (1280, 2400))
}

/// [`render`] in a window of `size` (width, height) pixels.
pub(crate) fn render_sized(browser: &Path, url: &str, png: &Path, profile: &Path, size: (u32, u32)) -> String {
    let o = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}: {}", browser.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The number in the summary row of `target` under `verdict`, as the DOM shows it.
fn count(dom: &str, target: &str, verdict: &str) -> u64 {
    let row = dom.find(&format!("data-target=\"{target}\"")).unwrap_or_else(|| panic!("no row {target}: {dom}"));
    let cell = format!("data-verdict=\"{verdict}\">");
    let at = row + dom[row..].find(&cell).unwrap() + cell.len();
    dom[at..dom[at..].find('<').unwrap() + at].parse().unwrap()
}

#[test]
fn the_html_report_of_a_run_shows_its_counts_in_a_headless_browser() {
    let Some(browser) = chromium_or_skip("the HTML report's rendering") else { return };
    let sb = Sandbox::new();
    let html = sb.dir.path().join("report.html");
    // A testee that answers under the wrong request id: FAIL, WARN and PASS; the bridge scenario
    // is skipped.
    let testee = format!("{EXE} testee --misbehave wrong-rid");
    let (o, report) =
        wrong_rid_run(&sb, &["calls.*", "bridge.mcp.ping-before-initialize"], &["--html".as_ref(), html.as_ref()]);
    assert_eq!(code(&o), 1, "{}", text(&o));
    let file = std::fs::read_to_string(&html).unwrap();
    let failing_rows = file.lines().filter(|l| l.starts_with("<tr id=\"req-") && l.contains("FAIL")).count();
    let all_rows = file.lines().filter(|l| l.starts_with("<tr id=\"req-")).count();
    assert!(failing_rows > 0 && failing_rows < all_rows, "{failing_rows} of {all_rows}");

    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-report");
    std::fs::create_dir_all(&out).unwrap();
    let png = out.join("report.png");
    let _ = std::fs::remove_file(&png);
    let url = format!("file://{}#verdict=FAIL", html.display());
    let dom = render(&browser, &url, &png, &sb.dir.path().join("profile"));

    // The counts of the run, as rendered.
    let summary = &report["summary"];
    for (key, verdict) in [("pass", "PASS"), ("fail", "FAIL"), ("warn", "WARN"), ("skip", "SKIP"), ("error", "ERROR")] {
        assert_eq!(count(&dom, &testee, verdict), summary[key].as_u64().unwrap(), "{verdict}");
    }
    assert!(summary["fail"].as_u64().unwrap() > 0 && summary["warn"].as_u64().unwrap() > 0, "{summary}");
    let line = format!(
        "FAILED: {} pass, {} fail, {} warn, {} skip",
        summary["pass"], summary["fail"], summary["warn"], summary["skip"]
    );
    assert!(dom.contains(&line), "{line} not in {dom}");
    // The script ran: the filter from the address shows only the failing requirements.
    let shown = format!("showing {failing_rows} of {all_rows} requirements");
    assert!(dom.contains(&shown), "{shown} not in the rendered page");
    // Every scenario not passing is there with its location.
    for case in report["cases"].as_array().unwrap().iter().filter(|c| c["verdict"] == "FAIL") {
        let id = case["id"].as_str().unwrap();
        assert!(dom.contains(&format!("id=\"case-{id}\"")), "{id}");
    }
    assert!(dom.contains("<code class=\"location\">scenarios/calls/"), "no file:line:col");
    let shot = std::fs::read(&png).unwrap();
    assert!(shot.starts_with(b"\x89PNG") && shot.len() > 10_000, "screenshot of {} bytes", shot.len());
    eprintln!("screenshot: {}", png.display());
    sb.assert_clean();
}
