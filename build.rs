//! Embeds the scenario catalogue (`scenarios/**/*.yaml`) into the binary, so that it runs
//! outside the repository.

use std::path::{Path, PathBuf};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else if name.ends_with(".yaml") || name.ends_with(".yml") {
            out.push(p);
        }
    }
}

/// Source files of a testee: no build output (`target/`, `bin/`, `node_modules/`), nothing hidden, no
/// scripts (but a testee's `build.sh`, its manifest's build step) or docs.
fn walk_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with('.') || ["target", "bin", "__pycache__", "node_modules"].contains(&name) {
            continue;
        }
        if p.is_dir() {
            walk_sources(&p, out);
        } else if [".py", ".rs", ".go", ".ts", ".json", ".toml", ".lock", ".mod", ".sum", ".yaml"]
            .iter()
            .any(|e| name.ends_with(e))
            || name == "build.sh"
        {
            out.push(p);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("scenarios");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &mut files);
    let mut code = String::from(
        "/// The bundled catalogue: (path relative to scenarios/, text).\npub const SCENARIOS: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        code.push_str(&format!("    ({rel:?}, include_str!({:?})),\n", f.display().to_string()));
    }
    code.push_str("];\n");
    // The not-black-box-testable lists read by `coverage`.
    let untestable = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("harness/data/untestable");
    println!("cargo:rerun-if-changed={}", untestable.display());
    let mut lists = Vec::new();
    walk(&untestable, &mut lists);
    code.push_str(
        "/// The not-black-box-testable lists: (file name, text).\npub const UNTESTABLE: &[(&str, &str)] = &[\n",
    );
    for f in &lists {
        println!("cargo:rerun-if-changed={}", f.display());
        let rel = f.strip_prefix(&untestable).unwrap().display().to_string();
        code.push_str(&format!("    ({rel:?}, include_str!({:?})),\n", f.display().to_string()));
    }
    code.push_str("];\n");
    // The bundled SDK testees, for `--sdk` on a source checkout: sources and manifests only.
    let testees = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("harness/testees");
    println!("cargo:rerun-if-changed={}", testees.display());
    code.push_str("/// The bundled SDK testees: (path below harness/testees/, content).\npub const TESTEES: &[(&str, &[u8])] = &[\n");
    for lang in ["python", "rust", "go", "typescript"] {
        let mut files = Vec::new();
        walk_sources(&testees.join(lang), &mut files);
        for f in &files {
            println!("cargo:rerun-if-changed={}", f.display());
            let rel = f.strip_prefix(&testees).unwrap().display().to_string();
            code.push_str(&format!("    ({rel:?}, include_bytes!({:?})),\n", f.display().to_string()));
        }
    }
    code.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("scenarios.rs");
    std::fs::write(out, code).unwrap();
}
