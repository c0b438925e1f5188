//! `--sdk DIR` on an SDK's source checkout (no `protomcp-conform.toml` in it): recognise the SDK,
//! write the bundled testee of its language into a cache directory, point it at the checkout
//! (PYTHONPATH, a cargo path dependency, go.mod replace directives, a build of a copy of the
//! TypeScript package) and return the target.
//!
//! The bundled testee of each language is its directory under `harness/testees/`, embedded into
//! the binary; its manifest supplies the features, the unsupported items and the known failures
//! (those of the published version the testee was written against).

use std::path::{Path, PathBuf};

use super::target::{Manifest, Target};

/// The module path of the Go SDK and of the repository root module it requires.
pub const GO_SDK_MODULE: &str = "github.com/msilverblatt/protomcp/sdk/go";
pub const GO_ROOT_MODULE: &str = "github.com/msilverblatt/protomcp";

/// Why a checkout could not be turned into a target.
#[derive(Debug, thiserror::Error)]
pub enum CheckoutError {
    #[error(
        "{0}: no protomcp-conform.toml, and not a protomcp SDK checkout (looked for pyproject.toml with project \
         `protomcp`, Cargo.toml with package `protomcp`, go.mod of module {GO_SDK_MODULE}, package.json of \
         package `protomcp`){1}"
    )]
    NotAnSdk(PathBuf, String),
    #[error("{path}: {message}")]
    Manifest { path: PathBuf, message: String },
    /// The checkout's (or the generated) `protomcp-conform.toml` as a target.
    #[error(transparent)]
    Target(#[from] super::target::TargetError),
    #[error("no bundled {0} testee in this build of protomcp-conform")]
    NoBundledTestee(&'static str),
    #[error("writing the testee into {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Setup(String),
}

/// A recognised SDK checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sdk {
    /// `import protomcp` works with `root` on PYTHONPATH.
    Python { root: PathBuf },
    /// A cargo package named `protomcp` at `dir`.
    Rust { dir: PathBuf },
    /// The Go SDK module at `dir`; `root_module` is the repository's root module beside it, when
    /// the checkout is a whole repository.
    Go { dir: PathBuf, root_module: Option<PathBuf> },
    /// The npm package `protomcp` (TypeScript sources) at `dir`; `proto` is the protomcp.proto it
    /// loads at run time (its dist/ reads `../../../proto/protomcp.proto`, the repository's).
    TypeScript { dir: PathBuf, proto: Option<PathBuf> },
}

impl Sdk {
    /// The language, as the bundled testee directory is named.
    pub fn language(&self) -> &'static str {
        match self {
            Sdk::Python { .. } => "python",
            Sdk::Rust { .. } => "rust",
            Sdk::Go { .. } => "go",
            Sdk::TypeScript { .. } => "typescript",
        }
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn go_module(gomod: &str) -> Option<&str> {
    gomod.lines().find_map(|l| l.trim().strip_prefix("module ")).map(|m| m.trim().trim_matches('"'))
}

/// Recognises `dir` as a checkout of one of the SDKs.
pub fn detect(dir: &Path) -> Option<Sdk> {
    if let Some(t) = read(&dir.join("pyproject.toml")).and_then(|t| t.parse::<toml::Table>().ok()) {
        let name = t.get("project").and_then(|p| p.get("name")).and_then(|n| n.as_str());
        if name == Some("protomcp") {
            let root = [dir.join("src"), dir.to_path_buf()]
                .into_iter()
                .find(|r| r.join("protomcp/__init__.py").is_file())
                .unwrap_or_else(|| dir.join("src"));
            return Some(Sdk::Python { root });
        }
    }
    if let Some(t) = read(&dir.join("Cargo.toml")).and_then(|t| t.parse::<toml::Table>().ok()) {
        let name = t.get("package").and_then(|p| p.get("name")).and_then(|n| n.as_str());
        if name == Some("protomcp") {
            return Some(Sdk::Rust { dir: dir.to_path_buf() });
        }
    }
    if let Some(m) = read(&dir.join("go.mod"))
        && go_module(&m) == Some(GO_SDK_MODULE)
    {
        // sdk/go inside a whole repository: the root module is two levels up.
        let root = dir.parent().and_then(Path::parent).map(Path::to_path_buf);
        let root_module =
            root.filter(|r| read(&r.join("go.mod")).as_deref().and_then(go_module) == Some(GO_ROOT_MODULE));
        return Some(Sdk::Go { dir: dir.to_path_buf(), root_module });
    }
    if let Some(p) = read(&dir.join("package.json")).and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        && p.get("name").and_then(|n| n.as_str()) == Some("protomcp")
    {
        // sdk/typescript inside a whole repository: the proto directory is two levels up; a
        // package that ships it has it inside.
        let proto = [dir.join("../../proto/protomcp.proto"), dir.join("proto/protomcp.proto")]
            .into_iter()
            .find(|p| p.is_file())
            .map(|p| std::fs::canonicalize(&p).unwrap_or(p));
        return Some(Sdk::TypeScript { dir: dir.to_path_buf(), proto });
    }
    None
}

/// A hint for a directory that holds SDKs below it (the repository root).
fn hint(dir: &Path) -> String {
    let found: Vec<String> = ["sdk/python", "sdk/rust", "sdk/go", "sdk/typescript"]
        .iter()
        .filter(|s| detect(&dir.join(s)).is_some())
        .map(|s| dir.join(s).display().to_string())
        .collect();
    if found.is_empty() { String::new() } else { format!("; SDK checkouts below it: {}", found.join(", ")) }
}

/// Where built testees are cached: `$PROTOMCP_CONFORM_CACHE`, else `$XDG_CACHE_HOME/protomcp-conform`,
/// else `~/.cache/protomcp-conform`.
pub fn cache_root() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("PROTOMCP_CONFORM_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("protomcp-conform")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/protomcp-conform")))
        .unwrap_or_else(|| std::env::temp_dir().join("protomcp-conform-cache"))
}

