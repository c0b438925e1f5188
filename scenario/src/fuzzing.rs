//! Body of the `scenario_parser` cargo-fuzz target (fuzz/fuzz_targets/scenario_parser.rs), also
//! replayed over the committed seeds by `cargo test -p protomcp-scenario`.

use std::path::Path;

/// Any bytes as a scenario file: the loader never panics, and every error it reports points
/// into the file (`fuzz.yaml:LINE:COL: message`, line and column from 1).
pub fn scenario_parser(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let file = Path::new("fuzz.yaml");
    let Err(errors) = crate::parse_str(file, text) else { return };
    assert!(!errors.0.is_empty(), "an error result names at least one error");
    for e in &errors.0 {
        let shown = e.to_string();
        let rest = shown.strip_prefix("fuzz.yaml:").unwrap_or_else(|| panic!("error without the file: {shown}"));
        let mut parts = rest.splitn(3, ':');
        let line: u32 = parts.next().and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("no line: {shown}"));
        let col: u32 = parts.next().and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no column: {shown}"));
        assert!(line >= 1 && col >= 1, "a location from 1: {shown}");
        // YAML breaks lines at LF, CRLF and a lone CR.
        let lines = text.replace("\r\n", "\n").chars().filter(|c| matches!(c, '\n' | '\r')).count() as u32 + 1;
        assert!(line <= lines, "line {line} beyond the file's {lines}: {shown}");
    }
}
