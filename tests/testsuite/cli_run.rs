//! `protomcp-conform` runs: the examples against the bundled testee, reports, exit codes,
//! known failures, hostile testees torn down without leftovers, and SIGINT.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_protomcp-conform");

/// The examples of scenarios/README.md.
const EXAMPLES: [&str; 5] = [
    "calls/echo.yaml",
    "framing/unknown-fields.yaml",
    "framing/oversize-prefix.yaml",
    "conn/socket-unset.yaml",
    "concurrency/pipelined.yaml",
];

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

use crate::common::{Sandbox, code, text};

fn with_examples(c: &mut Command) -> &mut Command {
    for f in EXAMPLES {
        c.arg("--scenarios").arg(scenarios_dir().join(f));
    }
    c
}

fn scenario(id: &str, level: &str, testee: &str, steps: &str) -> String {
    format!(
        "id: {id}\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: {level}\nrole: tool-process\n{testee}steps:\n{steps}"
    )
}

#[test]
fn examples_pass_against_the_bundled_testee_with_reports() {
    let sb = Sandbox::new();
    let json = sb.dir.path().join("r.json");
    let junit = sb.dir.path().join("r.xml");
    let o = with_examples(&mut sb.cmd()).arg("--json").arg(&json).arg("--junit").arg(&junit).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("PASS  calls.echo"), "{out}");
    assert!(out.contains("OK: 5 pass"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["target"], "reference testee");
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5);
    for (key, name) in [("pass", "PASS"), ("fail", "FAIL"), ("warn", "WARN"), ("skip", "SKIP"), ("xfail", "XFAIL")] {
        let n = cases.iter().filter(|c| c["verdict"] == name).count();
        assert_eq!(v["summary"][key].as_u64().unwrap() as usize, n, "{key}");
    }
    assert_eq!(v["summary"]["pass"], 5);
    let echo = cases.iter().find(|c| c["id"] == "calls.echo").unwrap();
    assert_eq!(echo["level"], "MUST");
    assert!(echo["requirements"].as_array().unwrap().iter().any(|r| r == "TP-CALL-01"));
    assert!(echo["duration_ms"].is_u64());
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let n = doc.descendants().filter(|n| n.has_tag_name("testcase")).count();
    assert_eq!(n, 5);
    sb.assert_clean();
}

