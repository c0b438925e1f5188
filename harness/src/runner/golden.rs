//! Golden transcripts for a target's own repository (`--golden DIR`): each scenario's normalized
//! transcript ([`CaseResult::transcript_text`]) is compared with `DIR/<id>.snap`, a file in
//! insta's snapshot format (a `---` header, then the text of [`golden_text`]), so the SDK author sees what a change
//! did on the wire even while every verdict stays PASS. The comparison is beside the verdict,
//! never instead of it.
//!
//! What is written, and when (insta's own rules): `--accept` writes `<id>.snap` for every new or
//! changed transcript; otherwise a new or changed one leaves `<id>.snap.new` beside it (insta's
//! pending file, for `cargo insta review` or a later `--accept`); with `CI` set nothing is
//! written at all. A transcript that matches removes a stale `<id>.snap.new`.
//!
//! The pure half ([`compare`], [`snapshot_body`], [`snapshot_file`]) is separate from the files
//! ([`GoldenDir`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::{CaseResult, Verdict};

/// Scenarios whose transcript is not deterministic even against one unchanged target, each with
/// the reason: they are never compared (the repository's own `golden/` has no file for them
/// either). They still run and get their verdicts.
pub const NOT_DETERMINISTIC: &[(&str, &str)] = &[
    (
        "concurrency.pipelined-64-in-flight",
        "64 slow calls run at once, each one 100 ms step: the order of their results and progress \
         depends on scheduling",
    ),
    (
        "sampling.concurrent-asks",
        "two ask calls run at once: which SamplingRequest arrives first, and so how the \
         normalizer numbers the two tool-process rids, depends on scheduling",
    ),
    (
        "roots.concurrent",
        "two roots calls run at once: which call's ListRootsRequest arrives first, and so which \
         call gets which root list, depends on scheduling (both pairings are correct)",
    ),
    (
        "cancel.immediately-after-call",
        "the cancel races the start of the handler: the one result is either the handler's \
         `cancelled` or the runner's `Call cancelled before it started` error, both allowed",
    ),
    (
        "bridge.toollist.control-reply",
        "the list_changed that follows the set_allowed is not waited for by any step: whether it \
         reaches the transcript's tail of unread messages before teardown depends on timing",
    ),
    (
        "bridge.toollist.open-mode-and-unregistered",
        "the last list_changed is not waited for by any step: whether it reaches the transcript's \
         tail of unread messages before teardown depends on timing",
    ),
    (
        "bridge.toollist.enable-disable-in-list-modes",
        "six control messages each send a list_changed that no step waits for: how many of them \
         reach the transcript's tail of unread messages before teardown depends on timing",
    ),
    (
        "bridge.toollist.batch-enable-then-disable",
        "the control messages' list_changed notifications are passed over by the steps' ignore: how \
         many of them arrive before the response the step waits for depends on timing",
    ),
    (
        "bridge.toollist.get-changes-nothing",
        "the control messages' list_changed notifications are passed over by the steps' ignore: how \
         many of them arrive before the response the step waits for depends on timing",
    ),
    (
        "bridge.security.hostile-tool-content",
        "the tool process's log entry and the host's ping reach the bridge from two sides at once: \
         whether the log notification or the ping's answer goes out first depends on scheduling",
    ),
    (
        "bridge.cancel.session-end",
        "after stdin closes the bridge may still write its error for the cancelled call; whether \
         that line reaches the transcript's tail of unread messages before teardown depends on timing",
    ),
    (
        "bridge.reload.failed-start-keeps-bridge-up",
        "after the failed start a bridge may restart the tool process on its own (the scenario \
         allows it): whether the call's error finds the bridge down or already restarting, and so \
         its text, depends on timing",
    ),
    (
        "progress.nothing-after-result",
        "two slow calls report progress concurrently (ignored by the expects): how the reports of \
         the two interleave, and which step's expect sees them, depends on timing",
    ),
];

/// Why a scenario's transcript is not compared, if it is one of [`NOT_DETERMINISTIC`].
pub fn not_deterministic(id: &str) -> Option<&'static str> {
    NOT_DETERMINISTIC.iter().find(|(i, _)| *i == id).map(|(_, why)| *why)
}

