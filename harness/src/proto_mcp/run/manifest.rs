//! The target manifest (`proto-mcp.toml`): command, safe tool, known failures.

use super::{BTreeMap, KnownFailure, Path, SafeTool, Scenario, Target, pm};

/// The manifest of a server directory (`--server DIR`): `DIR/proto-mcp.toml`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile {
    /// argv; `${VAR}` is replaced from the environment, `{self}` by the harness's own binary, a
    /// relative path that starts with `./` is resolved against DIR.
    command: Vec<String>,
    #[serde(default)]
    features: Vec<String>,
    #[serde(default)]
    safe_tool: Option<SafeToolFile>,
    #[serde(default)]
    accepts_2gib_frames: bool,
    /// Baseline: scenario id → the PM requirement(s) broken and what the server sends.
    #[serde(default)]
    known_failures: BTreeMap<String, KnownFile>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SafeToolFile {
    name: String,
    type_url: String,
    value_hex: String,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KnownFile {
    requirement: Vec<String>,
    /// `step N` (or `end`: the SHOULD deviations gathered over the run); none: any check.
    #[serde(default)]
    check: Option<String>,
    reason: String,
    #[serde(default)]
    intermittent: bool,
}

/// Why a manifest could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ManifestError {
    pub path: String,
    pub message: String,
}

/// The manifest file of a server directory.
pub const MANIFEST: &str = "proto-mcp.toml";

/// Reads `dir/proto-mcp.toml` into a target; `self_exe` replaces `{self}`.
pub fn load_manifest(dir: &Path, self_exe: &Path) -> Result<Target, ManifestError> {
    let path = dir.join(MANIFEST);
    let err = |message: String| ManifestError { path: path.display().to_string(), message };
    let text = std::fs::read_to_string(&path).map_err(|e| err(e.to_string()))?;
    let m: ManifestFile = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
    let mut command = Vec::new();
    for (i, a) in m.command.iter().enumerate() {
        let mut a = a.replace("{self}", &self_exe.display().to_string());
        while let Some(start) = a.find("${") {
            let end = a[start..].find('}').ok_or_else(|| err(format!("unterminated ${{ in {a:?}")))? + start;
            let name = &a[start + 2..end];
            let value = std::env::var(name).map_err(|_| err(format!("command needs ${name}, which is not set")))?;
            a.replace_range(start..=end, &value);
        }
        if i == 0 && a.starts_with("./") {
            a = dir.join(&a[2..]).display().to_string();
        }
        command.push(a);
    }
    if command.is_empty() {
        return Err(err("command is empty".into()));
    }
    if let Some(f) = m.features.iter().find(|f| !pm::FEATURES.contains(&f.as_str())) {
        return Err(err(format!("unknown feature `{f}`")));
    }
    let safe_tool = match m.safe_tool {
        Some(t) => Some(SafeTool {
            name: t.name,
            type_url: t.type_url,
            value: protomcp_proto::dynamic::hex_decode(&t.value_hex)
                .map_err(|e| err(format!("safe_tool.value_hex: {e}")))?,
        }),
        None => None,
    };
    let mut known_failures = BTreeMap::new();
    for (id, k) in m.known_failures {
        if k.requirement.is_empty() || k.reason.trim().is_empty() {
            return Err(err(format!("known_failures.{id}: name the requirement(s) and what the server sends")));
        }
        if let Some(bad) = k.requirement.iter().find(|r| pm::get(r).is_none()) {
            return Err(err(format!("known_failures.{id}: `{bad}` is not a PM requirement")));
        }
        let check = match &k.check {
            Some(c) => Some(c.parse().map_err(|e| err(format!("known_failures.{id}: {e}")))?),
            None => None,
        };
        let entry = KnownFailure {
            requirement: k.requirement,
            check,
            reason: k.reason,
            intermittent: k.intermittent,
            anywhere: false,
            at: String::new(),
        };
        known_failures.insert(id, vec![entry]);
    }
    Ok(Target {
        command,
        declared: m.features.into_iter().collect(),
        safe_tool,
        known_failures,
        accepts_2gib: m.accepts_2gib_frames,
        transcripts: None,
    })
}

/// Why a `--safe-tool` value does not read.
#[derive(Debug, thiserror::Error)]
pub enum SafeToolError {
    #[error("expected NAME=TYPE_URL=HEX")]
    Form,
    #[error("HEX: {0}")]
    Hex(#[from] protomcp_proto::dynamic::HexError),
}

/// Parses `NAME=TYPE_URL=HEX` (the `--safe-tool` option).
pub fn parse_safe_tool(s: &str) -> Result<SafeTool, SafeToolError> {
    let mut it = s.splitn(3, '=');
    let (Some(name), Some(type_url), Some(value)) = (it.next(), it.next(), it.next()) else {
        return Err(SafeToolError::Form);
    };
    Ok(SafeTool { name: name.into(), type_url: type_url.into(), value: protomcp_proto::dynamic::hex_decode(value)? })
}

/// Known-failures entries that name a scenario the catalogue does not have.
pub fn stale_entries<'a>(target: &'a Target, scenarios: &[Scenario]) -> Vec<&'a str> {
    target.known_failures.keys().filter(|k| !scenarios.iter().any(|s| &s.id == *k)).map(String::as_str).collect()
}
