//! The targets of a run: from the command line, the default sides (the reference testee and
//! the reference bridge), and the target options written again for re-run commands.

use super::{
    Arc, Context, Path, PathBuf, Result, RunArgs, Scenario, Target, bail, bundled, runner, scenario, shell_quote,
};

/// The target options, as they would be written again (for re-run commands).
pub(super) fn target_args(a: &RunArgs) -> String {
    let mut v = Vec::new();
    if let Some(d) = &a.sdk {
        v.push(format!("--sdk {}", shell_quote(&d.display().to_string())));
    }
    if let Some(t) = &a.testee {
        v.push(format!("--testee {}", shell_quote(t)));
    }
    if let Some(b) = &a.bridge {
        v.push(format!("--bridge {}", shell_quote(b)));
    }
    if let Some(t) = &a.bridge_transport {
        v.push(format!("--bridge-transport {t}"));
    }
    if let Some(u) = &a.bridge_url {
        v.push(format!("--bridge-url {}", shell_quote(u)));
    }
    if let Some(f) = &a.features {
        v.push(format!("--features {}", shell_quote(&f.join(","))));
    }
    if let Some(k) = &a.known_failures {
        v.push(format!("--known-failures {}", shell_quote(&k.display().to_string())));
    }
    for p in &a.sel.scenarios {
        v.push(format!("--scenarios {}", shell_quote(&p.display().to_string())));
    }
    v.join(" ")
}

/// The target of `--sdk DIR`: its manifest, or the bundled testee built against a checkout.
pub(crate) fn sdk_target(dir: &Path) -> Result<Target> {
    let cache = runner::checkout::cache_root();
    let t = runner::checkout::sdk_target(dir, bundled::TESTEES, &cache)?;
    if !dir.join("protomcp-conform.toml").is_file() {
        eprintln!(
            "protomcp-conform: {}: the bundled testee, written to {}",
            t.name,
            t.cwd.as_deref().unwrap_or(dir).display()
        );
    }
    Ok(t)
}

/// The target of `--testee 'CMD ARGS…'` (split on whitespace), claiming `features` or every feature.
pub(crate) fn command_target(cmd: &str, features: Option<&[String]>) -> Result<Target> {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    if argv.is_empty() {
        bail!("--testee: empty command");
    }
    let mut t = Target::command(argv);
    if let Some(f) = features {
        t.features = f.iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    }
    Ok(t)
}

/// Runs the target's build command, if any, reporting it on stderr.
pub(crate) fn build(t: &Target) -> std::result::Result<(), runner::target::TargetError> {
    if let Some(b) = &t.build {
        eprintln!("protomcp-conform: {}: building: {}", t.name, b.join(" "));
        t.run_build()?;
    }
    Ok(())
}

/// The target of `--bridge CMD|DIR` with `--bridge-transport` and `--bridge-url` (which override a
/// manifest's `transport` and `url`).
pub(crate) fn bridge_target(cmd: &str, transport: Option<&str>, url: Option<&str>) -> Result<Target> {
    use runner::bridge::{BridgeTransport, DEFAULT_URL};
    use runner::{TargetKind, bridge_manifest};
    // A rebuild during the run leaves "/proc/self/exe" naming the old file "… (deleted)"; the
    // new binary at the same path runs the mock and `{exe}` as well.
    let exe = std::env::current_exe().context("locating this binary")?;
    let exe = match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(s) => PathBuf::from(s),
        None => exe,
    };
    let mut t = if bridge_manifest::is_manifest_dir(Path::new(cmd)) {
        bridge_manifest::load_target(Path::new(cmd), exe)?
    } else {
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        if argv.is_empty() {
            bail!("--bridge: empty command");
        }
        if argv.len() == 1 && Path::new(cmd).is_dir() {
            bail!("--bridge {cmd}: a directory without {}", bridge_manifest::FILE);
        }
        Target::bridge(argv, exe)
    };
    let TargetKind::Bridge { transport: current, .. } = &mut t.kind else { bail!("--bridge: not a bridge target") };
    let current_url = match current {
        BridgeTransport::Http { url } => Some(url.clone()),
        BridgeTransport::Stdio => None,
    };
    let chosen = match (transport, url) {
        (Some("stdio"), Some(_)) => bail!("--bridge-url needs --bridge-transport http"),
        (Some("stdio"), None) => BridgeTransport::Stdio,
        (Some(_), u) | (None, u @ Some(_)) => BridgeTransport::Http {
            url: u.map(str::to_owned).or(current_url).unwrap_or_else(|| DEFAULT_URL.to_owned()),
        },
        (None, None) => current.clone(),
    };
    if let BridgeTransport::Http { url } = &chosen {
        protomcp_harness::host::session::Endpoint::parse(&url.replace("{port}", "1"))
            .map_err(|e| anyhow::anyhow!("--bridge-url: {e}"))?;
    }
    *current = chosen;
    let http = matches!(current, BridgeTransport::Http { .. });
    if http && !t.features.iter().any(|f| f == "http") {
        t.features.push("http".into());
    }
    Ok(t)
}