/// The text a golden file holds: the normalized transcript with the connection's errors
/// folded. A broken connection is in the verdict and its message; how it surfaces depends on
/// timing: the harness's next write may fail (broken pipe) or not, and a peer that died with
/// unread data resets the connection where one without ends it. So a failed write is left out,
/// and a failed read is written as the end of file it stands for; the same target then writes
/// the same golden file run after run.
pub fn golden_text(r: &CaseResult) -> String {
    fold_connection_errors(&r.transcript_text())
}

/// [`golden_text`] of a normalized transcript.
pub fn fold_connection_errors(transcript: &str) -> String {
    let from = crate::transcript::Dir::FromTestee.name();
    let error = format!("{from} stream error: ");
    let eof = format!("{from} end of file");
    let mut s = String::new();
    // Ended: a later failed read of the same connection is the same end.
    let mut ended = false;
    for l in transcript.lines() {
        let l = match l.strip_prefix(&error) {
            Some(e) if e.starts_with("write: ") => continue,
            Some(_) => eof.as_str(),
            None => l,
        };
        if l == eof {
            if ended {
                continue;
            }
            ended = true;
        } else if l == "-- connected" {
            ended = false;
        }
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// How a scenario's transcript compares with its golden file (part of a case's result).
pub use super::result::Golden;

/// A golden file that cannot be read or written, or is not a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path}:1:1: not a snapshot file: it must start with a `---` line, a header and a second `---` line \
         (insta's format)"
    )]
    NotASnapshot { path: PathBuf },
}

/// The text of a snapshot file after its header; `None` when the file has no header.
pub fn snapshot_body(file: &str) -> Option<&str> {
    let rest = file.strip_prefix("---\n").or_else(|| file.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if line.trim_end() == "---" {
            return Some(&rest[at..]);
        }
    }
    None
}

/// A snapshot file in insta's format for scenario `id`.
pub fn snapshot_file(id: &str, title: &str, body: &str) -> String {
    let description = serde_json::to_string(&format!("{id} — {title}")).expect("a string");
    format!("---\nsource: protomcp-conform\ndescription: {description}\n---\n{}\n", body.trim_end_matches('\n'))
}

/// Compares as insta does: line endings and trailing newlines do not count.
pub fn compare(golden: &str, now: &str) -> Option<String> {
    let norm = |s: &str| s.replace("\r\n", "\n").trim_end_matches('\n').to_owned() + "\n";
    let (a, b) = (norm(golden), norm(now));
    if a == b {
        return None;
    }
    let diff = similar::TextDiff::from_lines(&a, &b);
    let mut s = String::new();
    let _ = write!(s, "{}", diff.unified_diff().context_radius(3).header("golden", "this run"));
    Some(s)
}

/// What a run does with the golden files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoldenMode {
    /// Compare; leave `<id>.snap.new` for a new or changed transcript.
    Check,
    /// Compare and write every new or changed transcript as `<id>.snap`.
    Accept,
    /// Compare only: nothing is written (`CI` is set).
    ReadOnly,
}

/// A directory of golden files.
#[derive(Debug, Clone)]
pub struct GoldenDir {
    pub dir: PathBuf,
    pub mode: GoldenMode,
}

impl GoldenDir {
    fn path(&self, id: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{id}.{ext}"))
    }

    /// Compares `r`'s transcript with its golden file, writing what [`GoldenMode`] says.
    pub fn judge(&self, r: &CaseResult) -> Result<Golden, GoldenError> {
        if r.verdict == Verdict::Skip {
            return Ok(Golden::NotCompared("skipped".into()));
        }
        if r.transcript.items.is_empty() {
            return Ok(Golden::NotCompared("the target was not started".into()));
        }
        if let Some(why) = not_deterministic(&r.id) {
            return Ok(Golden::NotCompared(format!("not deterministic: {why}")));
        }
        let now = golden_text(r);
        let snap = self.path(&r.id, "snap");
        let pending = self.path(&r.id, "snap.new");
        let before = match std::fs::read_to_string(&snap) {
            Ok(text) => {
                Some(snapshot_body(&text).ok_or_else(|| GoldenError::NotASnapshot { path: snap.clone() })?.to_owned())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(GoldenError::Io { path: snap, source: e }),
        };
        let diff = match &before {
            Some(b) => match compare(b, &now) {
                None => {
                    if self.mode != GoldenMode::ReadOnly {
                        remove_if_there(&pending)?;
                    }
                    return Ok(Golden::Same);
                }
                Some(d) => Some(d),
            },
            None => None,
        };
        let file = snapshot_file(&r.id, &r.title, &now);
        match self.mode {
            GoldenMode::ReadOnly => {}
            GoldenMode::Check => write(&self.dir, &pending, &file)?,
            GoldenMode::Accept => {
                write(&self.dir, &snap, &file)?;
                remove_if_there(&pending)?;
                return Ok(Golden::Accepted { diff: diff.unwrap_or_default() });
            }
        }
        Ok(match diff {
            Some(diff) => Golden::Changed { diff },
            None => Golden::New,
        })
    }
}

fn write(dir: &Path, path: &Path, text: &str) -> Result<(), GoldenError> {
    std::fs::create_dir_all(dir).map_err(|e| GoldenError::Io { path: dir.to_owned(), source: e })?;
    std::fs::write(path, text).map_err(|e| GoldenError::Io { path: path.to_owned(), source: e })
}

fn remove_if_there(path: &Path) -> Result<(), GoldenError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(GoldenError::Io { path: path.to_owned(), source: e }),
        _ => Ok(()),
    }
}