/// FNV-1a, for a stable directory name per checkout.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// Writes the bundled testee of `sdk`'s language (`files`: path below `harness/testees/<lang>/`,
/// content) into a cache directory, points it at the checkout and loads it as a target whose
/// `build` prepares it.
pub fn prepare(sdk: &Sdk, files: &[(&str, &[u8])], cache: &Path) -> Result<Target, CheckoutError> {
    let lang = sdk.language();
    let prefix = format!("{lang}/");
    let mine: Vec<(&str, &[u8])> = files.iter().filter_map(|(p, c)| p.strip_prefix(&prefix).map(|p| (p, *c))).collect();
    if !mine.iter().any(|(p, _)| *p == "protomcp-conform.toml") {
        return Err(CheckoutError::NoBundledTestee(lang));
    }
    let src = match sdk {
        Sdk::Python { root } => root,
        Sdk::Rust { dir } | Sdk::Go { dir, .. } | Sdk::TypeScript { dir, .. } => dir,
    };
    let src = std::fs::canonicalize(src).unwrap_or_else(|_| src.clone());
    let dir = cache.join(format!("{lang}-{:016x}", fnv(&src.display().to_string())));
    for (rel, content) in &mine {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        std::fs::write(&p, content).map_err(io(&p))?;
    }
    let extra = manifest_additions(sdk, &dir)?;
    merge_into_manifest(&dir.join("protomcp-conform.toml"), &extra)?;
    let mut target = Manifest::load_target(&dir)?;
    target.name = format!("{} testee on the checkout {}", lang, src.display());
    Ok(target)
}

/// The error of an I/O call on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckoutError + use<> {
    let path = path.to_path_buf();
    move |source| CheckoutError::Io { path, source }
}

