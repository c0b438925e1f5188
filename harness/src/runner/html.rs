//! The HTML report: one self-contained file (inline CSS and script, no network, no external
//! assets) with the summary per target and in total, per-area bars, the requirement × verdict
//! table (filterable by verdict, level and area, with the `broken` attribution of each
//! requirement), and every scenario that did not pass: its message, `file:line:col`, what was
//! expected and what arrived, the transcript and the target's stderr. Skipped scenarios are
//! listed once per reason.
//!
//! Everything that comes from a run (messages, transcripts, stderr, target names, ids) is
//! HTML-escaped: a peer under test writes some of it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{CaseResult, Summary, Verdict};
use crate::requirements::Level;

/// A transcript longer than this (bytes) is cut in the report, with a note; `--transcripts DIR`
/// keeps the whole.
pub const TRANSCRIPT_LIMIT: usize = 256 * 1024;

/// One target's results.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub target: &'a str,
    pub results: &'a [CaseResult],
}

/// `s` with `& < > " '` escaped, safe in element text and in quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newline (a peer may send any byte) are
            // shown as their code point, never passed to the page.
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

fn class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Warn => "warn",
        Verdict::Skip => "skip",
        Verdict::Xfail => "xfail",
        Verdict::Xpass => "xpass",
        Verdict::Error => "error",
        Verdict::Flaky => "flaky",
        Verdict::Leak => "leak",
        Verdict::Blocked => "blocked",
    }
}

/// How one target did on one requirement.
#[derive(Debug, Default, Clone)]
struct ReqCell {
    /// Verdict → scenarios giving the requirement that verdict.
    by_verdict: BTreeMap<Verdict, Vec<String>>,
    /// Scenarios whose failing step broke the requirement.
    broken_in: Vec<String>,
}

impl ReqCell {
    /// The worst verdict, SKIP when nothing ran.
    fn verdict(&self) -> Verdict {
        self.by_verdict.keys().copied().max_by_key(|v| v.rank()).unwrap_or(Verdict::Skip)
    }
}

/// The requirements the results touch, in spec order, with one cell per side.
fn requirement_rows(sides: &[Side<'_>]) -> Vec<(String, Vec<ReqCell>)> {
    let mut rows: BTreeMap<String, Vec<ReqCell>> = BTreeMap::new();
    for (i, side) in sides.iter().enumerate() {
        for r in side.results {
            for (req, v) in r.per_requirement() {
                let cell = &mut rows.entry(req.to_owned()).or_insert_with(|| vec![ReqCell::default(); sides.len()])[i];
                cell.by_verdict.entry(v).or_default().push(r.id.clone());
            }
            for b in &r.broken {
                let cell = &mut rows.entry(b.clone()).or_insert_with(|| vec![ReqCell::default(); sides.len()])[i];
                if !cell.broken_in.contains(&r.id) {
                    cell.broken_in.push(r.id.clone());
                }
            }
        }
    }
    let mut rows: Vec<_> = rows.into_iter().collect();
    rows.sort_by_key(|(id, _)| (crate::requirements::spec_order(id), id.clone()));
    rows
}

/// `TP-CALL` of `TP-CALL-01`.
fn area(id: &str) -> &str {
    id.rsplit_once('-').map_or(id, |(a, _)| a)
}

/// The parts of a failure message: where the failing step is (`file:line:col`), what it checked
/// and expected (the rest of that line), and what arrived.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MessageParts {
    pub location: Option<String>,
    pub expected: Option<String>,
    pub arrived: Option<String>,
}

/// Splits a failure message into [`MessageParts`]; parts not found are `None`.
pub fn message_parts(message: &str) -> MessageParts {
    static LOC: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let loc = LOC.get_or_init(|| regex::Regex::new(r"(\S+\.ya?ml:\d+:\d+): (.*)$").expect("a valid regex"));
    let mut parts = MessageParts::default();
    let lines: Vec<&str> = message.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if parts.location.is_none()
            && let Some(c) = loc.captures(line)
        {
            parts.location = Some(c[1].to_owned());
            parts.expected = Some(c[2].to_owned());
        } else if parts.arrived.is_none()
            && let Some(rest) = line.trim_start().strip_prefix("arrived:")
        {
            // Continuation lines are indented past `arrived:`.
            let indent = line.len() - line.trim_start().len() + "arrived:".len();
            let mut arrived = rest.trim().to_owned();
            while i + 1 < lines.len() && lines[i + 1].len() > indent && lines[i + 1][..indent].trim().is_empty() {
                i += 1;
                arrived.push('\n');
                arrived.push_str(lines[i].trim());
            }
            parts.arrived = Some(arrived);
        }
        i += 1;
    }
    parts
}