#[test]
fn the_default_catalogue_is_embedded_and_listed() {
    // `list` works outside the repository: the catalogue is in the binary.
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(EXE).arg("list").current_dir(dir.path()).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("calls.echo\t")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("\tMUST\t") && line.contains("TP-CALL-01"), "{line}");
    let o = Command::new(EXE).args(["explain", "calls.echo"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("TP-CALL-01 [MUST]"), "{out}");
    assert!(out.contains("--only calls.echo"), "{out}");
    assert!(out.contains("handshake"), "{out}");
    // A requirement ID (a SARIF rule's help names this command): its text and the scenarios.
    let o = Command::new(EXE).args(["explain", "TP-CALL-01"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("TP-CALL-01 [MUST]"), "{out}");
    assert!(out.contains("\n  calls.echo [MUST] "), "{out}");
    let o = Command::new(EXE).args(["explain", "TP-NOPE-99"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
}

#[test]
fn a_typo_in_a_scenario_exits_2_with_its_place() {
    let sb = Sandbox::new();
    let f = sb.file(
        "typo.yaml",
        "id: calls.typo\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nstepz: []\n",
    );
    let o = sb.cmd().arg("--scenarios").arg(&f).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{}:6:1", f.display())), "{err}");
}

#[test]
fn an_empty_selection_exits_3() {
    let sb = Sandbox::new();
    let o = with_examples(&mut sb.cmd()).args(["--only", "no.such.*"]).output().unwrap();
    assert_eq!(code(&o), 3, "{}", text(&o));
}

#[test]
fn known_failures_turn_fail_into_xfail_and_stale_entries_into_xpass() {
    let sb = Sandbox::new();
    let wrong = format!("{EXE} testee --misbehave wrong-rid");
    let echo = scenarios_dir().join("calls/echo.yaml");
    let unset = scenarios_dir().join("conn/socket-unset.yaml");
    // Without a known-failures file: a FAIL, exit 1, with the details.
    let o = sb.cmd().args(["--testee", &wrong]).arg("--scenarios").arg(&echo).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FAIL  calls.echo"), "{out}");
    assert!(out.contains("re-run: protomcp-conform --testee"), "{out}");
    assert!(out.contains("transcript"), "{out}");
    assert!(out.contains("echo.yaml:"), "{out}");
    // Listed: XFAIL, exit 0.
    let kf = sb.file(
        "kf.yaml",
        "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\n",
    );
    let o = sb
        .cmd()
        .args(["--testee", &wrong])
        .arg("--scenarios")
        .arg(&echo)
        .arg("--known-failures")
        .arg(&kf)
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("XFAIL calls.echo"), "{}", text(&o));
    // A listed scenario that passes: XPASS, exit 1.
    let kf = sb.file(
        "kf2.yaml",
        "calls.echo: {requirement: [TP-CALL-01, TP-CALL-03], check: step 3, reason: answers under the wrong rid}\n\
         conn.socket-unset: {requirement: TP-CONN-02, check: step 1, reason: stale}\n",
    );
    let o = sb
        .cmd()
        .args(["--testee", &wrong])
        .arg("--scenarios")
        .arg(&echo)
        .arg("--scenarios")
        .arg(&unset)
        .arg("--known-failures")
        .arg(&kf)
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("XPASS conn.socket-unset"), "{}", text(&o));
    sb.assert_clean();
}

/// Runs one hostile scenario; returns (exit code, stdout, elapsed).
fn hostile(sb: &Sandbox, name: &str, yaml: &str) -> (i32, String, Duration) {
    let f = sb.file(&format!("{name}.yaml"), yaml);
    let t = Instant::now();
    let o = sb.cmd().arg("--scenarios").arg(&f).output().unwrap();
    (code(&o), text(&o), t.elapsed())
}

#[test]
fn hostile_testees_end_within_their_deadlines_and_leave_nothing_behind() {
    let sb = Sandbox::new();
    let hs = "  - handshake: {within_ms: 500}\n";
    let cases: [(&str, &str, &str, i32, &str, u64); 5] = [
        ("never", "never-connect", "  - expect_no_connect: {for_ms: 300}\n", 0, "PASS", 6),
        ("silent", "silent", hs, 1, "BLOCKED", 6),
        ("huge", "huge-prefix", hs, 1, "FAIL", 6),
        ("sigterm", "ignore-sigterm", "  - handshake: {}\n  - expect_alive: {}\n", 0, "PASS", 8),
        ("grandchild", "grandchild", "  - handshake: {}\n  - expect_alive: {}\n", 0, "PASS", 8),
    ];
    for (name, mode, steps, want, verdict, secs) in cases {
        let id = format!("calls.hostile-{name}");
        let y = scenario(&id, "MUST", &format!("testee: {{misbehave: {mode}}}\n"), steps);
        let (c, out, took) = hostile(&sb, name, &y);
        assert_eq!(c, want, "{mode}: {out}");
        if verdict == "BLOCKED" {
            // A handshake that breaks is the root cause, reported once; the case is not reached.
            assert!(out.contains("ROOT CAUSE TP-HANDSHAKE-") && out.contains("1 blocked"), "{mode}: {out}");
        } else {
            assert!(out.contains(&format!("{verdict:<5} {id}")), "{mode}: {out}");
        }
        assert!(took < Duration::from_secs(secs), "{mode} took {took:?}");
        sb.assert_clean();
    }
}

#[test]
fn a_scenario_over_its_budget_is_an_error() {
    let sb = Sandbox::new();
    let y = scenario("calls.budget", "MUST", "timeout_ms: 300\n", "  - sleep: {ms: 5000}\n");
    let (c, out, took) = hostile(&sb, "budget", &y);
    assert_eq!(c, 3, "{out}");
    assert!(out.contains("ERROR calls.budget"), "{out}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    sb.assert_clean();
}

/// `exclusive: true` runs alone: with `-j 3`, two plain scenarios of 700 ms run side by side and
/// the exclusive one after them, so the run cannot take less than 1.4 s (without the key: 0.7 s).
#[test]
fn an_exclusive_scenario_runs_alone() {
    let sb = Sandbox::new();
    let a = sb.file("a.yaml", &scenario("calls.a", "MUST", "", "  - sleep: {ms: 700}\n"));
    let b = sb.file("b.yaml", &scenario("calls.b", "MUST", "", "  - sleep: {ms: 700}\n"));
    let x = sb.file("x.yaml", &scenario("calls.x", "MUST", "exclusive: true\n", "  - sleep: {ms: 700}\n"));
    let started = Instant::now();
    let mut c = sb.cmd();
    for f in [&a, &x, &b] {
        c.arg("--scenarios").arg(f);
    }
    let o = c.args(["-j", "3"]).output().unwrap();
    let took = started.elapsed();
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(t.contains("PASS  calls.x"), "{t}");
    assert!(took >= Duration::from_millis(1400), "the exclusive scenario ran beside the others: {took:?}\n{t}");
    sb.assert_clean();
}

#[test]
fn sigint_kills_every_testee_and_removes_every_temp_dir() {
    let sb = Sandbox::new();
    let mut args = Vec::new();
    for i in 0..2 {
        let y = scenario(&format!("calls.long-{i}"), "MUST", "", "  - handshake: {}\n  - sleep: {ms: 30000}\n");
        args.push(sb.file(&format!("long{i}.yaml"), &y));
    }
    let mut c = sb.cmd();
    for a in &args {
        c.arg("--scenarios").arg(a);
    }
    let mut child = c.args(["-j", "2"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while (sb.temp_dirs_left().len() < 2 || sb.leftovers().len() < 3) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(sb.temp_dirs_left().len(), 2);
    assert!(protomcp_harness::os::signal_process(child.id() as i32, libc::SIGINT));
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "no exit after SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(status.code(), Some(130), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted"), "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn an_sdk_manifest_is_read() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("sdk");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("protomcp-conform.toml"),
        format!("command = [{EXE:?}, \"testee\"]\nfeatures = [\"hidden\"]\nknown_failures = \"kf.yaml\"\n"),
    )
    .unwrap();
    std::fs::write(dir.join("kf.yaml"), "").unwrap();
    let mw = sb.file(
        "mw.yaml",
        &scenario("calls.mw", "MUST", "testee: {middleware: true}\n", "  - handshake: {}\n")
            .replace("role: tool-process\n", "role: tool-process\nneeds: [middleware]\n"),
    );
    let o = with_examples(&mut sb.cmd()).arg("--sdk").arg(&dir).arg("--scenarios").arg(&mw).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("PASS  calls.echo"), "{out}");
    assert!(out.contains("SKIP  calls.mw"), "{out}");
    assert!(!Path::new(&sb.root()).join("x").exists());
    sb.assert_clean();
}

#[test]
fn a_manifest_builds_first_runs_in_its_dir_and_skips_with_its_reasons() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("sdk");
    std::fs::create_dir_all(&dir).unwrap();
    // The build writes a script next to the manifest; the command names it relative to that dir,
    // so it only starts when the build ran and the testee runs with the manifest's dir as cwd.
    let script = dir.join("run.sh.in");
    std::fs::write(&script, format!("#!/bin/sh\nexec {EXE} testee \"$@\"\n")).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let manifest = "build = [\"cp\", \"run.sh.in\", \"run.sh\"]\ncommand = [\"sh\", \"run.sh\"]\nfeatures = [\"hidden\"]\n\
                    unsupported = { middleware = \"no protocol middleware in this API\" }\n\
                    skip = { \"calls.add\" = \"cannot add\" }\n";
    std::fs::write(dir.join("protomcp-conform.toml"), manifest).unwrap();
    let mw = sb.file(
        "mw.yaml",
        &scenario("calls.mw", "MUST", "testee: {middleware: true}\n", "  - handshake: {}\n")
            .replace("role: tool-process\n", "role: tool-process\nneeds: [middleware]\n"),
    );
    let add = sb.file("add.yaml", &scenario("calls.add", "MUST", "", "  - handshake: {}\n"));
    let ok =
        sb.file("ok.yaml", &scenario("calls.ok", "MUST", "", "  - handshake: {hidden: []}\n  - expect_alive: {}\n"));
    let o = sb
        .cmd()
        .args(["--sdk".as_ref(), dir.as_os_str()])
        .args(["--scenarios".as_ref(), mw.as_os_str(), "--scenarios".as_ref(), add.as_os_str()])
        .args(["--scenarios".as_ref(), ok.as_os_str()])
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(code(&o), 0, "{out}");
    assert!(out.contains("PASS  calls.ok"), "{out}");
    assert!(dir.join("run.sh").exists(), "the build did not run: {out}");
    assert!(out.contains("SKIP  calls.mw") && out.contains("no protocol middleware in this API"), "{out}");
    assert!(out.contains("SKIP  calls.add") && out.contains("cannot add"), "{out}");

    // A failing build stops the run with status 3 and shows the command's output.
    std::fs::write(
        dir.join("protomcp-conform.toml"),
        "build = [\"sh\", \"-c\", \"echo compiler says no; exit 7\"]\ncommand = [\"./run.sh\"]\n",
    )
    .unwrap();
    let o = sb.cmd().arg("--sdk").arg(&dir).arg("--scenarios").arg(&add).output().unwrap();
    assert_eq!(code(&o), 3, "{}", text(&o));
    assert!(text(&o).contains("compiler says no"), "{}", text(&o));
    sb.assert_clean();
}

