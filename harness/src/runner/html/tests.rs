use super::*;
use std::time::Duration;

fn result(id: &str, verdict: Verdict, reqs: &[&str], broken: &[&str], message: &str) -> CaseResult {
    CaseResult {
        title: format!("title of {id}"),
        file: format!("scenarios/{id}.yaml"),
        requirements: reqs.iter().map(|s| s.to_string()).collect(),
        broken: broken.iter().map(|s| s.to_string()).collect(),
        verdict,
        message: message.into(),
        duration: Duration::from_millis(5),
        ..CaseResult::blank(id)
    }
}

#[test]
fn a_failure_message_gives_location_expectation_and_what_arrived() {
    let m = "scenarios/calls/x.yaml:13:5: expect: request_id: expected \"a\", got \"b\"\n  arrived: {\"x\":1}\n           {\"y\":2}\nmore";
    let p = message_parts(m);
    assert_eq!(p.location.as_deref(), Some("scenarios/calls/x.yaml:13:5"));
    assert_eq!(p.expected.as_deref(), Some("expect: request_id: expected \"a\", got \"b\""));
    assert_eq!(p.arrived.as_deref(), Some("{\"x\":1}\n{\"y\":2}"));
    assert_eq!(message_parts("the testee exited"), MessageParts::default());
}

#[test]
fn everything_a_peer_wrote_is_escaped() {
    let evil = "<script>alert(1)</script>\"'&\u{1b}";
    let mut r = result("calls.x", Verdict::Fail, &["TP-CALL-01"], &["TP-CALL-01"], evil);
    r.stderr_tail = evil.into();
    r.title = evil.into();
    r.command = vec![evil.into()];
    let html = report(evil, &[Side { target: evil, results: &[r] }]);
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(!html.contains('\u{1b}'));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;\\u{001b}"), "{html}");
    // Exactly one script element: ours.
    assert_eq!(html.matches("<script>").count(), 1);
}

#[test]
fn the_report_has_counts_attribution_and_no_external_reference() {
    let a = [
        result("calls.a", Verdict::Pass, &["TP-CALL-01"], &[], ""),
        result("calls.b", Verdict::Fail, &["TP-CALL-01", "TP-CALL-02"], &["TP-CALL-02"], "x.yaml:1:2: boom"),
        result("calls.c", Verdict::Skip, &["TP-CALL-03"], &[], "feature not claimed by the target: x"),
    ];
    let b = [result("bridge.a", Verdict::Warn, &["BR-CALL-01"], &["BR-CALL-01"], "w")];
    let html = report("t", &[Side { target: "one", results: &a }, Side { target: "two", results: &b }]);
    assert!(html.contains("<tr data-target=\"one\"><td>one</td><td class=\"n\" data-verdict=\"PASS\">1</td><td class=\"n\" data-verdict=\"FAIL\">1</td>"), "{html}");
    assert!(html.contains("<tr class=\"total\" data-target=\"total\">"), "{html}");
    assert!(html.contains("FAILED: 1 pass, 1 fail, 1 warn, 1 skip"), "{html}");
    // TP-CALL-02 was broken in calls.b; TP-CALL-01 passed in calls.a and was not reached in calls.b.
    let row = html.lines().find(|l| l.contains("id=\"req-TP-CALL-02\"")).expect("row");
    assert!(
        row.contains("data-verdicts=\"FAIL SKIP\"") && row.contains("broken in <a href=\"#case-calls.b\">"),
        "{row}"
    );
    let row = html.lines().find(|l| l.contains("id=\"req-TP-CALL-01\"")).expect("row");
    assert!(row.contains("v-pass") && row.contains("1 PASS, 1 SKIP"), "{row}");
    assert!(html.contains("id=\"case-calls.b\"") && html.contains("<code class=\"location\">x.yaml:1:2</code>"));
    assert!(html.contains("feature not claimed by the target: x"));
    for external in ["http://", "https://", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(external), "{external} in the report");
    }
    assert!(!html.contains("id=\"golden\""), "no golden section without --golden");
}

#[test]
fn a_changed_golden_transcript_is_shown_with_its_diff_beside_its_pass() {
    use crate::runner::golden::Golden;
    let mut a =
        [result("calls.a", Verdict::Pass, &["TP-CALL-01"], &[], ""), result("calls.b", Verdict::Pass, &[], &[], "")];
    a[0].golden = Some(Golden::Changed { diff: "--- golden\n+++ this run\n-<old>\n+<new>\n".into() });
    a[1].golden = Some(Golden::Same);
    let html = report("t", &[Side { target: "one", results: &a }]);
    assert!(html.contains("<h2>Golden transcripts changed (1)</h2>"), "{html}");
    assert!(html.contains("<code>calls.a</code> golden CHANGED"), "{html}");
    assert!(html.contains("-&lt;old&gt;\n+&lt;new&gt;"), "{html}");
    assert!(!html.contains("<code>calls.b</code> golden"), "{html}");
}
