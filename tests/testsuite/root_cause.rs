//! One root cause, one report (issue 28, item 6): a target whose handshake is broken gives one
//! root-cause line with the count of the cases it blocked, exit 1, and no "correct the
//! known-failures entry" or stale-entry messages for entries whose checks were never reached.

use serde_json::Value;

use crate::common::{EXE, Sandbox, code, text};

/// An SDK directory whose middleware variant is the plain reference testee: it registers no
/// middleware, so every middleware scenario's handshake breaks TP-HANDSHAKE-09. Its baseline
/// names a later step of one of them.
fn broken_middleware_handshake(sb: &Sandbox) -> std::path::PathBuf {
    let dir = sb.dir.path().join("sdk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("protomcp-conform.toml"),
        format!(
            "command = [{EXE:?}, \"testee\"]\nmiddleware_command = [{EXE:?}, \"testee\"]\n\
             features = [\"middleware\", \"hidden\"]\nknown_failures = \"kf.yaml\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("kf.yaml"),
        "middleware.broken-rejects: {requirement: TP-MIDDLEWARE-04, check: step 3, reason: \"broken's panic kills the process\"}\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_broken_handshake_is_one_root_cause_with_a_count_not_a_failure_per_case() {
    let sb = Sandbox::new();
    let sdk = broken_middleware_handshake(&sb);
    let json = sb.dir.path().join("r.json");
    let junit = sb.dir.path().join("r.xml");
    let html = sb.dir.path().join("r.html");
    let only = ["--only", "middleware.*", "--only", "handshake.middleware-registration"];
    let o = sb
        .cmd()
        .arg("--sdk")
        .arg(&sdk)
        .args(only)
        .arg("--json")
        .arg(&json)
        .arg("--junit")
        .arg(&junit)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let blocked: Vec<&Value> = v["cases"].as_array().unwrap().iter().filter(|c| c["verdict"] == "BLOCKED").collect();
    assert!(blocked.len() >= 8, "{v}");
    // One line for the root cause, with the count; no line per blocked case.
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("ROOT CAUSE")).collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(
        lines[0].starts_with(&format!("ROOT CAUSE TP-HANDSHAKE-09 at handshake: blocked {} cases", blocked.len())),
        "{out}"
    );
    assert!(!out.lines().any(|l| l.starts_with("BLOCKED")), "{out}");
    assert!(out.contains(&format!(", {} blocked (", blocked.len())), "{out}");
    // The entry whose check was never reached is neither to correct nor stale.
    assert!(!out.contains("correct the entry") && !out.contains("stale") && !out.contains("XPASS"), "{out}");
    let entry = blocked.iter().find(|c| c["id"] == "middleware.broken-rejects").expect("the listed case is blocked");
    assert_eq!(entry["broken"], serde_json::json!(["TP-HANDSHAKE-09"]), "{entry}");
    assert_eq!(entry["check"], "step 1", "{entry}");
    assert_eq!(entry["root_cause"], "handshake", "{entry}");
    // The scenario about that very handshake requirement fails as itself.
    let own = v["cases"].as_array().unwrap().iter().find(|c| c["id"] == "handshake.middleware-registration").unwrap();
    assert_eq!(own["verdict"], "FAIL", "{own}");
    assert!(out.contains("FAIL  handshake.middleware-registration"), "{out}");
    // The JSON's root causes, the JUnit's one failing root-cause case, the HTML's section.
    let causes = v["root_causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{v}");
    assert_eq!(causes[0]["requirements"], serde_json::json!(["TP-HANDSHAKE-09"]));
    assert_eq!(causes[0]["cases"].as_array().unwrap().len(), blocked.len());
    assert_eq!(v["summary"]["blocked"], blocked.len());
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failing: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase") && n.children().any(|c| c.has_tag_name("failure")))
        .filter_map(|n| n.attribute("name"))
        .collect();
    assert_eq!(
        failing.iter().filter(|n| n.starts_with("root cause")).collect::<Vec<_>>(),
        [&"root cause: TP-HANDSHAKE-09 at handshake"]
    );
    assert!(failing.contains(&"handshake.middleware-registration"), "{failing:?}");
    assert!(!failing.iter().any(|n| blocked.iter().any(|c| c["id"] == *n)), "a blocked case failed: {failing:?}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<section id=\"root-causes\">") && page.contains("Root causes (1)"), "the HTML section");
    // With -v, the blocked cases are listed under their root cause.
    let o = sb.cmd().arg("--sdk").arg(&sdk).args(only).arg("-v").output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("  blocked: middleware.broken-rejects"), "{out}");
    sb.assert_clean();
}

/// A tool process that connected once and never comes back after a restart breaks what the
/// step checks (BR-LIFECYCLE-05, a SHOULD), not the connect precondition: the case is a WARN of
/// its own, no root cause is reported. The bridge's tool command runs the mock only the first time.
#[test]
fn a_tool_process_that_does_not_come_back_breaks_the_restart_not_the_connect() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let once = sb.file("once.sh", "#!/bin/sh\n[ -e \"$1\" ] && exit 1\n: > \"$1\"\nexec \"$2\"\n");
    std::fs::set_permissions(&once, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bridge = format!("{EXE} bridge --call-timeout 3s -- {} {{dir}}/started {{mock}}", once.display());
    let json = sb.dir.path().join("r.json");
    let o = sb
        .cmd()
        .args(["--bridge", &bridge, "--only", "bridge.restart.lists-follow-the-new-process"])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = &v["cases"][0];
    assert_eq!(case["verdict"], "WARN", "{case}");
    assert_eq!(case["broken"], serde_json::json!(["BR-LIFECYCLE-05"]), "{case}");
    assert_eq!(case["check"], "step 9", "{case}");
    assert!(!out.contains("ROOT CAUSE"), "{out}");
    sb.assert_clean();
}