pub(crate) fn target(a: &RunArgs) -> Result<Target> {
    let mut t = if let Some(dir) = &a.sdk {
        if a.features.is_some() {
            bail!("--features needs --testee or --bridge (a manifest lists its features)");
        }
        sdk_target(dir)?
    } else if let Some(cmd) = &a.bridge {
        let mut t = bridge_target(cmd, a.bridge_transport.as_deref(), a.bridge_url.as_deref())?;
        if let Some(f) = &a.features {
            let known = protomcp_harness::requirements::features(protomcp_harness::requirements::Party::Bridge);
            let mut claimed: Vec<String> = Vec::new();
            for f in f.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
                if !known.contains(&f) {
                    bail!("--features: unknown bridge feature `{f}`; valid: {}", known.join(", "));
                }
                claimed.push(f.to_owned());
            }
            use runner::bridge::BridgeTransport;
            let http = matches!(&t.kind, runner::TargetKind::Bridge { transport: BridgeTransport::Http { .. }, .. });
            if http && !claimed.iter().any(|f| f == "http") {
                claimed.push("http".into());
            }
            t.features = claimed;
        }
        t
    } else if let Some(cmd) = &a.testee {
        command_target(cmd, a.features.as_deref())?
    } else {
        if a.features.is_some() {
            bail!("--features needs --testee or --bridge");
        }
        Target::reference(std::env::current_exe().context("locating this binary")?)
    };
    if let Some(k) = &a.known_failures {
        t.known_failures = runner::load_known_failures(k)?;
    }
    Ok(t)
}

/// One side of a run: a target and the scenarios it runs.
pub(super) struct Side {
    /// What the side is, in a run with more than one (`tool-process side: the TP catalogue`).
    pub(super) label: &'static str,
    pub(super) target: Arc<Target>,
    pub(super) scenarios: Arc<Vec<Scenario>>,
}

/// The reference bridge as the default run drives it over stdio, with the bundled mock: the same
/// bridge as `--bridge harness/bridges/reference` (a test checks the two agree), with the known
/// failures of harness/data/reference-bridge-known-failures.yaml (bundled).
const REFERENCE_BRIDGE: &str = "{exe} bridge --call-timeout 3s --watch {dir}/watched --socket {socket} -- {mock}";
const REFERENCE_BRIDGE_NAME: &str = "reference bridge (stdio)";
const REFERENCE_BRIDGE_FEATURES: &[&str] = &["subscribe", "watch", "socket"];
const REFERENCE_BRIDGE_KNOWN_FAILURES: &str = include_str!("../../harness/data/reference-bridge-known-failures.yaml");

/// The bridge side of the default run.
pub(crate) fn reference_bridge_target(exe: PathBuf) -> Result<Target> {
    let argv = REFERENCE_BRIDGE.split_whitespace().map(String::from).collect();
    let mut t = Target::bridge(argv, exe);
    t.name = REFERENCE_BRIDGE_NAME.into();
    t.features = REFERENCE_BRIDGE_FEATURES.iter().map(|f| f.to_string()).collect();
    t.known_failures = runner::target::parse_known_failures(
        Path::new("harness/data/reference-bridge-known-failures.yaml"),
        REFERENCE_BRIDGE_KNOWN_FAILURES,
    )?;
    Ok(t)
}

/// The reference bridge over Streamable HTTP, as `--bridge harness/bridges/reference-http` (a test
/// checks the two agree), with the known failures of
/// harness/data/reference-bridge-http-known-failures.yaml (bundled): the second transport
/// `adequacy --role bridge` runs each fault over.
const REFERENCE_BRIDGE_HTTP: &str = "{exe} bridge --transport http --host 127.0.0.1 --port {port} --call-timeout 3s --watch {dir}/watched --socket {socket} -- {mock}";
const REFERENCE_BRIDGE_HTTP_NAME: &str = "reference bridge (http)";
const REFERENCE_BRIDGE_HTTP_URL: &str = "http://127.0.0.1:{port}/mcp";
const REFERENCE_BRIDGE_HTTP_KNOWN_FAILURES: &str =
    include_str!("../../harness/data/reference-bridge-http-known-failures.yaml");

/// The reference bridge over HTTP (see [`REFERENCE_BRIDGE_HTTP`]).
pub(crate) fn reference_bridge_http_target(exe: PathBuf) -> Result<Target> {
    let mut t = reference_bridge_target(exe)?;
    let runner::TargetKind::Bridge { argv, transport, .. } = &mut t.kind else { unreachable!("a bridge target") };
    *argv = REFERENCE_BRIDGE_HTTP.split_whitespace().map(String::from).collect();
    *transport = runner::target::BridgeTransport::Http { url: REFERENCE_BRIDGE_HTTP_URL.into() };
    t.name = REFERENCE_BRIDGE_HTTP_NAME.into();
    // As for `--bridge harness/bridges/reference-http`: a target driven over HTTP claims `http`.
    t.features.push("http".into());
    t.known_failures = runner::target::parse_known_failures(
        Path::new("harness/data/reference-bridge-http-known-failures.yaml"),
        REFERENCE_BRIDGE_HTTP_KNOWN_FAILURES,
    )?;
    Ok(t)
}

/// The sides of the run: the target given, or by default the tool-process scenarios against
/// the reference testee and the bridge scenarios against the reference bridge.
pub(super) fn sides(a: &RunArgs, selected: Vec<Scenario>) -> Result<Vec<Side>> {
    if a.sdk.is_some() || a.testee.is_some() || a.bridge.is_some() {
        return Ok(vec![Side { label: "", target: Arc::new(target(a)?), scenarios: Arc::new(selected) }]);
    }
    let testee = target(a)?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let mut bridge = reference_bridge_target(exe)?;
    if a.known_failures.is_some() {
        bridge.known_failures = testee.known_failures.clone();
    }
    let (br, tp): (Vec<Scenario>, Vec<Scenario>) = selected.into_iter().partition(|s| s.role == scenario::Role::Bridge);
    let mut out = Vec::new();
    if !tp.is_empty() {
        out.push(Side {
            label: "tool-process side: the TP catalogue",
            target: Arc::new(testee),
            scenarios: Arc::new(tp),
        });
    }
    if !br.is_empty() {
        out.push(Side { label: "bridge side: the BR catalogue", target: Arc::new(bridge), scenarios: Arc::new(br) });
    }
    Ok(out)
}