/// What the bundled testee's manifest in `dir` gains for the checkout `sdk` (TOML lines): the
/// build step that builds the testee against the checkout, and the environment it needs.
fn manifest_additions(sdk: &Sdk, dir: &Path) -> Result<String, CheckoutError> {
    let mut extra = String::new();
    match sdk {
        Sdk::Python { root } => {
            // The interpreter is the manifest's; PYTHONPATH puts the checkout first. The build
            // step checks that the import resolves to the checkout (dependencies installed).
            let check = format!(
                "import os, sys, protomcp; f = os.path.realpath(protomcp.__file__); r = os.path.realpath({root:?}); \
                 sys.exit(0 if f.startswith(r + os.sep) else 'protomcp was imported from ' + f + ', not from the checkout ' + r)",
                root = root.display().to_string()
            );
            extra.push_str(&format!("build = [\"python3\", \"-c\", {}]\n", toml_str(&check)));
            extra.push_str(&format!("env.PYTHONPATH = {}\n", toml_str(&root.display().to_string())));
        }
        Sdk::Rust { dir: sdk_dir } => {
            let cargo = dir.join("Cargo.toml");
            let text = std::fs::read_to_string(&cargo).map_err(io(&cargo))?;
            let mut t: toml::Table =
                text.parse().map_err(|e| CheckoutError::Manifest { path: cargo.clone(), message: format!("{e}") })?;
            let deps = t
                .get_mut("dependencies")
                .and_then(|d| d.as_table_mut())
                .filter(|d| d.contains_key("protomcp"))
                .ok_or_else(|| {
                    CheckoutError::Setup(format!("{}: no `protomcp` dependency to replace", cargo.display()))
                })?;
            let mut path = toml::Table::new();
            path.insert("path".into(), toml::Value::String(sdk_dir.display().to_string()));
            deps.insert("protomcp".into(), toml::Value::Table(path));
            std::fs::write(&cargo, t.to_string()).map_err(io(&cargo))?;
        }
        Sdk::Go { dir: sdk_dir, root_module } => {
            let mut replaces = vec![format!("-replace={GO_SDK_MODULE}={}", sdk_dir.display())];
            if let Some(r) = root_module {
                replaces.push(format!("-replace={GO_ROOT_MODULE}={}", r.display()));
            }
            let mut script = String::from("set -e; go mod edit");
            for r in &replaces {
                script.push(' ');
                script.push_str(&super::shell_quote(r));
            }
            script.push_str("; go mod tidy; ");
            let m = read(&dir.join("protomcp-conform.toml")).unwrap_or_default();
            let build = m
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("build").and_then(|b| b.as_array()).cloned())
                .map(|b| b.iter().filter_map(|v| v.as_str()).map(super::shell_quote).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| "go build -o bin/testee .".into());
            script.push_str(&build);
            extra.push_str(&format!("build = [\"sh\", \"-c\", {}]\n", toml_str(&script)));
        }
        Sdk::TypeScript { dir: sdk_dir, proto } => {
            // npm and tsc write beside the sources and the checkout may be read-only: the build
            // step refreshes a copy in the cache (its node_modules kept while package-lock.json is
            // unchanged), builds it with `npm ci` (or `npm install` without a lock file) and tsc,
            // then compiles the testee against it (the manifest's build.sh, PROTOMCP_TS_SDK).
            let proto = proto.as_ref().ok_or_else(|| {
                CheckoutError::Setup(format!(
                    "{}: protomcp.proto not found (neither ../../proto/ of a repository checkout nor proto/ \
                     inside the package); the SDK loads it at run time",
                    sdk_dir.display()
                ))
            })?;
            let base = dir.join("sdk-build");
            let pkg = base.join("sdk/typescript");
            let q = |p: &Path| super::shell_quote(&p.display().to_string());
            let npm = "--no-audit --no-fund --no-update-notifier --loglevel=error";
            let script = format!(
                "set -e; src={src}; pkg={pkg}; mkdir -p \"$pkg\" {protodir}; \
                 if [ -d \"$pkg/node_modules\" ] && cmp -s \"$src/package-lock.json\" \"$pkg/package-lock.json\"; \
                 then keep=1; else keep=; rm -rf \"$pkg/node_modules\"; fi; \
                 find \"$pkg\" -mindepth 1 -maxdepth 1 ! -name node_modules -exec rm -rf {{}} +; \
                 (cd \"$src\" && tar -cf - --exclude=./node_modules --exclude=./dist .) | (cd \"$pkg\" && tar -xf -); \
                 chmod -R u+w \"$pkg\"; cp {proto} {protodir}/protomcp.proto; \
                 if [ -z \"$keep\" ]; then if [ -f \"$pkg/package-lock.json\" ]; then (cd \"$pkg\" && npm ci {npm}); \
                 else (cd \"$pkg\" && npm install {npm}); fi; fi; \
                 (cd \"$pkg\" && node node_modules/typescript/bin/tsc); sh build.sh",
                src = q(sdk_dir),
                pkg = q(&pkg),
                protodir = q(&base.join("proto")),
                proto = q(proto),
            );
            extra.push_str(&format!("build = [\"sh\", \"-c\", {}]\n", toml_str(&script)));
            extra.push_str(&format!("env.PROTOMCP_TS_SDK = {}\n", toml_str(&pkg.display().to_string())));
        }
    }
    Ok(extra)
}

