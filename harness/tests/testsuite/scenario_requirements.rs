//! The requirement table: in sync with the spec, counts as in its Appendix D, lookups.

use std::path::PathBuf;

use protomcp_harness::requirements::{self, Level, Party};

fn spec_path() -> PathBuf {
    // The workspace root is the harness crate's parent; the spec lives beside the workspace.
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/protocol.md")
}

/// Revision 2, the amendment to protocol.md.
fn amendment_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/spec/protocol-rev2.md")
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
    let Ok(amendment) = std::fs::read_to_string(amendment_path()) else {
        println!("note: {} not found; skipping the sync check", amendment_path().display());
        return;
    };
    let extracted =
        requirements::extract_revision_2(&markdown, &amendment).expect("the spec's requirement bullets parse");
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
    // Appendix D, row by row, with the amendment's delta (R2.6) added.
    let counts = revision_2_counts(appendix_d(&markdown), delta(&amendment));
    assert_eq!(counts.len(), 25, "23 areas, STATELESS and the total");
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

type Row = (String, usize, usize, usize, usize, usize, usize);

/// The rows of the amendment's Appendix D delta (R2.6), `added` as `total`.
fn delta(amendment: &str) -> Vec<Row> {
    let start = amendment.find("## R2.6 Appendix D delta").expect("R2.6");
    let end = amendment[start..].find("\n---").map_or(amendment.len(), |e| start + e);
    appendix_rows(&amendment[start..end])
        .into_iter()
        .map(|(area, tp, br, total, must, should, may)| {
            let area = area.trim_end_matches(" (new)").replace("added", "total");
            (area, tp, br, total, must, should, may)
        })
        .collect()
}

/// Appendix D of Revision 1 with the delta added: a row of an area the delta names grows by it, a
/// new area is added before the total.
fn revision_2_counts(mut base: Vec<Row>, delta: Vec<Row>) -> Vec<Row> {
    for (area, tp, br, total, must, should, may) in delta {
        match base.iter_mut().find(|r| r.0 == area) {
            Some(r) => {
                (r.1, r.2, r.3, r.4, r.5, r.6) = (r.1 + tp, r.2 + br, r.3 + total, r.4 + must, r.5 + should, r.6 + may)
            }
            None => {
                let at = base.iter().position(|r| r.0 == "total").unwrap_or(base.len());
                base.insert(at, (area, tp, br, total, must, should, may));
            }
        }
    }
    base
}

#[test]
fn revision_2_totals_are_those_the_amendment_states() {
    let (Ok(markdown), Ok(amendment)) =
        (std::fs::read_to_string(spec_path()), std::fs::read_to_string(amendment_path()))
    else {
        return;
    };
    let counts = revision_2_counts(appendix_d(&markdown), delta(&amendment));
    let total = counts.iter().find(|r| r.0 == "total").expect("the total row");
    // R2.6: "New totals: TP 163, BR 296, total 459; MUST 369, SHOULD 68, MAY 22".
    assert_eq!((total.1, total.2, total.3, total.4, total.5, total.6), (163, 296, 459, 369, 68, 22));
}

/// The rows of Appendix D: (area or "total", TP, BR, total, MUST, SHOULD, MAY).
fn appendix_d(markdown: &str) -> Vec<Row> {
    let start = markdown.find("## Appendix D").expect("Appendix D");
    appendix_rows(&markdown[start..])
}

/// The table rows of `text` with six counts: (first cell, the six counts).
fn appendix_rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| area"))
        .filter_map(|l| {
            let cells: Vec<String> =
                l.split('|').map(|c| c.trim().trim_matches('*').to_owned()).filter(|c| !c.is_empty()).collect();
            let nums: Vec<usize> = cells.iter().filter_map(|c| c.parse().ok()).collect();
            (nums.len() == 6).then(|| (cells[0].clone(), nums[0], nums[1], nums[2], nums[3], nums[4], nums[5]))
        })
        .collect()
}

/// R2.6: "New totals: TP 163, BR 296, total 459; MUST 369, SHOULD 68, MAY 22".
#[test]
fn totals_of_revision_2() {
    let all = requirements::all();
    assert_eq!(all.len(), 459);
    assert_eq!(all.iter().filter(|r| r.party() == Party::ToolProcess).count(), 163);
    assert_eq!(all.iter().filter(|r| r.level == Level::Must).count(), 369);
    assert_eq!(all.iter().filter(|r| r.level == Level::Should).count(), 68);
    assert_eq!(all.iter().filter(|r| r.level == Level::May).count(), 22);
}

#[test]
fn the_amendments_bullets_join_their_areas() {
    let ids: Vec<&str> = requirements::all().iter().map(|r| r.id).collect();
    let at = |id: &str| ids.iter().position(|i| *i == id).unwrap_or_else(|| panic!("{id}"));
    // BR-CALL-19 right after Revision 1's last CALL bullet, STATELESS last.
    assert_eq!(at("BR-CALL-19"), at("BR-CALL-18") + 1);
    assert_eq!(ids.last(), Some(&"BR-STATELESS-35"));
    let a = "- **BR-CALL-01** [MUST] again\n";
    let err = requirements::extract_revision_2("- **BR-CALL-01** [MUST] a\n", a).unwrap_err();
    assert_eq!((err.line, err.message.as_str()), (1, "BR-CALL-01 is in protocol.md already"));
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
