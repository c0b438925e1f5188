//! No module of the workspace's crates imports in a cycle. Modules that share a parent are the
//! layers of that parent: if `a` uses `b` (any path through `crate::`, `super::` or `self::`,
//! outside comments, strings and test modules), `b` must not use `a`, directly or through other
//! siblings. A path to a name that a parent imports from one of its children (`pub use
//! child::Item` in the parent, `super::Item` in a sibling) is a use of that child: there is no
//! way around the check through a re-export. A module using what its ancestors define themselves
//! (a child reading its parent's shared items) or its descendants (a parent using its children)
//! is not a sibling edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `[]` is the crate root, `["runner", "exec"]` is
/// `crate::runner::exec`.
type ModPath = Vec<String>;

/// One use of module `to` by module `from`, at `file:line`.
#[derive(Debug, Clone)]
struct Use {
    from: ModPath,
    to: ModPath,
    file: PathBuf,
    line: usize,
}

/// Every `.rs` file under `src` with the module path it defines.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                let mut child = prefix.to_vec();
                child.push(p.file_name().unwrap().to_string_lossy().into_owned());
                walk(&p, &child, out);
            } else if p.extension().is_some_and(|e| e == "rs") && name != "tests" {
                // (`tests.rs` files are `#[cfg(test)] mod tests;`, like the inline test modules
                // that code_of removes.)
                let path = match name.as_str() {
                    "lib" | "main" if prefix.is_empty() => vec![],
                    "mod" => prefix.to_vec(),
                    _ => {
                        let mut m = prefix.to_vec();
                        m.push(name);
                        m
                    }
                };
                out.insert(path, p);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(src, &[], &mut out);
    out
}

/// The source with comments, string and char literals blanked (newlines kept, so that line
/// numbers stay) and `#[cfg(test)]` modules removed.
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let blank = |out: &mut Vec<u8>, c: u8| out.push(if c == b'\n' { b'\n' } else { b' ' });
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) && !ident_byte(prev(b, i)) {
            // A raw string: r"…", r#"…"#, ...
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                blank(&mut out, b[j]);
                j += 1;
            }
            i = j + close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    blank(&mut out, b[i]);
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            i += 1;
        } else if c == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('"', '\'', '\n'); a lifetime has no closing quote.
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    let code = String::from_utf8(out).unwrap();
    strip_test_modules(&code)
}

