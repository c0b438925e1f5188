//! The requirement table: in sync with the spec, counts as in its Appendix D, lookups.

use std::path::PathBuf;

use protomcp_harness::requirements::{self, Level, Party};

fn spec_path() -> PathBuf {
    // The workspace root is the harness crate's parent; the spec lives beside the workspace.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/protocol.md")
}

fn table_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/requirements.tsv")
}

#[test]
fn committed_table_matches_the_spec() {
    let spec = spec_path();
    let Ok(markdown) = std::fs::read_to_string(&spec) else {
        println!("note: {} not found; skipping the sync check of data/requirements.tsv", spec.display());
        return;
    };
    let extracted = requirements::extract(&markdown).expect("the spec's requirement bullets parse");
    let table = requirements::to_table(&extracted);
    if std::env::var_os("UPDATE_REQUIREMENTS").is_some() {
        std::fs::write(table_path(), &table).expect("write data/requirements.tsv");
        return;
    }
    assert!(
        table == requirements::TABLE,
        "harness/data/requirements.tsv is out of date with {}; regenerate it with \
         UPDATE_REQUIREMENTS=1 cargo test -p protomcp-harness --test testsuite scenario_requirements",
        spec.display()
    );
    // Appendix D, row by row.
    let counts = appendix_d(&markdown);
    assert_eq!(counts.len(), 24, "23 areas and the total");
    for (area, tp, br, total, must, should, may) in counts {
        let rows: Vec<_> = requirements::all().iter().filter(|r| area == "total" || r.area() == area).collect();
        let count = |f: &dyn Fn(&&requirements::Requirement) -> bool| rows.iter().filter(|r| f(r)).count();
        assert_eq!(count(&|r| r.party() == Party::ToolProcess), tp, "{area} TP");
        assert_eq!(count(&|r| r.party() == Party::Bridge), br, "{area} BR");
        assert_eq!(rows.len(), total, "{area} total");
        assert_eq!(count(&|r| r.level == Level::Must), must, "{area} MUST");
        assert_eq!(count(&|r| r.level == Level::Should), should, "{area} SHOULD");
        assert_eq!(count(&|r| r.level == Level::May), may, "{area} MAY");
    }
}

/// The rows of Appendix D: (area or "total", TP, BR, total, MUST, SHOULD, MAY).
fn appendix_d(markdown: &str) -> Vec<(String, usize, usize, usize, usize, usize, usize)> {
    let start = markdown.find("## Appendix D").expect("Appendix D");
    markdown[start..]
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| area"))
        .filter_map(|l| {
            let cells: Vec<String> =
                l.split('|').map(|c| c.trim().trim_matches('*').to_owned()).filter(|c| !c.is_empty()).collect();
            let nums: Vec<usize> = cells.iter().filter_map(|c| c.parse().ok()).collect();
            (nums.len() == 6).then(|| (cells[0].clone(), nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]))
        })
        .collect()
}

#[test]
fn totals_of_revision_1() {
    let all = requirements::all();
    assert_eq!(all.len(), 393);
    assert_eq!(all.iter().filter(|r| r.party() == Party::ToolProcess).count(), 163);
    assert_eq!(all.iter().filter(|r| r.level == Level::Must).count(), 311);
    assert_eq!(all.iter().filter(|r| r.level == Level::Should).count(), 61);
    assert_eq!(all.iter().filter(|r| r.level == Level::May).count(), 21);
}

#[test]
fn lookup_by_id() {
    let r = requirements::get("TP-HANDSHAKE-09").expect("exists");
    assert_eq!(r.level, Level::Must);
    assert_eq!(r.feature, Some("middleware"));
    assert_eq!(r.area(), "HANDSHAKE");
    assert_eq!(r.party(), Party::ToolProcess);
    assert!(r.text.starts_with("After the ToolListResponse"), "{}", r.text);
    assert!(r.to_string().starts_with("TP-HANDSHAKE-09 [MUST · middleware] After"));
    let r = requirements::get("TP-FRAME-16").expect("exists");
    assert_eq!((r.level, r.feature, r.withdrawn), (Level::May, None, false));
    assert!(requirements::get("TP-CALL-99").is_none());
    assert!(requirements::get("tp-call-01").is_none());
}

#[test]
fn extractor_rejects_drift() {
    let ok = "- **TP-X-01** [MUST] a\n- **BR-X-02** [SHOULD · http] b (withdrawn)\n- not a bullet\n";
    let got = requirements::extract(ok).unwrap();
    assert_eq!(got.len(), 2);
    assert!(got[1].withdrawn);
    assert_eq!(got[1].feature.as_deref(), Some("http"));
    for bad in [
        "- **TP-X-1** [MUST] a",
        "- **TP-X-01** [MUSTY] a",
        "- **TP-X-01** [MUST · nope] a",
        "- **TP-X-01** MUST a",
        "- **TP-X-01** [MUST] a\n- **TP-X-01** [MUST] b",
    ] {
        assert!(requirements::extract(bad).is_err(), "{bad}");
    }
}
