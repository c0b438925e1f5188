//! The durations a target's scenarios took in its last run, kept for the order of the next one:
//! a scenario that waited out a deadline against this target (a known failure that times out, a
//! bounded wait the target spends in full) starts first next time, beside the others, instead of
//! stretching the end of the run. Only the order reads them, never a verdict.
//!
//! One file per target name, `<cache root>/durations/<hash>.tsv` (the cache root of
//! [`super::checkout::cache_root`]: `$PROTOMCP_CONFORM_CACHE`, `$XDG_CACHE_HOME/protomcp-conform`
//! or `~/.cache/protomcp-conform`), a line per scenario: `id<TAB>milliseconds`. A file missing or
//! unreadable is an empty table; one that cannot be written is left as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Scenario id → how long its last run took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durations(pub BTreeMap<String, Duration>);

impl Durations {
    /// The table of a target, empty when none was kept.
    pub fn load(target: &str) -> Durations {
        Durations::read(&Durations::path(target))
    }

    /// Keeps `ran` (id, duration of one run) for the target's next run, beside the durations of
    /// the scenarios this run did not run.
    pub fn store(target: &str, ran: impl IntoIterator<Item = (String, Duration)>) {
        let path = Durations::path(target);
        let mut all = Durations::read(&path);
        all.0.extend(ran);
        let _ = all.write(&path);
    }

    /// The file of a target's table.
    pub fn path(target: &str) -> PathBuf {
        file_of(&super::checkout::cache_root(), target)
    }

    /// What the last run of `id` took, if it ran.
    pub fn get(&self, id: &str) -> Option<Duration> {
        self.0.get(id).copied()
    }

    fn read(path: &Path) -> Durations {
        Durations::parse(&std::fs::read_to_string(path).unwrap_or_default())
    }

    /// Lines `id<TAB>ms`; a line that is not one is passed over.
    pub fn parse(text: &str) -> Durations {
        let mut out = BTreeMap::new();
        for line in text.lines() {
            if let Some((id, ms)) = line.split_once('\t')
                && let Ok(ms) = ms.trim().parse::<u64>()
            {
                out.insert(id.to_owned(), Duration::from_millis(ms));
            }
        }
        Durations(out)
    }

    pub fn text(&self) -> String {
        self.0.iter().map(|(id, d)| format!("{id}\t{}\n", d.as_millis())).collect()
    }

    /// Written whole under another name, then renamed: a run reading it meanwhile sees the old
    /// table or the new one.
    fn write(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp =
            dir.join(format!(".{}.{}", std::process::id(), path.file_name().unwrap_or_default().to_string_lossy()));
        std::fs::write(&tmp, self.text())?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// The file of a target's table below the cache root.
fn file_of(root: &Path, target: &str) -> PathBuf {
    let h = target.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    root.join("durations").join(format!("{h:016x}.tsv"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_written_and_read_back_and_bad_lines_are_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = file_of(dir.path(), "python protomcp 0.3.1");
        assert_ne!(path, file_of(dir.path(), "reference testee"), "one file per target");
        assert_eq!(Durations::read(&path), Durations::default(), "no file: an empty table");
        let mut t = Durations::default();
        t.0.insert("cancel.twice".into(), Duration::from_millis(5322));
        t.0.insert("calls.echo".into(), Duration::from_millis(16));
        t.write(&path).unwrap();
        assert_eq!(Durations::read(&path), t);
        let parsed = Durations::parse("calls.echo\t16\nno tab here\nx\tnot a number\n");
        assert_eq!(parsed.get("calls.echo"), Some(Duration::from_millis(16)));
        assert_eq!(parsed.0.len(), 1);
    }
}