const STYLE: &str = r#"
:root { --pass:#2e7d32; --fail:#c62828; --warn:#ef6c00; --skip:#9e9e9e; --xfail:#558b2f; --xpass:#ad1457; --error:#6a1b9a; --flaky:#00838f; --leak:#4e342e; --blocked:#607d8b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1200px; padding: 1em 2em; color: #212121; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
.meta { color: #616161; margin-top: 0; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #e0e0e0; padding: .3em .5em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: bold; background: #fafafa; }
.v { display: inline-block; min-width: 4.2em; padding: 0 .4em; border-radius: 3px; color: #fff; font-weight: 600; font-size: .85em; text-align: center; }
.v-pass { background: var(--pass); } .v-fail { background: var(--fail); } .v-warn { background: var(--warn); }
.v-skip { background: var(--skip); } .v-xfail { background: var(--xfail); } .v-xpass { background: var(--xpass); }
.v-error { background: var(--error); } .v-flaky { background: var(--flaky); } .v-leak { background: var(--leak); }
.v-blocked { background: var(--blocked); }
.result { font-size: 1.3em; font-weight: bold; } .result.ok { color: var(--pass); } .result.failed { color: var(--fail); } .result.error { color: var(--error); }
.areas { display: grid; grid-template-columns: 11em 1fr 6em; gap: .25em .8em; align-items: center; }
.bar { display: flex; height: 1.1em; background: #eee; border-radius: 3px; overflow: hidden; }
.bar span { display: block; height: 100%; }
.seg-pass { background: var(--pass); } .seg-fail { background: var(--fail); } .seg-warn { background: var(--warn); }
.seg-skip { background: var(--skip); } .seg-xfail { background: var(--xfail); } .seg-xpass { background: var(--xpass); }
.seg-error { background: var(--error); } .seg-flaky { background: var(--flaky); } .seg-leak { background: var(--leak); }
.seg-blocked { background: var(--blocked); }
#filters { display: flex; gap: 1.2em; margin: .6em 0; flex-wrap: wrap; align-items: center; }
#reqs td.text { color: #424242; font-size: .9em; }
.broken { display: block; color: var(--fail); font-size: .85em; }
.sc { display: block; color: #757575; font-size: .8em; }
details.case { border: 1px solid #e0e0e0; border-radius: 4px; margin: .5em 0; padding: .3em .8em; }
details.case > summary { cursor: pointer; font-weight: 600; }
dl { display: grid; grid-template-columns: 9em 1fr; gap: .2em .8em; }
dt { color: #616161; } dd { margin: 0; }
pre { background: #f7f7f7; border: 1px solid #eee; padding: .5em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; font-size: .85em; max-height: 40em; overflow-y: auto; }
code { font-size: .9em; }
"#;

const SCRIPT: &str = r#"
(function () {
  var form = document.getElementById('filters');
  if (!form) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll('#reqs tbody tr'));
  var shown = document.getElementById('shown');
  function apply() {
    var v = form.verdict.value, l = form.level.value, a = form.area.value, n = 0;
    rows.forEach(function (r) {
      var ok = (v === '' || (' ' + r.getAttribute('data-verdicts') + ' ').indexOf(' ' + v + ' ') >= 0)
        && (l === '' || r.getAttribute('data-level') === l)
        && (a === '' || r.getAttribute('data-area') === a);
      r.hidden = !ok;
      if (ok) n++;
    });
    shown.textContent = 'showing ' + n + ' of ' + rows.length + ' requirements';
    var parts = [];
    if (v) parts.push('verdict=' + v);
    if (l) parts.push('level=' + l);
    if (a) parts.push('area=' + a);
    var hash = parts.length ? '#' + parts.join('&') : '';
    if (location.hash !== hash && (hash || location.hash)) history.replaceState(null, '', hash || location.pathname);
  }
  // Filters from the address: report.html#verdict=FAIL&level=MUST&area=TP-CALL
  location.hash.replace(/^#/, '').split('&').forEach(function (kv) {
    var p = kv.split('='), el = form.elements[p[0]];
    if (el && p.length === 2) {
      var val = decodeURIComponent(p[1]);
      for (var i = 0; i < el.options.length; i++) if (el.options[i].value === val) el.value = val;
    }
  });
  form.addEventListener('change', apply);
  apply();
})();
"#;

/// The report as one HTML document. `title` names the run (target or matrix).
pub fn report(title: &str, sides: &[Side<'_>]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n\
         <title>protomcp-conform: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape(title)
    );
    let _ = writeln!(
        h,
        "<h1>protomcp-conform report</h1>\n<p class=\"meta\">{} · protomcp-conform {}</p>",
        escape(title),
        env!("CARGO_PKG_VERSION")
    );
    summary(&mut h, sides);
    areas(&mut h, sides);
    requirement_table(&mut h, sides);
    not_passing(&mut h, sides);
    golden_changes(&mut h, sides);
    resources(&mut h, sides);
    let _ = write!(h, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    h
}

/// What the targets held (`/proc`, issue 16): per target the largest figures at a scenario's
/// end, and every soak with its figures before the first round, after the warm-up and at the end.
fn resources(h: &mut String, sides: &[Side<'_>]) {
    let sampled = sides.iter().any(|s| s.results.iter().any(|r| r.resources.is_some()));
    if !sampled {
        return;
    }
    h.push_str("<section id=\"resources\">\n<h2>Resources</h2>\n");
    for side in sides {
        if let Some(line) = crate::io::resources::summary(side.results.iter().filter_map(|r| r.resources.as_ref())) {
            let _ = writeln!(h, "<p><b>{}</b>: {}</p>", escape(side.target), escape(&line));
        }
    }
    let soaks: Vec<(&str, &CaseResult, &crate::io::resources::Use)> = sides
        .iter()
        .flat_map(|s| s.results.iter().map(move |r| (s.target, r)))
        .filter_map(|(t, r)| r.resources.as_ref().filter(|u| !u.samples.is_empty()).map(|u| (t, r, u)))
        .collect();
    if !soaks.is_empty() {
        h.push_str(
            "<table class=\"soaks\">\n<thead><tr><th>target</th><th>soak</th><th>verdict</th><th>samples</th>\
             <th>before the first round</th><th>second sample</th><th>last sample</th></tr></thead>\n<tbody>\n",
        );
        for (target, r, u) in soaks {
            let at = |i: usize| {
                u.samples.get(i).map_or(String::new(), |s| format!("round {}: {}", s.rounds, s.figures.describe()))
            };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td><span class=\"v v-{}\">{}</span></td><td class=\"n\">{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(target),
                if r.detailed() { link(&r.id) } else { format!("<code>{}</code>", escape(&r.id)) },
                class(r.verdict),
                r.verdict.name(),
                u.samples.len(),
                escape(&at(0)),
                escape(&at(1)),
                escape(&at(u.samples.len() - 1))
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
    h.push_str("</section>\n");
}

fn result_word(s: &Summary) -> (&'static str, &'static str) {
    match s.exit_code() {
        0 => ("OK", "ok"),
        1 => ("FAILED", "failed"),
        _ => ("ERROR", "error"),
    }
}

fn summary(h: &mut String, sides: &[Side<'_>]) {
    h.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n<table class=\"summary\">\n<thead><tr><th>target</th>");
    for v in Verdict::ALL {
        let _ = write!(h, "<th><span class=\"v v-{}\">{}</span></th>", class(v), v.name());
    }
    h.push_str("<th>scenarios</th><th>result</th></tr></thead>\n<tbody>\n");
    let row = |h: &mut String, name: &str, key: &str, results: &mut dyn Iterator<Item = &CaseResult>, total: bool| {
        let verdicts: Vec<Verdict> = results.map(|r| r.verdict).collect();
        let s = Summary::of(verdicts.iter().copied());
        let (word, cls) = result_word(&s);
        let _ = write!(
            h,
            "<tr{} data-target=\"{}\"><td>{}</td>",
            if total { " class=\"total\"" } else { "" },
            escape(key),
            escape(name)
        );
        for v in Verdict::ALL {
            let n = verdicts.iter().filter(|x| **x == v).count();
            let _ = write!(h, "<td class=\"n\" data-verdict=\"{}\">{n}</td>", v.name());
        }
        let _ = writeln!(
            h,
            "<td class=\"n\" data-count=\"scenarios\">{}</td><td class=\"result {cls}\">{word}</td></tr>",
            verdicts.len()
        );
        s
    };
    let mut all = Vec::new();
    for side in sides {
        row(h, side.target, side.target, &mut side.results.iter(), false);
        all.extend(side.results.iter());
    }
    let total = if sides.len() > 1 {
        row(h, "total", "total", &mut all.iter().copied(), true)
    } else {
        Summary::of(all.iter().map(|r| r.verdict))
    };
    h.push_str("</tbody>\n</table>\n");
    let worst = sides.iter().map(|s| Summary::of(s.results.iter().map(|r| r.verdict)).exit_code()).max().unwrap_or(3);
    let (word, cls) = match worst {
        0 => ("OK", "ok"),
        1 => ("FAILED", "failed"),
        _ => ("ERROR", "error"),
    };
    let _ = writeln!(
        h,
        "<p id=\"result\" class=\"result {cls}\">{word}: {total} ({} scenarios)</p>\n</section>",
        all.len()
    );
}

fn areas(h: &mut String, sides: &[Side<'_>]) {
    let rows = requirement_rows(sides);
    h.push_str(
        "<section id=\"areas\">\n<h2>Requirements per area</h2>\n<p class=\"meta\">Each bar: the requirements of \
         the area that the run touched, by their verdict (the worst over the scenarios citing it); the count is \
         requirements met (PASS or XFAIL) / requirements tested.</p>\n",
    );
    for (i, side) in sides.iter().enumerate() {
        let _ = writeln!(
            h,
            "<h3>{}</h3>\n<div class=\"areas\" data-target=\"{}\">",
            escape(side.target),
            escape(side.target)
        );
        let mut by_area: Vec<(String, BTreeMap<Verdict, usize>)> = Vec::new();
        for (id, cells) in &rows {
            let a = area(id).to_owned();
            if by_area.last().is_none_or(|(x, _)| *x != a) {
                by_area.push((a, BTreeMap::new()));
            }
            let v = cells[i].verdict();
            *by_area.last_mut().expect("pushed").1.entry(v).or_default() += 1;
        }
        for (a, counts) in by_area {
            let total: usize = counts.values().sum();
            let tested: usize = counts.iter().filter(|(v, _)| **v != Verdict::Skip).map(|(_, n)| n).sum();
            if tested == 0 {
                continue;
            }
            let met: usize =
                counts.iter().filter(|(v, _)| matches!(v, Verdict::Pass | Verdict::Xfail)).map(|(_, n)| n).sum();
            let _ = write!(h, "<span class=\"name\">{}</span><div class=\"bar\">", escape(&a));
            for (v, n) in &counts {
                let pct = *n as f64 * 100.0 / total as f64;
                let _ = write!(
                    h,
                    "<span class=\"seg-{}\" style=\"width:{pct:.2}%\" title=\"{n} {}\"></span>",
                    class(*v),
                    v.name()
                );
            }
            let _ = writeln!(h, "</div><span class=\"count\">{met}/{tested}</span>");
        }
        h.push_str("</div>\n");
    }
    h.push_str("</section>\n");
}

fn requirement_table(h: &mut String, sides: &[Side<'_>]) {
    let rows = requirement_rows(sides);
    let mut areas: Vec<&str> = rows.iter().map(|(id, _)| area(id)).collect();
    areas.dedup();
    h.push_str("<section id=\"requirements\">\n<h2>Requirements × verdict</h2>\n<form id=\"filters\">\n");
    h.push_str("<label>verdict <select name=\"verdict\"><option value=\"\">any</option>");
    for v in Verdict::ALL {
        let _ = write!(h, "<option>{}</option>", v.name());
    }
    h.push_str("</select></label>\n<label>level <select name=\"level\"><option value=\"\">any</option>");
    for l in [Level::Must, Level::Should, Level::May] {
        let _ = write!(h, "<option>{l}</option>");
    }
    h.push_str("</select></label>\n<label>area <select name=\"area\"><option value=\"\">any</option>");
    for a in &areas {
        let _ = write!(h, "<option>{}</option>", escape(a));
    }
    let _ = writeln!(h, "</select></label>\n<span id=\"shown\">{} requirements</span>\n</form>", rows.len());
    h.push_str(
        "<p class=\"meta\">A requirement's verdict is the worst over the scenarios citing it; a failed \
         scenario counts for the requirements its failing step broke (“broken in”), the requirements checked \
         before it passed, and the others it cites were not reached (SKIP).</p>\n",
    );
    h.push_str("<table id=\"reqs\">\n<thead><tr><th>requirement</th><th>level</th>");
    for s in sides {
        let _ = write!(h, "<th>{}</th>", escape(s.target));
    }
    h.push_str("<th>text</th></tr></thead>\n<tbody>\n");
    for (id, cells) in &rows {
        let req = crate::requirements::any(id);
        let level = req.map(|r| r.level.to_string()).unwrap_or_default();
        let mut verdicts: Vec<&str> = cells.iter().map(|c| c.verdict().name()).collect();
        verdicts.sort_unstable();
        verdicts.dedup();
        let _ = write!(
            h,
            "<tr id=\"req-{}\" data-level=\"{}\" data-area=\"{}\" data-verdicts=\"{}\"><td><code>{}</code></td><td>{}</td>",
            escape(id),
            escape(&level),
            escape(area(id)),
            verdicts.join(" "),
            escape(id),
            escape(&level)
        );
        for c in cells {
            let v = c.verdict();
            let n: usize = c.by_verdict.values().map(Vec::len).sum();
            let _ = write!(h, "<td><span class=\"v v-{}\">{}</span>", class(v), v.name());
            if !c.broken_in.is_empty() {
                let ids: Vec<String> = c.broken_in.iter().map(|s| link(s)).collect();
                let _ = write!(h, "<span class=\"broken\">broken in {}</span>", ids.join(", "));
            }
            if n > 0 {
                let parts: Vec<String> =
                    c.by_verdict.iter().map(|(v, ids)| format!("{} {}", ids.len(), v.name())).collect();
                let _ = write!(h, "<span class=\"sc\">{}</span>", parts.join(", "));
            }
            h.push_str("</td>");
        }
        let _ = writeln!(h, "<td class=\"text\">{}</td></tr>", escape(req.map_or("", |r| r.text)));
    }
    h.push_str("</tbody>\n</table>\n</section>\n");
}

fn anchor(id: &str) -> String {
    format!(
        "case-{}",
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect::<String>()
    )
}

fn link(id: &str) -> String {
    format!("<a href=\"#{}\">{}</a>", escape(&anchor(id)), escape(id))
}

/// With `--golden`: every transcript that differs from its golden file (or has none), beside
/// its verdict, with the diff.
fn golden_changes(h: &mut String, sides: &[Side<'_>]) {
    use super::golden::Golden;
    let changed: Vec<(&str, &CaseResult, &Golden)> = sides
        .iter()
        .flat_map(|s| s.results.iter().map(move |r| (s.target, r)))
        .filter_map(|(t, r)| {
            r.golden.as_ref().filter(|g| g.unaccepted() || matches!(g, Golden::Accepted { .. })).map(|g| (t, r, g))
        })
        .collect();
    if sides.iter().all(|s| s.results.iter().all(|r| r.golden.is_none())) {
        return;
    }
    let _ = writeln!(h, "<section id=\"golden\">\n<h2>Golden transcripts changed ({})</h2>", changed.len());
    if changed.is_empty() {
        h.push_str("<p>Every transcript compared is the same as its golden file.</p>\n");
    }
    for (target, r, g) in changed {
        let _ = writeln!(
            h,
            "<details class=\"golden\" open>\n<summary><span class=\"v v-{}\">{}</span> <code>{}</code> golden {} — {}</summary>",
            class(r.verdict),
            r.verdict.name(),
            escape(&r.id),
            g.word(),
            escape(target)
        );
        match g {
            Golden::Changed { diff } | Golden::Accepted { diff } if !diff.is_empty() => {
                let _ = writeln!(h, "<pre class=\"diff\">{}</pre>", escape(diff));
            }
            _ => h.push_str("<p>No golden file before this run.</p>\n"),
        }
        h.push_str("</details>\n");
    }
    h.push_str("</section>\n");
}

fn not_passing(h: &mut String, sides: &[Side<'_>]) {
    let bad: Vec<(&str, &CaseResult)> =
        sides.iter().flat_map(|s| s.results.iter().map(move |r| (s.target, r))).filter(|(_, r)| r.detailed()).collect();
    root_causes(h, sides);
    let _ = writeln!(h, "<section id=\"cases\">\n<h2>Scenarios not passing ({})</h2>", bad.len());
    if bad.is_empty() {
        h.push_str("<p>Every scenario that ran passed.</p>\n");
    }
    for (target, r) in bad {
        case(h, target, r);
    }
    skipped(h, sides);
    h.push_str("</section>\n");
}

/// Each root cause of BLOCKED cases once: the precondition and requirement it broke, the first
/// case's message, and the cases it blocked (not reached, so not listed among those not passing).
fn root_causes(h: &mut String, sides: &[Side<'_>]) {
    let causes: Vec<(&str, super::RootCause)> =
        sides.iter().flat_map(|s| super::root_causes(s.results).into_iter().map(move |c| (s.target, c))).collect();
    if causes.is_empty() {
        return;
    }
    let _ = writeln!(
        h,
        "<section id=\"root-causes\">\n<h2>Root causes ({})</h2>\n<p>A precondition (connect, the handshake, \
         the first listing) broke: the cases after it were not reached (BLOCKED), and the run fails once for \
         each root cause.</p>",
        causes.len()
    );
    for (target, c) in causes {
        let _ = writeln!(
            h,
            "<details class=\"case root-cause\" open>\n<summary><span class=\"v v-fail\">ROOT CAUSE</span> \
             <span class=\"broken\">{}</span> at <code>{}</code> — blocked {} case(s)</summary>\n<dl>",
            escape(&c.requirements.join(", ")),
            escape(&c.precondition),
            c.cases.len()
        );
        let _ = writeln!(h, "<dt>target</dt><dd>{}</dd>", escape(target));
        let _ = writeln!(h, "<dt>first case</dt><dd><pre class=\"message\">{}</pre></dd>", escape(&c.message));
        let ids: Vec<String> = c.cases.iter().map(|id| format!("<code>{}</code>", escape(id))).collect();
        let _ = writeln!(h, "<dt>blocked</dt><dd class=\"blocked\">{}</dd>\n</dl>\n</details>", ids.join(" "));
    }
    h.push_str("</section>\n");
}

/// The details of one scenario that did not pass.
fn case(h: &mut String, target: &str, r: &CaseResult) {
    let parts = message_parts(&r.message);
    let _ = writeln!(
        h,
        "<details class=\"case\" id=\"{}\" data-verdict=\"{}\"{}>\n<summary><span class=\"v v-{}\">{}</span> \
         <code>{}</code> — {}</summary>\n<dl>",
        escape(&anchor(&r.id)),
        r.verdict.name(),
        if matches!(r.verdict, Verdict::Fail | Verdict::Error | Verdict::Xpass | Verdict::Flaky | Verdict::Leak) {
            " open"
        } else {
            ""
        },
        class(r.verdict),
        r.verdict.name(),
        escape(&r.id),
        escape(&r.title)
    );
    let dd = |h: &mut String, k: &str, v: &str| {
        let _ = writeln!(h, "<dt>{k}</dt><dd>{v}</dd>");
    };
    dd(h, "target", &escape(target));
    dd(h, "level", &r.level.to_string());
    dd(h, "requirements", &escape(&r.requirements.join(", ")));
    if !r.broken.is_empty() {
        dd(h, "broken", &format!("<span class=\"broken\">{}</span>", escape(&r.broken.join(", "))));
    }
    if let Some(c) = &r.check {
        dd(h, "check", &format!("<code class=\"check\">{}</code>", escape(&c.to_string())));
    }
    if !r.findings.is_empty() {
        let items: String = r.findings.iter().map(|f| format!("<li>{}</li>", escape(&f.to_string()))).collect();
        dd(h, "findings", &format!("<ul class=\"findings\">{items}</ul>"));
    }
    dd(h, "scenario file", &format!("<code>{}</code>", escape(&r.file)));
    if let Some(l) = &parts.location {
        dd(h, "failing step", &format!("<code class=\"location\">{}</code>", escape(l)));
    }
    if let Some(e) = &parts.expected {
        dd(h, "expected", &format!("<code class=\"expected\">{}</code>", escape(e)));
    }
    if let Some(a) = &parts.arrived {
        dd(h, "arrived", &format!("<pre class=\"arrived\">{}</pre>", escape(a)));
    }
    if let Some(u) = &r.resources {
        let mut text = format!("at the start: {}\nat the end: {}", u.start.describe(), u.end.describe());
        if !u.during.is_empty() {
            let _ = write!(text, "\nthe most of {} samples every second: {}", u.during.len(), u.peak().describe());
        }
        if let (Some(first), Some(last)) = (u.samples.first(), u.samples.last()) {
            let _ = write!(
                text,
                "\n{} soak samples, round {}: {}\n… round {}: {}",
                u.samples.len(),
                first.rounds,
                first.figures.describe(),
                last.rounds,
                last.figures.describe()
            );
        }
        dd(h, "resources", &format!("<pre class=\"resources\">{}</pre>", escape(&text)));
    }
    dd(h, "duration", &format!("{} ms", r.duration.as_millis()));
    h.push_str("</dl>\n");
    let _ = writeln!(h, "<h4>message</h4>\n<pre class=\"message\">{}</pre>", escape(&r.message));
    if !r.runs.is_empty() {
        h.push_str("<h4>runs</h4>\n<ol class=\"runs\">");
        for (v, m) in &r.runs {
            let _ = write!(h, "<li><span class=\"v v-{}\">{}</span> {}</li>", class(*v), v.name(), escape(m));
        }
        h.push_str("</ol>\n");
    }
    let mut t = r.transcript_text();
    if t.len() > TRANSCRIPT_LIMIT {
        let mut cut = TRANSCRIPT_LIMIT;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        let total = t.len();
        t.truncate(cut);
        let _ = write!(t, "\n… cut at {cut} of {total} bytes (--transcripts DIR keeps the whole)\n");
    }
    let _ = writeln!(h, "<h4>transcript</h4>\n<pre class=\"transcript\">{}</pre>", escape(&t));
    if !r.stderr_tail.trim().is_empty() {
        let _ = writeln!(h, "<h4>target stderr (tail)</h4>\n<pre class=\"stderr\">{}</pre>", escape(&r.stderr_tail));
    }
    if !r.command.is_empty() {
        let _ = writeln!(h, "<p>target command: <code>{}</code></p>", escape(&r.command.join(" ")));
    }
    h.push_str("</details>\n");
}

/// Skipped scenarios: one row per target and reason.
fn skipped(h: &mut String, sides: &[Side<'_>]) {
    let mut skipped: BTreeMap<(&str, String), Vec<&str>> = BTreeMap::new();
    for s in sides {
        for r in s.results.iter().filter(|r| r.verdict == Verdict::Skip) {
            let reason = r.message.lines().next().unwrap_or("").to_owned();
            skipped.entry((s.target, reason)).or_default().push(&r.id);
        }
    }
    let n: usize = skipped.values().map(Vec::len).sum();
    let _ = writeln!(h, "<h3 id=\"skipped\">Skipped ({n})</h3>");
    if !skipped.is_empty() {
        h.push_str("<table class=\"skipped\">\n<thead><tr><th>target</th><th>reason</th><th>scenarios</th></tr></thead>\n<tbody>\n");
        for ((target, reason), ids) in &skipped {
            let list: Vec<String> = ids.iter().map(|i| format!("<code>{}</code>", escape(i))).collect();
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td><details><summary>{}</summary>{}</details></td></tr>",
                escape(target),
                escape(reason),
                ids.len(),
                list.join(" ")
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
}

#[cfg(test)]
mod tests;