fn prev(b: &[u8], i: usize) -> u8 {
    if i == 0 { b' ' } else { b[i - 1] }
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Blanks every `#[cfg(test)] mod NAME { … }` (keeping newlines).
fn strip_test_modules(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let mut from = 0;
    while let Some(at) = code[from..].find("#[cfg(test)]").map(|p| p + from) {
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        from = at + 1;
        if !rest.starts_with("mod ") && !rest.starts_with("pub mod ") && !rest.starts_with("pub(crate) mod ") {
            continue;
        }
        let Some(open) = code[at..].find(['{', ';']).map(|p| p + at) else { continue };
        if code.as_bytes()[open] == b';' {
            continue;
        }
        let mut depth = 0;
        let mut end = open;
        for (k, ch) in code[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        for byte in &mut out[at..=end] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).unwrap()
}

/// The paths a `use` tree or an inline path names, starting right after `crate::` (etc.):
/// `a::b::{c, d::e}` gives `a::b::c` and `a::b::d::e`.
fn paths_at(code: &[u8], mut i: usize) -> Vec<Vec<String>> {
    fn tree(code: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            while code.get(*i).is_some_and(|c| c.is_ascii_whitespace()) {
                *i += 1;
            }
            match code.get(*i) {
                Some(b'{') => {
                    *i += 1;
                    loop {
                        tree(code, i, path.clone(), out);
                        while code.get(*i).is_some_and(|c| c.is_ascii_whitespace()) {
                            *i += 1;
                        }
                        match code.get(*i) {
                            Some(b',') => *i += 1,
                            Some(b'}') => {
                                *i += 1;
                                return;
                            }
                            _ => return,
                        }
                        while code.get(*i).is_some_and(|c| c.is_ascii_whitespace()) {
                            *i += 1;
                        }
                        if code.get(*i) == Some(&b'}') {
                            *i += 1;
                            return;
                        }
                    }
                }
                Some(c) if ident_byte(*c) => {
                    let start = *i;
                    while code.get(*i).is_some_and(|c| ident_byte(*c)) {
                        *i += 1;
                    }
                    path.push(String::from_utf8_lossy(&code[start..*i]).into_owned());
                    if code[*i..].starts_with(b"::") {
                        *i += 2;
                        continue;
                    }
                    out.push(path);
                    return;
                }
                _ => {
                    out.push(path);
                    return;
                }
            }
        }
    }
    let mut out = Vec::new();
    tree(code, &mut i, Vec::new(), &mut out);
    out
}

/// Per module, the names it imports from its own children (`use child::{A, b::B}`, public or
/// not, `self::` or not), each with the module it comes from: a path through the parent to
/// such a name is a use of that child, not of the parent.
fn child_imports(mods: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeMap<String, ModPath>> {
    let mut out: BTreeMap<ModPath, BTreeMap<String, ModPath>> = BTreeMap::new();
    for (module, file) in mods {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for line in code.lines() {
            let t = line.trim_start();
            let t = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|p| t.strip_prefix(p)).unwrap_or(t);
            let Some(rest) = t.strip_prefix("use ") else { continue };
            let rest = rest.strip_prefix("self::").unwrap_or(rest);
            // The statement may go on over the next lines: read it from the whole code.
            let at = code.find(line).unwrap_or(0) + (line.len() - rest.len());
            for segs in paths_at(code.as_bytes(), at) {
                let mut from = module.clone();
                let Some((name, path)) = segs.split_last() else { continue };
                for s in path {
                    from.push(s.clone());
                    if !mods.contains_key(&from) {
                        break;
                    }
                }
                if from.len() > module.len() && mods.contains_key(&from) {
                    out.entry(module.clone()).or_default().insert(name.clone(), from);
                }
            }
        }
    }
    out
}

/// Every module-to-module use in the crate whose sources are under `src`.
fn uses(src: &Path) -> (BTreeMap<ModPath, PathBuf>, Vec<Use>) {
    let mods = modules(src);
    let imported = child_imports(&mods);
    let mut found = Vec::new();
    for (module, file) in &mods {
        let is_mod_file = file.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs");
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if !ident_byte(b[i]) || (i > 0 && (ident_byte(b[i - 1]) || b[i - 1] == b'$')) {
                i += 1;
                continue;
            }
            // The base module of a path that starts here, and where its segments start.
            let mut base: Option<ModPath> = None;
            let mut j = i;
            if b[i..].starts_with(b"crate::") {
                base = Some(vec![]);
                j = i + "crate::".len();
            } else if b[i..].starts_with(b"self::") {
                base = Some(module.clone());
                j = i + "self::".len();
            } else if b[i..].starts_with(b"super::") {
                // A file `a/b.rs` is module a::b: its super is `a`; `a/mod.rs` is `a`: its super is the root.
                let mut m = module.clone();
                let _ = is_mod_file;
                while b[j..].starts_with(b"super::") {
                    m.pop();
                    j += "super::".len();
                }
                base = Some(m);
            }
            let Some(base) = base else {
                while i < b.len() && ident_byte(b[i]) {
                    i += 1;
                }
                continue;
            };
            let line = code[..i].matches('\n').count() + 1;
            for segs in paths_at(b, j) {
                let mut target = base.clone();
                for s in segs {
                    let mut next = target.clone();
                    next.push(s.clone());
                    if mods.contains_key(&next) {
                        target = next;
                    } else {
                        // An item of `target`: when `target` only imports it from one of its
                        // children (`pub use child::Item`, or a private `use` a descendant sees),
                        // the use is of that child.
                        if let Some(m) = imported.get(&target).and_then(|names| names.get(&s)) {
                            target = m.clone();
                        }
                        break;
                    }
                }
                found.push(Use { from: module.clone(), to: target, file: file.clone(), line });
            }
            i = j;
        }
    }
    (mods, found)
}

/// The sibling edges: for a use from `a::x` to `a::y::z`, the edge `x → y` under parent `a`.
fn sibling_edges(uses: &[Use]) -> BTreeMap<(ModPath, String, String), Vec<&Use>> {
    let mut edges: BTreeMap<(ModPath, String, String), Vec<&Use>> = BTreeMap::new();
    for u in uses {
        let common = u.from.iter().zip(&u.to).take_while(|(a, b)| a == b).count();
        if common == u.from.len() || common == u.to.len() {
            continue; // an ancestor or a descendant
        }
        let parent = u.from[..common].to_vec();
        edges.entry((parent, u.from[common].clone(), u.to[common].clone())).or_default().push(u);
    }
    edges
}

