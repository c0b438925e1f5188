//! The tools of the fixture contract (spec Appendix B.1) that every testee registers: the one
//! table of their names and of the feature a testee claims to register each. The reference
//! testee's handlers and the session model's generated calls both name tools through it.

/// A tool of Appendix B.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FixtureTool {
    Echo,
    Add,
    Fail,
    FailSoft,
    Slow,
    Big,
    BigErr,
    Toggle,
    Secret,
    Structured,
    Logit,
    Narrow,
    Ask,
    Roots,
    StreamBig,
}

impl FixtureTool {
    /// Every tool with its name and feature, in the appendix's order.
    const TABLE: &'static [(FixtureTool, &'static str, Option<&'static str>)] = &[
        (FixtureTool::Echo, "echo", None),
        (FixtureTool::Add, "add", None),
        (FixtureTool::Fail, "fail", None),
        (FixtureTool::FailSoft, "fail_soft", None),
        (FixtureTool::Slow, "slow", None),
        (FixtureTool::Big, "big", None),
        (FixtureTool::BigErr, "big_err", None),
        (FixtureTool::Toggle, "toggle", None),
        // Registered hidden when the testee declares `hidden`.
        (FixtureTool::Secret, "secret", Some("hidden")),
        (FixtureTool::Structured, "structured", Some("structured")),
        (FixtureTool::Logit, "logit", Some("log")),
        (FixtureTool::Narrow, "narrow", Some("toollist")),
        (FixtureTool::Ask, "ask", Some("sampling")),
        (FixtureTool::Roots, "roots", Some("roots")),
        (FixtureTool::StreamBig, "stream_big", Some("stream")),
    ];

    /// Every tool, in the appendix's order.
    pub fn all() -> impl Iterator<Item = FixtureTool> {
        Self::TABLE.iter().map(|(t, _, _)| *t)
    }

    fn row(self) -> &'static (FixtureTool, &'static str, Option<&'static str>) {
        Self::TABLE.iter().find(|(t, _, _)| *t == self).expect("every tool has a row")
    }

    /// The name it is registered and called under.
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The feature (spec §1.3) a testee must claim to register it; `None`: always registered.
    pub fn feature(self) -> Option<&'static str> {
        self.row().2
    }

    /// The tool registered under `name`.
    pub fn named(name: &str) -> Option<FixtureTool> {
        Self::TABLE.iter().find(|(_, n, _)| *n == name).map(|(t, _, _)| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_one_row_and_its_name_leads_back_to_it() {
        let all: Vec<FixtureTool> = FixtureTool::all().collect();
        assert_eq!(all.len(), 15);
        for t in all {
            assert_eq!(FixtureTool::named(t.name()), Some(t));
        }
        assert_eq!(FixtureTool::named("no_such_tool"), None);
    }
}
