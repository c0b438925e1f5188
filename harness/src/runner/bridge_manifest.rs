//! `protomcp-conform.toml` of a bridge under test (`--bridge DIR`): the bridge command with the
//! placeholders of [`super::bridge::PLACEHOLDERS`], the transport, and the same bookkeeping keys
//! as an SDK's manifest. Relative paths are taken from the manifest's directory, which is also
//! the bridge's working directory. Errors name `file:line:col`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::bridge::{BridgeTransport, DEFAULT_URL};
use super::target::{KnownFailures, Target, TargetError, TargetKind, load_known_failures};
use crate::requirements::{Party, features};

/// The manifest's file name.
pub const FILE: &str = "protomcp-conform.toml";

/// A command: one string split on whitespace, or an array of arguments.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum CommandLine {
    Line(String),
    Args(Vec<String>),
}

impl CommandLine {
    pub fn argv(&self) -> Vec<String> {
        match self {
            CommandLine::Line(l) => l.split_whitespace().map(str::to_owned).collect(),
            CommandLine::Args(a) => a.clone(),
        }
    }
}

/// `protomcp-conform.toml` of a bridge.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeManifest {
    /// The bridge command with the placeholders of [`super::bridge::PLACEHOLDERS`] (`{mock}`
    /// above all; `{port}` for http; `{exe}` for this binary).
    pub bridge: Spanned<CommandLine>,
    /// `stdio` (default) or `http`.
    #[serde(default)]
    pub transport: Option<Spanned<String>>,
    /// With `transport = "http"`: the endpoint (default `http://127.0.0.1:{port}/mcp`).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// Bridge features claimed (`http`, `subscribe`, `watch`); `http` is implied by the transport.
    #[serde(default)]
    pub features: Vec<Spanned<String>>,
    /// Known-failures file, relative to the manifest's directory.
    #[serde(default)]
    pub known_failures: Option<Spanned<PathBuf>>,
    /// Extra environment of the bridge (and so of the mock).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Shown in reports.
    #[serde(default)]
    pub name: Option<String>,
    /// Run once in the manifest's directory before the scenarios.
    #[serde(default)]
    pub build: Option<CommandLine>,
    /// Scenarios the bridge cannot be driven through: scenario id → reason.
    #[serde(default)]
    pub skip: BTreeMap<String, String>,
}

/// `file:line:col` of byte `offset` in `text` (1-based).
fn at(path: &Path, text: &str, offset: usize) -> String {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{}:{line}:{col}", path.display())
}

/// A TOML parse error, placed at `file:line:col`.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error) -> TargetError {
    let message = e.message().trim().to_owned();
    match e.span() {
        Some(span) => TargetError::Invalid { at: at(path, text, span.start), message },
        None => TargetError::Invalid { at: path.display().to_string(), message },
    }
}

/// Whether `dir` holds a bridge manifest.
pub fn is_manifest_dir(dir: &Path) -> bool {
    dir.is_dir() && dir.join(FILE).is_file()
}

