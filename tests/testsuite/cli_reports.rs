//! `diff` and `merge` on the JSON reports of real runs, and `--shard K/N`: a known failure
//! removed is exactly one scenario newly broken (exit 1); three shards merged are the
//! unsharded run (cases, verdicts, summary, exit status); a whole report merged alone writes
//! the run's own JUnit and HTML bytes; bad input is exit 2 with its place.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{EXE, Sandbox, code, text};

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The report with what differs from run to run taken out: times, resource figures, the
/// scenario's temp dir in the command line, the target's stderr (what the reference bridge
/// logs after the session ends depends on timing).
fn masked(mut v: Value) -> Value {
    for c in v["cases"].as_array_mut().unwrap() {
        let c = c.as_object_mut().unwrap();
        for k in ["duration_ms", "started_ms", "resources", "command", "stderr_tail"] {
            c.remove(k);
        }
    }
    v
}

#[test]
fn a_known_failure_removed_is_the_one_change_diff_shows_and_it_exits_1() {
    let sb = Sandbox::new();
    let wrong = format!("{EXE} testee --misbehave wrong-rid");
    let run = |name: &str, kf: &str| -> PathBuf {
        let kf = sb.file(&format!("{name}.yaml"), kf);
        let out = sb.dir.path().join(format!("{name}.json"));
        let o = sb
            .cmd()
            .args(["--testee", &wrong, "--only", "calls.echo", "--only", "calls.add", "--known-failures"])
            .arg(&kf)
            .arg("--json")
            .arg(&out)
            .output()
            .unwrap();
        assert!(out.is_file(), "{}", text(&o));
        out
    };
    let old = run(
        "old",
        "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\ncalls.add: {requirement: [TP-CALL-01, TP-CALL-02, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\n",
    );
    let new = run(
        "new",
        "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\n",
    );
    let o = sb.cmd().arg("diff").arg(&old).arg(&new).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let changed: Vec<&str> = out.lines().filter(|l| l.starts_with("WORSE ") || l.starts_with("      ")).collect();
    // The scenario, and the three requirements its failing step broke: XFAIL → FAIL, broken
    // before and after (so not newly broken).
    let broke = "(TP-CALL-01, TP-CALL-02, TP-CALL-03)";
    assert_eq!(changed.len(), 4, "{out}");
    assert!(changed[0].starts_with(&format!("WORSE newly broken  calls.add: XFAIL {broke} → FAIL {broke}: ")), "{out}");
    for (line, req) in changed[1..].iter().zip(["TP-CALL-01", "TP-CALL-02", "TP-CALL-03"]) {
        assert_eq!(*line, format!("      requirement {req}: XFAIL (broken) → FAIL (broken)"), "{out}");
    }
    assert!(out.contains("scenarios: 1 newly broken\n"), "{out}");
    assert!(out.ends_with("WORSE: something got worse\n"), "{out}");
    // The same as JSON, and as markdown into a file.
    let o = sb.cmd().arg("diff").arg(&old).arg(&new).args(["--format", "json"]).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    let scenarios = d["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 1, "{d:#}");
    assert_eq!(scenarios[0]["id"], "calls.add");
    assert_eq!(scenarios[0]["change"], "newly_broken");
    assert_eq!((&scenarios[0]["old"]["verdict"], &scenarios[0]["new"]["verdict"]), (&"XFAIL".into(), &"FAIL".into()));
    assert!(d["requirements"].as_array().unwrap().iter().all(|r| r["worse"] == false), "{d:#}");
    let md = sb.dir.path().join("diff.md");
    let o = sb.cmd().arg("diff").arg(&old).arg(&new).args(["--format", "markdown", "--out"]).arg(&md).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.starts_with("## protomcp-conform diff: something got worse\n"), "{md}");
    assert!(md.contains(&format!("| ❌ | newly broken | `calls.add` | XFAIL {broke} | FAIL {broke} |")), "{md}");
    // The other way round nothing got worse; a report against itself changed nothing.
    let o = sb.cmd().arg("diff").arg(&new).arg(&old).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("      changed       calls.add: FAIL"), "{}", text(&o));
    let o = sb.cmd().arg("diff").arg(&old).arg(&old).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("scenarios: no scenario changed"), "{}", text(&o));
    // A report cut short: exit 2, the file and the place.
    let cut = sb.file("cut.json", &std::fs::read_to_string(&old).unwrap()[..200]);
    let o = sb.cmd().arg("diff").arg(&old).arg(&cut).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with(&format!("protomcp-conform: {}:", cut.display())), "{err}");
    assert!(err.contains("EOF while parsing"), "{err}");
    let o = sb.cmd().arg("diff").arg(&old).arg(sb.dir.path().join("none.json")).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn three_shards_merged_are_the_unsharded_run() {
    let sb = Sandbox::new();
    // Both sides of the default run; a stale known failure makes one XPASS (exit 1), a case
    // shown in detail with its transcript.
    let kf = sb.file("kf.yaml", "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: stale}\n");
    let select = ["--only", "calls.*", "--only", "bridge.mcp.ping*"];
    let dir = sb.dir.path();
    let whole = sb
        .cmd()
        .args(select)
        .arg("--known-failures")
        .arg(&kf)
        .arg("--json")
        .arg(dir.join("whole.json"))
        .arg("--junit")
        .arg(dir.join("whole.xml"))
        .arg("--html")
        .arg(dir.join("whole.html"))
        .output()
        .unwrap();
    assert_eq!(code(&whole), 1, "{}", text(&whole));
    let mut shards = Vec::new();
    for k in 1..=3 {
        let p = dir.join(format!("shard{k}.json"));
        let o = sb
            .cmd()
            .args(select)
            .arg("--known-failures")
            .arg(&kf)
            .args(["--shard", &format!("{k}/3"), "--json"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(matches!(code(&o), 0 | 1), "{}", text(&o));
        let r = json(&p);
        assert_eq!(
            r["shard"],
            serde_json::json!({"k": k, "n": 3, "selected": json(&dir.join("whole.json"))["cases"].as_array().unwrap().len()})
        );
        assert!(!r["cases"].as_array().unwrap().is_empty(), "shard {k} is empty");
        shards.push(p);
    }
    let o = sb
        .cmd()
        .arg("merge")
        .args(&shards)
        .arg("--json")
        .arg(dir.join("merged.json"))
        .arg("--junit")
        .arg(dir.join("merged.xml"))
        .arg("--html")
        .arg(dir.join("merged.html"))
        .output()
        .unwrap();
    assert_eq!(code(&o), code(&whole), "the whole run's exit status: {}", text(&o));
    let (w, m) = (json(&dir.join("whole.json")), json(&dir.join("merged.json")));
    assert_eq!(m["summary"], w["summary"]);
    assert_eq!(m["sides"], w["sides"]);
    let (m, w) = (masked(m), masked(w));
    assert_eq!(m["cases"].as_array().unwrap().len(), w["cases"].as_array().unwrap().len());
    for (a, b) in m["cases"].as_array().unwrap().iter().zip(w["cases"].as_array().unwrap()) {
        assert_eq!(a, b);
    }
    assert_eq!(m, w);
    assert!(std::fs::read_to_string(dir.join("merged.html")).unwrap().contains("XPASS"));
    // A whole report merged alone writes the run's own JUnit and HTML, byte for byte.
    let o = sb
        .cmd()
        .arg("merge")
        .arg(dir.join("whole.json"))
        .arg("--junit")
        .arg(dir.join("again.xml"))
        .arg("--html")
        .arg(dir.join("again.html"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    for (a, b) in [("whole.xml", "again.xml"), ("whole.html", "again.html")] {
        assert!(std::fs::read(dir.join(a)).unwrap() == std::fs::read(dir.join(b)).unwrap(), "{a} and {b} differ");
    }
    // Shards of another run, a missing shard, a shard twice: refused.
    let other = sb.dir.path().join("other.json");
    let o = sb
        .cmd()
        .args(["--testee", &format!("{EXE} testee"), "--only", "calls.echo", "--shard", "2/3", "--json"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let refused = |args: &[&PathBuf], why: &str| {
        let o = sb.cmd().arg("merge").args(args).output().unwrap();
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{why}: {}", text(&o));
    };
    refused(&[&shards[0], &other, &shards[2]], "is a run against reference testee + reference bridge (stdio)");
    refused(&[&shards[0], &shards[1]], "shard 3/3 missing: give all 3 shards");
    refused(&[&shards[0], &shards[1], &shards[1]], "are both shard 2/3");
    sb.assert_clean();
}

#[test]
fn a_shard_that_is_not_k_of_n_is_a_usage_error() {
    for bad in ["0/3", "4/3", "3", "x/2"] {
        let o = std::process::Command::new(EXE).args(["--shard", bad]).output().unwrap();
        assert_eq!(code(&o), 2, "{bad}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("--shard <K/N>"), "{bad}: {}", text(&o));
    }
}