/// One line for the end of a run: how many were the same, changed, new, accepted and not
/// compared; `None` when nothing was looked at.
pub fn summary<'a>(dir: &Path, goldens: impl Iterator<Item = &'a Golden>) -> Option<String> {
    let mut n = [0usize; 5];
    for g in goldens {
        n[match g {
            Golden::Same => 0,
            Golden::Changed { .. } => 1,
            Golden::New => 2,
            Golden::Accepted { .. } => 3,
            Golden::NotCompared(_) => 4,
        }] += 1;
    }
    if n.iter().sum::<usize>() == 0 {
        return None;
    }
    let mut s = format!("golden {}: {} same", dir.display(), n[0]);
    for (count, word) in [(n[1], "CHANGED"), (n[2], "NEW"), (n[3], "accepted (written)"), (n[4], "not compared")] {
        if count > 0 {
            let _ = write!(s, ", {count} {word}");
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_insta_snapshot_body_starts_after_the_second_dashes_line() {
        let f = "---\nsource: tests/scenarios.rs\ndescription: \"x — y\"\n---\n== step 1\n-- connected\n";
        assert_eq!(snapshot_body(f), Some("== step 1\n-- connected\n"));
        assert_eq!(snapshot_body("== step 1\n"), None);
        assert_eq!(snapshot_body("---\nsource: x\n"), None);
    }

    #[test]
    fn a_written_snapshot_reads_back_as_the_same_text() {
        let body = "== step 1: call\nharness→testee {\"a\":1}\n";
        let f = snapshot_file("calls.echo", "echo \"quoted\"", body);
        assert!(
            f.starts_with("---\nsource: protomcp-conform\ndescription: \"calls.echo — echo \\\"quoted\\\"\"\n---\n")
        );
        assert_eq!(compare(snapshot_body(&f).unwrap(), body), None);
    }

    #[test]
    fn a_failed_write_is_left_out_and_a_failed_read_is_the_end_of_file_it_stands_for() {
        let a = "== step 4: send\nharness→testee {}\n== step 5: expect_nothing\ntestee→harness stream error: socket: Connection reset by peer (os error 104)\n";
        let b = "== step 4: send\nharness→testee {}\ntestee→harness stream error: write: Broken pipe (os error 32)\n== step 5: expect_nothing\ntestee→harness end of file\ntestee→harness stream error: socket: reset\n";
        assert_eq!(fold_connection_errors(a), fold_connection_errors(b));
        assert!(fold_connection_errors(a).ends_with("== step 5: expect_nothing\ntestee→harness end of file\n"));
        // A new connection can end again.
        let c = "testee→harness end of file\n-- connected\ntestee→harness stream error: socket: reset\n";
        assert_eq!(fold_connection_errors(c).matches("end of file").count(), 2);
    }

    #[test]
    fn trailing_newlines_and_crlf_do_not_count_but_a_changed_byte_does() {
        assert_eq!(compare("a\r\nb\n\n", "a\nb"), None);
        let d = compare("a\nb\nc\n", "a\nB\nc\n").expect("a diff");
        assert!(d.contains("--- golden") && d.contains("+++ this run"), "{d}");
        assert!(d.contains("-b\n") && d.contains("+B\n"), "{d}");
    }
}