#[test]
fn a_testee_group_that_ignores_sigterm_is_killed_after_the_grace() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    // SIGTERM ignored by the testee and by its child (which inherits the disposition).
    let script = sb.file("stubborn.sh", "#!/bin/sh\ntrap '' TERM\nsleep 300 &\nwhile :; do sleep 1; done\n");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let y = scenario("calls.stubborn", "MUST", "", "  - expect_no_connect: {for_ms: 100}\n");
    let f = sb.file("stubborn.yaml", &y);
    let t = Instant::now();
    let o = sb.cmd().arg("--testee").arg(&script).arg("--scenarios").arg(&f).output().unwrap();
    let took = t.elapsed();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(took >= Duration::from_secs(2), "SIGKILL before the grace: {took:?}");
    assert!(took < Duration::from_secs(6), "{took:?}");
    sb.assert_clean();
}

#[test]
fn socket_modes_and_extra_environment_reach_the_testee() {
    let sb = Sandbox::new();
    let mut c = sb.cmd();
    for mode in ["unset", "empty", "missing", "not_a_socket", "refused"] {
        let y = scenario(
            &format!("conn.mode-{}", mode.replace('_', "-")),
            "MUST",
            &format!("testee: {{socket: {mode}}}\n"),
            "  - expect_exit: {within_ms: T_START, code: nonzero, stderr: {regex: '\\S'}}\n  - expect_no_connect: {for_ms: 50}\n",
        )
        .replace("TP-CALL-01", "TP-CONN-02");
        c.arg("--scenarios").arg(sb.file(&format!("{mode}.yaml"), &y));
    }
    // A threshold of 100 bytes moves a 200-byte result to the sideband.
    let y = scenario(
        "calls.env-threshold",
        "MUST",
        "testee: {env: {PROTOMCP_CHUNK_THRESHOLD: 100, PROTOMCP_COMPRESS_THRESHOLD: 100000}}\n",
        "  - handshake: {}\n  - send: {request_id: b, call_tool: {name: big, arguments_json: {n: 200}}}\n  - expect: {envelope: {request_id: b, via: sideband, sideband: {envelope_rid: ''}}}\n  - send: {request_id: s, call_tool: {name: stream_big, arguments_json: {n: 200}}}\n  - expect: {envelope: {request_id: s, via: stream, call_result: {result_json: {not_empty: true}}}}\n",
    );
    c.arg("--scenarios").arg(sb.file("env.yaml", &y));
    let o = c.arg("--transcripts").arg(sb.dir.path().join("tr")).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("OK: 6 pass"), "{}", text(&o));
    // The transcript shows the sideband header, the payload's summary and the stream.
    let t = std::fs::read_to_string(sb.dir.path().join("tr/calls.env-threshold.txt")).unwrap();
    assert!(t.contains("  # sideband header"), "{t}");
    assert!(t.contains(r#""sideband":{"compression":"","envelope_rid":"","field_name":"result_json","size":"#), "{t}");
    assert!(t.contains(r#""via":"sideband"}"#) && t.contains(r#""via":"stream"}"#), "{t}");
    assert!(t.contains("  # stream end"), "{t}");
    let unset = std::fs::read_to_string(sb.dir.path().join("tr/conn.mode-unset.txt")).unwrap();
    assert_eq!(unset, "== step 1: expect_exit\n-- testee exit status 2\n== step 2: expect_no_connect\n");
    sb.assert_clean();
}

#[test]
fn transcripts_are_written_normalized_one_file_per_scenario() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("transcripts");
    let o = with_examples(&mut sb.cmd()).arg("--transcripts").arg(&dir).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "calls.echo.txt",
            "concurrency.pipelined-opaque-rids.txt",
            "conn.socket-unset.txt",
            "framing.oversize-prefix.txt",
            "framing.unknown-fields-and-arms.txt"
        ]
    );
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    let echo = read("calls.echo.txt");
    let lines: Vec<&str> = echo.lines().collect();
    assert_eq!(lines[0], "== step 1: handshake", "{echo}");
    assert!(lines.contains(&"-- connected"), "{echo}");
    assert!(lines.contains(&r#"harness→testee {"list_tools":{},"request_id":"[ID:1]"}"#), "{echo}");
    assert!(
        echo.contains(r#"testee→harness {"request_id":"[ID:2]","call_result":"#)
            || echo.contains(r#""request_id":"[ID:2]"}"#),
        "{echo}"
    );
    assert!(!echo.contains("req-0") && !echo.contains("\"c1\""), "rids not renamed: {echo}");
    // Bytes written by hand are shown as hex.
    let over = read("framing.oversize-prefix.txt");
    assert!(over.contains("harness→testee raw: 00 a0 00 01  # frame: prefix 10485761, 0 body bytes"), "{over}");
    assert!(over.contains("testee→harness end of file"), "{over}");
    assert!(over.contains("-- testee exit status"), "{over}");
    // No temp path, no rid of the scenario file.
    let pipe = read("concurrency.pipelined-opaque-rids.txt");
    assert!(!pipe.contains("🦀") && pipe.contains("[ID:4]"), "{pipe}");
    for n in &names {
        let t = read(n);
        assert!(!t.contains(&sb.root().display().to_string()) && !t.contains("/tmp/"), "{n}: {t}");
    }
    // Deterministic: a second run writes the same text.
    let dir2 = sb.dir.path().join("again");
    let o = with_examples(&mut sb.cmd()).arg("--transcripts").arg(&dir2).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    for n in &names {
        assert_eq!(read(n), std::fs::read_to_string(dir2.join(n)).unwrap(), "{n}");
    }
    sb.assert_clean();
}

#[test]
fn more_hostile_testees_get_their_verdicts_within_their_deadlines() {
    let sb = Sandbox::new();
    let hs = "  - handshake: {within_ms: 500}\n";
    let call = "  - handshake: {}\n  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: c1, call_result: {}}}\n  - expect_nothing: {for_ms: 300}\n";
    let slow = "  - handshake: {}\n  - send: {request_id: s1, call_tool: {name: slow, arguments_json: {steps: 3}}}\n  - expect: {within_ms: 1000, envelope: {request_id: s1, call_result: {}}}\n";
    let crash_exit = "  - handshake: {}\n  - send: {request_id: s1, call_tool: {name: slow, arguments_json: {steps: 3}}}\n  - expect_close: {}\n  - expect_exit: {code: 3}\n";
    let flood = "  - handshake: {}\n  - expect_nothing: {for_ms: 300}\n";
    let cases: [(&str, &str, &str, i32, &str, u64); 6] = [
        ("garbage", "garbage", hs, 1, "FAIL", 6),
        ("drip", "drip", hs, 1, "BLOCKED", 6),
        ("twice", "answer-twice", call, 1, "FAIL", 6),
        ("crash", "crash-mid-call", slow, 1, "FAIL", 6),
        ("crash-exit", "crash-mid-call", crash_exit, 0, "PASS", 6),
        ("flood", "flood", flood, 1, "FAIL", 8),
    ];
    for (name, mode, steps, want, verdict, secs) in cases {
        let id = format!("calls.hostile-{name}");
        let y = scenario(&id, "MUST", &format!("testee: {{misbehave: {mode}}}\n"), steps);
        let (c, out, took) = hostile(&sb, name, &y);
        assert_eq!(c, want, "{mode}: {out}");
        if verdict == "BLOCKED" {
            // A handshake that breaks is the root cause, reported once; the case is not reached.
            assert!(out.contains("ROOT CAUSE TP-HANDSHAKE-") && out.contains("1 blocked"), "{mode}: {out}");
        } else {
            assert!(out.contains(&format!("{verdict:<5} {id}")), "{mode}: {out}");
        }
        assert!(took < Duration::from_secs(secs), "{mode} took {took:?}");
        sb.assert_clean();
    }
}

#[test]
fn a_known_failure_naming_another_requirement_than_the_step_that_broke_fails_the_run() {
    let sb = Sandbox::new();
    let wrong = format!("{EXE} testee --misbehave wrong-rid");
    // The call's answer arrives under the wrong rid: the expect step checks TP-CALL-01 only.
    let s = sb.file(
        "s.yaml",
        "id: x.wrong-rid\ntitle: t\nrequirements: [TP-CALL-01, TP-CALL-03]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - send: {request_id: c1, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: c1, arm: call_result}}\n    checks: [TP-CALL-01]\n",
    );
    let run = |kf: &str| {
        let kf = sb.file("kf.yaml", kf);
        let json = sb.dir.path().join("r.json");
        let o = sb
            .cmd()
            .args(["--testee", &wrong, "--known-failures"])
            .arg(&kf)
            .arg("--scenarios")
            .arg(&s)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        (o, v)
    };
    let (o, v) = run("x.wrong-rid: {requirement: TP-CALL-01, check: step 3, reason: answers under another rid}\n");
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(v["cases"][0]["verdict"], "XFAIL", "{v}");
    assert_eq!(v["cases"][0]["broken"], serde_json::json!(["TP-CALL-01"]), "{v}");
    assert_eq!(v["cases"][0]["check"], "step 3", "{v}");
    assert_eq!(v["cases"][0]["requirements"], serde_json::json!(["TP-CALL-01", "TP-CALL-03"]), "{v}");
    let (o, v) = run("x.wrong-rid: {requirement: TP-CALL-03, check: step 3, reason: answers under another rid}\n");
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(v["cases"][0]["verdict"], "FAIL", "{v}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("entry at step 3 names TP-CALL-03 but the run broke TP-CALL-01"), "{out}");
    // The right requirement at another check: a new failure of a known-failing scenario.
    let (o, v) = run("x.wrong-rid: {requirement: TP-CALL-01, check: step 2, reason: answers under another rid}\n");
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert_eq!(v["cases"][0]["verdict"], "FAIL", "{v}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("new failure in a known-failing scenario: step 3 broke TP-CALL-01"), "{out}");
    // The plain string form (no requirement, no check) is refused where it stands.
    let kf = sb.file("kf.yaml", "x.wrong-rid: answers under another rid\n");
    let o =
        sb.cmd().args(["--testee", &wrong, "--known-failures"]).arg(&kf).arg("--scenarios").arg(&s).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("kf.yaml:1:14: x.wrong-rid: expected an entry, found string"), "{}", text(&o));
    // A step the scenario does not have is refused too.
    let kf = sb.file("kf.yaml", "x.wrong-rid: {requirement: TP-CALL-01, check: step 9, reason: r}\n");
    let o =
        sb.cmd().args(["--testee", &wrong, "--known-failures"]).arg(&kf).arg("--scenarios").arg(&s).output().unwrap();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("kf.yaml:1:14: x.wrong-rid: step 9, but the scenario has 3 steps"), "{}", text(&o));
    // A requirement that does not exist is refused at load time.
    let (o, _) = {
        let kf = sb.file("kf.yaml", "x.wrong-rid: {requirement: TP-NOPE-01, check: step 3, reason: r}\n");
        let o = sb
            .cmd()
            .args(["--testee", &wrong, "--known-failures"])
            .arg(&kf)
            .arg("--scenarios")
            .arg(&s)
            .output()
            .unwrap();
        (o, ())
    };
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("TP-NOPE-01"), "{}", text(&o));
}

#[test]
fn a_scenario_whose_repeated_runs_disagree_is_flaky_and_fails_the_run() {
    let sb = Sandbox::new();
    // A testee that serves on every other start and exits at once otherwise.
    let counter = sb.dir.path().join("starts");
    let script = sb.file(
        "flip.sh",
        &format!(
            "#!/bin/sh\nn=$(cat '{c}' 2>/dev/null || echo 0)\necho $((n + 1)) > '{c}'\n[ $((n % 2)) -eq 0 ] && exec {EXE} testee\nexit 7\n",
            c = counter.display()
        ),
    );
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let json = sb.dir.path().join("r.json");
    let o = sb
        .cmd()
        .args(["--testee", &script.display().to_string(), "--repeat", "2", "-j", "1", "--json"])
        .arg(&json)
        .arg("--scenarios")
        .arg(scenarios_dir().join("calls/echo.yaml"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("FLAKY calls.echo"), "{out}");
    // The second run's testee never connects: that run is not reached (BLOCKED), the first passed.
    assert!(out.contains("run 1: PASS") && out.contains("run 2: BLOCKED"), "{out}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cases"][0]["verdict"], "FLAKY", "{v}");
    assert_eq!(v["cases"][0]["runs"].as_array().map(Vec::len), Some(2), "{v}");
    assert_eq!(v["summary"]["flaky"], 1, "{v}");
    // The same testee serving every time: the runs agree.
    let o = sb
        .cmd()
        .args(["--testee", &format!("{EXE} testee"), "--repeat", "3", "--scenarios"])
        .arg(scenarios_dir().join("calls/echo.yaml"))
        .output()
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("PASS  calls.echo"), "{}", text(&o));
}

#[test]
fn a_write_to_a_peer_that_is_gone_is_judged_by_the_next_step_that_reads() {
    let sb = Sandbox::new();
    let crash = format!("{EXE} testee --misbehave crash-mid-call");
    // slow makes the testee exit; the sends after it may or may not fail with EPIPE, depending on
    // when the end reaches the harness. The verdict must not depend on that: the expect is judged
    // (TP-CALL-01), never the sends (which claim TP-CALL-03 to show a misattribution).
    let s = sb.file(
        "s.yaml",
        "id: x.gone\ntitle: t\nrequirements: [TP-CALL-01, TP-CALL-03]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - send: {request_id: s1, call_tool: {name: slow, arguments_json: {steps: 1}}}\n  - sleep: {ms: 200}\n  - send: {request_id: e1, call_tool: {name: echo, arguments_json: {text: a}}}\n    checks: [TP-CALL-03]\n  - send: {request_id: e2, call_tool: {name: echo, arguments_json: {text: b}}}\n    checks: [TP-CALL-03]\n  - expect: {envelope: {request_id: e1, arm: call_result}}\n    checks: [TP-CALL-01]\n",
    );
    let json = sb.dir.path().join("r.json");
    let o = sb
        .cmd()
        .args(["--testee", &crash, "--repeat", "3", "--json"])
        .arg(&json)
        .arg("--scenarios")
        .arg(&s)
        .output()
        .unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cases"][0]["verdict"], "FAIL", "{v}");
    assert_eq!(v["cases"][0]["broken"], serde_json::json!(["TP-CALL-01"]), "{v}");
    // A scenario that ends with the lost write is judged at that write.
    let s2 = sb.file(
        "s2.yaml",
        "id: x.gone-last\ntitle: t\nrequirements: [TP-CALL-01]\nlevel: MUST\nrole: tool-process\nsteps:\n  - handshake: {}\n  - send: {request_id: s1, call_tool: {name: slow, arguments_json: {steps: 1}}}\n  - sleep: {ms: 200}\n  - send: {request_id: e1, call_tool: {name: echo, arguments_json: {text: a}}}\n  - send: {request_id: e2, call_tool: {name: echo, arguments_json: {text: b}}}\n  - send: {request_id: e3, call_tool: {name: echo, arguments_json: {text: c}}}\n",
    );
    let o = sb.cmd().args(["--testee", &crash]).arg("--scenarios").arg(&s2).output().unwrap();
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("writing to the peer failed"), "{}", text(&o));
}

#[test]
fn the_default_run_drives_both_sides_with_a_summary_each_a_total_and_the_worst_exit_status() {
    let sb = Sandbox::new();
    let json = sb.dir.path().join("r.json");
    let junit = sb.dir.path().join("r.xml");
    let only = ["--only", "calls.echo", "--only", "bridge.mcp.ping-before-initialize", "--only", "bridge.http.*"];
    let o = sb.cmd().args(only).arg("--json").arg(&json).arg("--junit").arg(&junit).output().unwrap();
    let out = text(&o);
    assert_eq!(code(&o), 0, "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("== tool-process side: the TP catalogue: 1 scenarios against the reference testee"),
        "{out}"
    );
    assert!(stdout.contains("== bridge side: the BR catalogue:"), "{out}");
    assert!(stdout.contains("PASS  calls.echo") && stdout.contains("PASS  bridge.mcp.ping-before-initialize"), "{out}");
    assert!(stdout.contains("(1 scenarios, target: reference testee)"), "{out}");
    assert!(stdout.contains("target: reference bridge (stdio))"), "{out}");
    // The HTTP-only scenarios are skipped over stdio: one line with their count, not one each.
    let skips: Vec<&str> = stdout.lines().filter(|l| l.starts_with("SKIP")).collect();
    assert_eq!(skips.len(), 1, "{out}");
    assert!(skips[0].contains(" scenarios: ") && !skips[0].contains("(0 ms)"), "{out}");
    let total =
        stdout.lines().find(|l| l.starts_with("TOTAL OK: 2 pass, 0 fail, 0 warn, ")).unwrap_or_else(|| panic!("{out}"));
    assert!(total.ends_with("targets: reference testee, reference bridge (stdio))"), "{total}");
    // JSON: every case names its target, one summary per side and the total; JUnit: a suite per side.
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["sides"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["summary"]["pass"], 2, "{v}");
    let echo = v["cases"].as_array().unwrap().iter().find(|c| c["id"] == "calls.echo").unwrap();
    assert_eq!(echo["target"], "reference testee");
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let suites: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("testsuite")).filter_map(|n| n.attribute("name")).collect();
    assert_eq!(suites, ["reference testee", "reference bridge (stdio)"]);
    // --verbose prints a line for each skipped scenario.
    let o = sb.cmd().args(only).arg("--verbose").output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.lines().filter(|l| l.starts_with("SKIP  bridge.http.")).count() > 1, "{stdout}");
    // A stale known failure on the bridge side fails the whole run (XPASS; or FAIL should the
    // scenario fail on a loaded machine: the entry names a requirement it does not check), the
    // TP side being clean.
    let kf = sb.file(
        "kf.yaml",
        "bridge.mcp.ping-before-initialize: {requirement: TP-CALL-01, check: step 3, reason: stale}\n",
    );
    let o = sb.cmd().args(only).arg("--known-failures").arg(&kf).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(stdout.contains("\nOK: 1 pass") && stdout.contains("\nFAILED: 0 pass, "), "{stdout}");
    assert!(stdout.contains("TOTAL FAILED: 1 pass"), "{stdout}");
    sb.assert_clean();
}