/// Merges `extra` (TOML lines; `env` tables merged key by key) into the manifest at
/// `manifest_path`.
fn merge_into_manifest(manifest_path: &Path, extra: &str) -> Result<(), CheckoutError> {
    if !extra.is_empty() {
        let text = std::fs::read_to_string(manifest_path).map_err(io(manifest_path))?;
        let mut t: toml::Table = text
            .parse()
            .map_err(|e| CheckoutError::Manifest { path: manifest_path.to_path_buf(), message: format!("{e}") })?;
        let over: toml::Table = extra.parse().map_err(|e| CheckoutError::Setup(format!("internal: {e}")))?;
        for (k, v) in over {
            match (k.as_str(), v) {
                ("env", toml::Value::Table(e)) => {
                    let env = t.entry("env").or_insert_with(|| toml::Value::Table(Default::default()));
                    if let Some(env) = env.as_table_mut() {
                        env.extend(e);
                    }
                }
                (_, v) => {
                    t.insert(k, v);
                }
            }
        }
        std::fs::write(manifest_path, t.to_string()).map_err(io(manifest_path))?;
    }
    Ok(())
}

/// The target of `--sdk DIR`: its manifest when it has one, else the bundled testee built against
/// the checkout in `cache`.
pub fn sdk_target(dir: &Path, files: &[(&str, &[u8])], cache: &Path) -> Result<Target, CheckoutError> {
    if dir.join("protomcp-conform.toml").is_file() {
        return Ok(Manifest::load_target(dir)?);
    }
    // Absolute: the testee is built and run in the cache directory.
    let dir = &std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let sdk = detect(dir).ok_or_else(|| CheckoutError::NotAnSdk(dir.to_path_buf(), hint(dir)))?;
    prepare(&sdk, files, cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    const BUNDLE: &[(&str, &[u8])] = &[
        ("python/protomcp-conform.toml", b"command = [\"python3\", \"testee.py\"]\nfeatures = [\"hidden\"]\n"),
        ("python/testee.py", b"print('hi')\n"),
        ("rust/protomcp-conform.toml", b"build = [\"cargo\", \"build\"]\ncommand = [\"target/debug/t\"]\n"),
        ("rust/Cargo.toml", b"[package]\nname = \"t\"\n\n[dependencies]\nprotomcp = \"=0.3.1\"\nserde = \"1\"\n"),
        (
            "go/protomcp-conform.toml",
            b"build = [\"go\", \"build\", \"-o\", \"bin/testee\", \".\"]\ncommand = [\"./bin/testee\"]\n",
        ),
        ("go/go.mod", b"module t\n"),
        (
            "typescript/protomcp-conform.toml",
            b"build = [\"sh\", \"build.sh\"]\ncommand = [\"node\", \"target/testee.js\"]\n",
        ),
        ("typescript/build.sh", b"exit 0\n"),
    ];

    #[test]
    fn each_sdk_layout_is_recognised_and_others_are_not() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(&r.join("go.mod"), "module github.com/msilverblatt/protomcp\n");
        write(&r.join("sdk/python/pyproject.toml"), "[project]\nname = \"protomcp\"\n");
        write(&r.join("sdk/python/src/protomcp/__init__.py"), "");
        write(&r.join("sdk/rust/Cargo.toml"), "[package]\nname = \"protomcp\"\nversion = \"0.3.1\"\n");
        write(&r.join("sdk/go/go.mod"), "module github.com/msilverblatt/protomcp/sdk/go\n\ngo 1.25\n");
        write(&r.join("sdk/typescript/package.json"), "{\"name\": \"protomcp\", \"version\": \"0.3.0\"}");
        write(&r.join("proto/protomcp.proto"), "syntax = \"proto3\";\n");
        write(&r.join("other/pyproject.toml"), "[project]\nname = \"protomcp-extras\"\n");
        write(&r.join("other/package.json"), "{\"name\": \"protomcp-examples\"}");
        assert_eq!(detect(&r.join("sdk/python")), Some(Sdk::Python { root: r.join("sdk/python/src") }));
        assert_eq!(detect(&r.join("sdk/rust")), Some(Sdk::Rust { dir: r.join("sdk/rust") }));
        assert_eq!(
            detect(&r.join("sdk/go")),
            Some(Sdk::Go { dir: r.join("sdk/go"), root_module: Some(r.to_path_buf()) })
        );
        assert_eq!(
            detect(&r.join("sdk/typescript")),
            Some(Sdk::TypeScript {
                dir: r.join("sdk/typescript"),
                proto: Some(std::fs::canonicalize(r.join("proto/protomcp.proto")).unwrap())
            })
        );
        assert_eq!(detect(&r.join("other")), None);
        let e = sdk_target(r, BUNDLE, &r.join("cache")).unwrap_err().to_string();
        assert!(e.contains("not a protomcp SDK checkout") && e.contains("sdk/python") && e.contains("sdk/go"), "{e}");
        assert!(e.contains("sdk/typescript"), "{e}");
    }

    #[test]
    fn the_bundled_testee_is_pointed_at_the_checkout() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(&r.join("py/pyproject.toml"), "[project]\nname = \"protomcp\"\n");
        write(&r.join("py/protomcp/__init__.py"), "");
        write(&r.join("rs/Cargo.toml"), "[package]\nname = \"protomcp\"\n");
        write(&r.join("go/go.mod"), "module github.com/msilverblatt/protomcp/sdk/go\n");
        let cache = r.join("cache");

        let t = sdk_target(&r.join("py"), BUNDLE, &cache).unwrap();
        assert_eq!(t.env.get("PYTHONPATH"), Some(&Some(r.join("py").display().to_string())));
        assert_eq!(t.features, ["hidden"]);
        assert_eq!(t.build.as_ref().unwrap()[0], "python3");
        assert!(t.cwd.as_ref().unwrap().join("testee.py").is_file());

        let t = sdk_target(&r.join("rs"), BUNDLE, &cache).unwrap();
        let cargo = std::fs::read_to_string(t.cwd.as_ref().unwrap().join("Cargo.toml")).unwrap();
        let parsed: toml::Table = cargo.parse().unwrap();
        let dep = &parsed["dependencies"]["protomcp"];
        assert_eq!(dep["path"].as_str(), Some(r.join("rs").display().to_string().as_str()), "{cargo}");
        assert_eq!(parsed["dependencies"]["serde"].as_str(), Some("1"));

        let t = sdk_target(&r.join("go"), BUNDLE, &cache).unwrap();
        let b = t.build.unwrap();
        assert_eq!(b[..2], ["sh", "-c"]);
        assert!(b[2].contains(&format!("-replace={GO_SDK_MODULE}={}", r.join("go").display())), "{}", b[2]);
        assert!(b[2].ends_with("go build -o bin/testee ."), "{}", b[2]);
    }

    #[test]
    fn a_typescript_checkout_is_built_in_a_copy_inside_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(&r.join("repo/sdk/typescript/package.json"), "{\"name\": \"protomcp\"}");
        write(&r.join("repo/proto/protomcp.proto"), "syntax = \"proto3\";\n");
        write(&r.join("bare/package.json"), "{\"name\": \"protomcp\"}");
        let cache = r.join("cache");

        let t = sdk_target(&r.join("repo/sdk/typescript"), BUNDLE, &cache).unwrap();
        let dir = t.cwd.clone().unwrap();
        assert!(dir.starts_with(&cache), "{}", dir.display());
        assert!(dir.join("build.sh").is_file());
        let pkg = dir.join("sdk-build/sdk/typescript");
        assert_eq!(t.env.get("PROTOMCP_TS_SDK"), Some(&Some(pkg.display().to_string())));
        let b = t.build.unwrap();
        assert_eq!(b[..2], ["sh", "-c"]);
        let src = std::fs::canonicalize(r.join("repo/sdk/typescript")).unwrap();
        assert!(b[2].contains(&format!("src={}", src.display())), "{}", b[2]);
        assert!(b[2].contains("npm ci") && b[2].contains("typescript/bin/tsc"), "{}", b[2]);
        assert!(b[2].ends_with("sh build.sh"), "{}", b[2]);
        // npm and tsc run in the copy (below the cache directory), never beside the sources.
        assert!(b[2].contains("(cd \"$pkg\" && npm ci") && !b[2].contains("(cd \"$src\" && npm"), "{}", b[2]);
        assert!(b[2].contains(&format!("pkg={}", pkg.display())), "{}", b[2]);
        assert!(t.name.contains("typescript testee on the checkout"), "{}", t.name);

        // Without protomcp.proto the SDK cannot run: said before anything is built.
        let e = sdk_target(&r.join("bare"), BUNDLE, &cache).unwrap_err().to_string();
        assert!(e.contains("protomcp.proto not found"), "{e}");
    }
}