/// The cycles among siblings, each as the modules in it with one use per edge as evidence.
fn cycles(src: &Path) -> Vec<String> {
    let (_, uses) = uses(src);
    let edges = sibling_edges(&uses);
    let mut by_parent: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (parent, a, b) in edges.keys() {
        by_parent.entry(parent.clone()).or_default().entry(a.clone()).or_default().insert(b.clone());
    }
    let mut found = Vec::new();
    for (parent, graph) in &by_parent {
        for component in strongly_connected(graph) {
            if component.len() < 2 {
                continue;
            }
            let mut lines = vec![format!(
                "cycle under `crate{}`: {}",
                parent.iter().map(|p| format!("::{p}")).collect::<String>(),
                component.iter().cloned().collect::<Vec<_>>().join(", ")
            )];
            for a in &component {
                for b in graph.get(a).into_iter().flatten().filter(|b| component.contains(*b)) {
                    let u = edges[&(parent.clone(), a.clone(), b.clone())][0];
                    lines.push(format!("  {a} → {b}: {}:{} uses crate::{}", u.file.display(), u.line, u.to.join("::")));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    found
}

/// Tarjan's strongly connected components.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct St<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on: BTreeSet<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(st: &mut St<'g>, v: &'g str) {
        let n = st.index.len();
        st.index.insert(v, n);
        st.low.insert(v, n);
        st.stack.push(v);
        st.on.insert(v);
        if let Some(next) = st.graph.get(v) {
            for w in next {
                let w = w.as_str();
                if !st.index.contains_key(w) {
                    visit(st, w);
                    let l = st.low[v].min(st.low[w]);
                    st.low.insert(v, l);
                } else if st.on.contains(w) {
                    let l = st.low[v].min(st.index[w]);
                    st.low.insert(v, l);
                }
            }
        }
        if st.low[v] == st.index[v] {
            let mut c = BTreeSet::new();
            while let Some(w) = st.stack.pop() {
                st.on.remove(w);
                c.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            st.out.push(c);
        }
    }
    let mut st =
        St { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in graph.keys() {
        if !st.index.contains_key(v.as_str()) {
            visit(&mut st, v);
        }
    }
    st.out
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_module_of_any_crate_of_the_workspace_imports_in_a_cycle() {
    let mut all = Vec::new();
    // Every member of the workspace, read from its manifest (a new crate cannot be forgotten),
    // and the CLI package at the root.
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let members = manifest.lines().find_map(|l| l.trim().strip_prefix("members = ")).expect("members = [...]");
    let mut crates: Vec<String> =
        members.trim_matches(['[', ']']).split(',').map(|m| format!("{}/src", m.trim().trim_matches('"'))).collect();
    assert!(crates.len() >= 6, "{crates:?}");
    crates.push("src".into());
    for krate in &crates {
        all.extend(cycles(&workspace().join(krate)).into_iter().map(|c| format!("{krate}: {c}")));
    }
    assert!(all.is_empty(), "module import cycles:\n{}", all.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_planted_cycle_and_reads_grouped_and_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("outer")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod outer;\npub mod leaf;\n").unwrap();
    std::fs::write(
        src.join("leaf.rs"),
        "// use crate::outer; (a comment is not a use)\npub const X: &str = \"crate::outer\";\n",
    )
    .unwrap();
    std::fs::write(src.join("outer/mod.rs"), "pub mod a;\npub mod b;\npub mod c;\npub use a::A;\n").unwrap();
    std::fs::write(src.join("outer/a.rs"), "use crate::{leaf::X, outer::b::B};\npub struct A;\n").unwrap();
    std::fs::write(src.join("outer/b.rs"), "pub struct B(pub super::c::C);\n").unwrap();
    std::fs::write(
        src.join("outer/c.rs"),
        "pub struct C;\nfn f() -> super::A { self::g(); super::a::A }\nfn g() {}\n#[cfg(test)]\nmod tests { use crate::leaf; }\n",
    )
    .unwrap();
    let found = cycles(src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("cycle under `crate::outer`: a, b, c"), "{}", found[0]);
    // c's use of its parent's re-export of A is a use of a: the cycle stays.
    std::fs::write(src.join("outer/c.rs"), "pub struct C;\nfn f() -> super::A { super::A }\n").unwrap();
    let found = cycles(src);
    assert!(found.len() == 1 && found[0].starts_with("cycle under `crate::outer`: a, b, c"), "{found:?}");
    // Without any use of a in c, nothing is left.
    std::fs::write(src.join("outer/c.rs"), "pub struct C;\nfn f() {}\n").unwrap();
    assert_eq!(cycles(src), Vec::<String>::new());
    // leaf is used by outer::a but uses nothing itself: no root-level cycle.
    let (_, uses) = uses(src);
    assert!(uses.iter().any(|u| u.from == ["outer", "a"] && u.to == ["leaf"]));
    assert!(!uses.iter().any(|u| u.from == ["leaf"]), "comments and strings are no uses");
}