/// The default run's two sides run in one schedule (the longest first over both), yet print one
/// after the other: a bridge scenario that ends long before the TP side's has its line after the
/// TP side's report; an exclusive scenario of one side runs with nothing of the other beside it.
#[test]
fn the_default_runs_sides_run_together_and_print_one_after_the_other() {
    let sb = Sandbox::new();
    let tp = sb.file("tp.yaml", &scenario("calls.slow", "MUST", "", "  - sleep: {ms: 1500}\n"));
    let br = sb.file(
        "br.yaml",
        "id: bridge.quick\ntitle: t\nrequirements: [BR-LOG-01]\nlevel: MUST\nrole: bridge\nsteps:\n  - tool_handshake: {tools: []}\n",
    );
    let json = sb.dir.path().join("r.json");
    let o = sb.cmd().arg("--scenarios").arg(&tp).arg("--scenarios").arg(&br).arg("--json").arg(&json).output().unwrap();
    let out = text(&o);
    assert_eq!(code(&o), 0, "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let at = |needle: &str| stdout.find(needle).unwrap_or_else(|| panic!("no `{needle}` in\n{out}"));
    assert!(at("PASS  calls.slow") < at("(1 scenarios, target: reference testee)"), "{out}");
    assert!(at("(1 scenarios, target: reference testee)") < at("== bridge side"), "{out}");
    assert!(at("== bridge side") < at("PASS  bridge.quick"), "{out}");
    // Run together: the two scenarios overlapped (the JSON keeps each case's start and duration).
    let spans = Spans::read(&json);
    assert!(spans.overlap("calls.slow", "bridge.quick"), "ran one after the other: {}", spans.0);
    // An exclusive TP scenario: the bridge scenario waits for it, or it waits for the bridge's.
    let x = sb.file("x.yaml", &scenario("calls.x", "MUST", "exclusive: true\n", "  - sleep: {ms: 300}\n"));
    let o = sb.cmd().arg("--scenarios").arg(&x).arg("--scenarios").arg(&br).arg("--json").arg(&json).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let spans = Spans::read(&json);
    assert!(!spans.overlap("calls.x", "bridge.quick"), "the exclusive scenario had company: {}", spans.0);
    sb.assert_clean();
}

/// The cases of a JSON report, for when each ran.
struct Spans(Value);

impl Spans {
    fn read(json: &Path) -> Spans {
        Spans(serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap())
    }

    /// When case `id` started and ended, in ms since the epoch.
    fn span(&self, id: &str) -> (u64, u64) {
        let c = self.0["cases"].as_array().unwrap().iter().find(|c| c["id"] == id).unwrap();
        let start = c["started_ms"].as_u64().unwrap_or_else(|| panic!("no started_ms in {c}"));
        (start, start + c["duration_ms"].as_u64().unwrap())
    }

    fn overlap(&self, a: &str, b: &str) -> bool {
        let (a, b) = (self.span(a), self.span(b));
        a.0 < b.1 && b.0 < a.1
    }
}

/// An exclusive scenario runs with nothing beside it but a scenario that is quiet from its start
/// (after its handshake) for long: that one starts first and keeps it company, so the exclusive
/// ones do not stretch the run; a long scenario that is busy first gets no such place.
#[test]
fn an_exclusive_scenario_has_no_company_but_a_scenario_quiet_from_its_start() {
    let sb = Sandbox::new();
    let quiet = sb.file(
        "q.yaml",
        &scenario("calls.quiet", "MUST", "", "  - handshake: {}\n  - expect_nothing: {for_ms: 5200}\n"),
    );
    let busy = sb.file(
        "b.yaml",
        &scenario(
            "calls.busy",
            "MUST",
            "",
            "  - handshake: {}\n  - send: {request_id: e1, call_tool: {name: echo, arguments_json: {text: hi}}}\n  - expect: {envelope: {request_id: e1}}\n  - sleep: {ms: 5100}\n",
        ),
    );
    let x = sb.file("x.yaml", &scenario("calls.x", "MUST", "exclusive: true\n", "  - sleep: {ms: 300}\n"));
    let json = sb.dir.path().join("r.json");
    let mut c = sb.cmd();
    for f in [&busy, &x, &quiet] {
        c.arg("--scenarios").arg(f);
    }
    let o = c.args(["-j", "4", "--json"]).arg(&json).output().unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let spans = Spans::read(&json);
    assert!(
        spans.overlap("calls.quiet", "calls.x"),
        "the quiet scenario did not keep the exclusive one company: {}",
        spans.0
    );
    assert!(!spans.overlap("calls.busy", "calls.x"), "the busy scenario ran beside the exclusive one: {}", spans.0);
    sb.assert_clean();
}

/// `--golden DIR`: `--accept` writes one snapshot per scenario; a transcript that then differs
/// from its snapshot is CHANGED beside its PASS, with a diff, fails the run and is left as
/// `.snap.new`; with CI set nothing is written and `--accept` is refused; accepting again makes
/// the run clean and removes the pending file.
#[test]
fn golden_transcripts_are_accepted_then_a_change_on_the_wire_shows_beside_the_verdict() {
    let sb = Sandbox::new();
    let dir = sb.dir.path().join("golden");
    let run = |extra: &[&str], ci: bool| {
        let mut c = sb.cmd();
        with_examples(&mut c).arg("--golden").arg(&dir).args(extra).env_remove("CI");
        if ci {
            c.env("CI", "true");
        }
        c.output().unwrap()
    };
    // Under CI a missing directory is an error: it would never be written.
    let o = run(&[], true);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("no such directory, and CI is set"), "{}", text(&o));
    let o = run(&["--accept"], false);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("5 accepted (written)"), "{}", text(&o));
    let echo = dir.join("calls.echo.snap");
    let snap = std::fs::read_to_string(&echo).unwrap();
    assert!(snap.starts_with("---\nsource: protomcp-conform\ndescription: \"calls.echo — "), "{snap}");
    let o = run(&[], false);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("golden ") && text(&o).contains(": 5 same"), "{}", text(&o));
    // What the target sent before: a different echo result on the wire.
    let line = snap.lines().find(|l| l.starts_with("testee→harness") && l.contains("call_result")).unwrap();
    let old = line.replacen("call_result", "call_result_before", 1);
    std::fs::write(&echo, snap.replace(line, &old)).unwrap();
    let o = run(&[], false);
    let out = text(&o);
    assert_eq!(code(&o), 1, "{out}");
    assert!(out.contains("PASS  calls.echo") && out.contains("[golden: CHANGED]"), "{out}");
    assert!(out.contains("── golden CHANGED calls.echo"), "{out}");
    assert!(out.contains(&format!("   -{old}")) && out.contains(&format!("   +{line}")), "{out}");
    assert!(out.contains("4 same, 1 CHANGED"), "{out}");
    let pending = dir.join("calls.echo.snap.new");
    assert_eq!(std::fs::read_to_string(&pending).unwrap(), snap, "the pending file holds this run's text");
    // CI: compared, reported, nothing written; --accept refused.
    std::fs::remove_file(&pending).unwrap();
    let o = run(&[], true);
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(text(&o).contains("nothing written (CI is set)") && !pending.exists(), "{}", text(&o));
    let o = run(&["--accept"], true);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("CI never writes them"), "{}", text(&o));
    // Accepted: the snapshot is this run's again, and the next run is clean.
    let o = run(&["--accept"], false);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&echo).unwrap(), snap);
    let o = run(&["--json", sb.dir.path().join("r.json").to_str().unwrap()], false);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(sb.dir.path().join("r.json")).unwrap()).unwrap();
    assert!(v["cases"].as_array().unwrap().iter().all(|c| c["golden"]["status"] == "same"), "{v}");
    sb.assert_clean();
}