/// Reads `dir/protomcp-conform.toml` into a bridge target; `exe` runs the mock.
pub fn load_target(dir: &Path, exe: PathBuf) -> Result<Target, TargetError> {
    let dir = &std::path::absolute(dir).map_err(TargetError::read(dir))?;
    let path = dir.join(FILE);
    let text = std::fs::read_to_string(&path).map_err(TargetError::read(&path))?;
    let m: BridgeManifest = toml::from_str(&text).map_err(|e| toml_error(&path, &text, &e))?;
    let err = |offset: usize, message: String| TargetError::Invalid { at: at(&path, &text, offset), message };
    let mut argv = m.bridge.get_ref().argv();
    if argv.is_empty() {
        return Err(err(m.bridge.span().start, "`bridge` is empty".into()));
    }
    if argv[0].contains('/') && !argv[0].contains('{') && !Path::new(&argv[0]).is_absolute() {
        argv[0] = dir.join(&argv[0]).display().to_string();
    }
    let transport = match m.transport.as_ref().map(|t| (t.get_ref().as_str(), t.span().start)) {
        None | Some(("stdio", _)) => {
            if let Some(u) = &m.url {
                return Err(err(u.span().start, "`url` needs transport = \"http\"".into()));
            }
            BridgeTransport::Stdio
        }
        Some(("http", _)) => {
            let url = m.url.as_ref().map_or(DEFAULT_URL.to_owned(), |u| u.get_ref().clone());
            let probe = url.replace("{port}", "1");
            if let Err(e) = crate::host::session::Endpoint::parse(&probe) {
                let at = m.url.as_ref().map_or(0, |u| u.span().start);
                return Err(err(at, format!("`url`: {e}")));
            }
            BridgeTransport::Http { url }
        }
        Some((other, offset)) => return Err(err(offset, format!("unknown transport `{other}`; valid: stdio, http"))),
    };
    let known = features(Party::Bridge);
    let mut claimed = Vec::new();
    for f in &m.features {
        if !known.contains(&f.get_ref().as_str()) {
            return Err(err(
                f.span().start,
                format!("unknown bridge feature `{}`; valid: {}", f.get_ref(), known.join(", ")),
            ));
        }
        claimed.push(f.get_ref().clone());
    }
    if matches!(transport, BridgeTransport::Http { .. }) && !claimed.iter().any(|f| f == "http") {
        claimed.push("http".into());
    }
    let known_failures = match &m.known_failures {
        Some(p) => load_known_failures(&dir.join(p.get_ref()))
            .map_err(|e| err(p.span().start, format!("known_failures: {e}")))?,
        None => KnownFailures::new(),
    };
    let name = m.name.clone().unwrap_or_else(|| dir.display().to_string());
    let mut t = Target::bridge(argv, exe);
    t.kind = match t.kind {
        TargetKind::Bridge { argv, exe, .. } => TargetKind::Bridge { argv, exe, transport },
        k => k,
    };
    t.name = name;
    t.features = claimed;
    t.known_failures = known_failures;
    t.env = m.env.into_iter().map(|(k, v)| (k, Some(v))).collect();
    t.cwd = Some(dir.to_path_buf());
    t.skip = m.skip;
    t.build = m.build.map(|b| b.argv()).filter(|b| !b.is_empty());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Target, String> {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), text).unwrap();
        load_target(d.path(), "/x/protomcp-conform".into())
            .map_err(|e| e.to_string().replace(&d.path().display().to_string(), "D"))
    }

    #[test]
    fn a_full_manifest() {
        let t = load(
            "name = \"ref\"\nbridge = \"bin/b --port {port} -- {mock}\"\ntransport = \"http\"\nenv = {A = \"1\"}\nskip = {\"x.y\" = \"why\"}\n",
        )
        .unwrap();
        let TargetKind::Bridge { argv, transport, .. } = &t.kind else { panic!() };
        assert!(argv[0].ends_with("/bin/b") && Path::new(&argv[0]).is_absolute(), "{argv:?}");
        assert_eq!(argv[1..], ["--port", "{port}", "--", "{mock}"]);
        assert_eq!(transport, &BridgeTransport::Http { url: DEFAULT_URL.into() });
        assert_eq!(t.features, vec!["http".to_owned()]);
        assert_eq!(t.name, "ref");
        assert_eq!(t.env.get("A"), Some(&Some("1".into())));
        assert_eq!(t.skip.get("x.y").map(String::as_str), Some("why"));
        let t = load("bridge = [\"/b\", \"{mock}\"]\n").unwrap();
        let TargetKind::Bridge { argv, transport, .. } = &t.kind else { panic!() };
        assert_eq!(argv, &["/b", "{mock}"]);
        assert_eq!(transport, &BridgeTransport::Stdio);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        assert_eq!(
            load("bridge = \"/b {mock}\"\ntransport = \"carrier-pigeon\"\n").unwrap_err(),
            "D/protomcp-conform.toml:2:13: unknown transport `carrier-pigeon`; valid: stdio, http"
        );
        let e = load("bridge = \"/b\"\nbridg = 1\n").unwrap_err();
        assert!(e.starts_with("D/protomcp-conform.toml:2:1: unknown field `bridg`"), "{e}");
        let e = load("bridge = \"/b\"\nurl = \"http://x:{port}/\"\n").unwrap_err();
        assert!(e.starts_with("D/protomcp-conform.toml:2:7: `url` needs"), "{e}");
        let e = load("bridge = \"\"\n").unwrap_err();
        assert!(e.starts_with("D/protomcp-conform.toml:1:10: `bridge` is empty"), "{e}");
        let e = load("bridge = \"/b\"\nfeatures = [\"teleport\"]\n").unwrap_err();
        assert!(e.starts_with("D/protomcp-conform.toml:2:13: unknown bridge feature"), "{e}");
        let e = load("bridge = \"/b\" x\n").unwrap_err();
        assert!(e.starts_with("D/protomcp-conform.toml:1:"), "{e}");
    }
}
