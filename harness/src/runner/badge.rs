//! The badge of a run (`--badge FILE.svg`, `--badge FILE.json`): "protomcp conformance |
//! 176/217 MUST", as a flat SVG in the style of shields.io and as the JSON its endpoint badges
//! read (`{schemaVersion: 1, label, message, color}`).
//!
//! The count: of the MUST scenarios executed (every verdict but SKIP), those in which no MUST
//! requirement was broken: PASS, WARN (only a SHOULD broken) and XPASS (it passed; the stale
//! known-failures entry is the baseline's fault). A known failure (XFAIL) does not count: the
//! requirement is still broken, whatever the baseline says. ERROR, FAIL, FLAKY and LEAK do not
//! count either. SHOULD and MAY scenarios are outside the count.
//!
//! The colour: red when the run fails (exit status not 0: a FAIL, XPASS, FLAKY, LEAK or ERROR,
//! or nothing executed), yellow when it passes with a WARN or an XFAIL, green when every
//! executed scenario passed.
//!
//! Pure: the results in, the text out.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{CaseResult, Summary, Verdict};
use crate::requirements::Level;

/// The badge's label.
pub const LABEL: &str = "protomcp conformance";

/// What a badge says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Badge {
    /// MUST scenarios without a MUST broken.
    pub must_held: usize,
    /// MUST scenarios executed.
    pub must_run: usize,
    pub colour: Colour,
}

/// The colour of a badge, by the run's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    Green,
    Yellow,
    Red,
}

impl Colour {
    /// The name shields.io knows it by (for the endpoint JSON).
    pub fn name(self) -> &'static str {
        match self {
            Colour::Green => "brightgreen",
            Colour::Yellow => "yellow",
            Colour::Red => "red",
        }
    }

    /// Its RGB value in the SVG.
    pub fn hex(self) -> &'static str {
        match self {
            Colour::Green => "#44cc11",
            Colour::Yellow => "#dfb317",
            Colour::Red => "#e05d44",
        }
    }
}

impl Badge {
    /// The badge of a run's results (every side's together).
    pub fn of<'a>(results: impl IntoIterator<Item = &'a CaseResult>) -> Badge {
        let mut verdicts = Vec::new();
        let (mut must_held, mut must_run) = (0, 0);
        for r in results {
            verdicts.push(r.verdict);
            if r.level == Level::Must && r.verdict.executed() {
                must_run += 1;
                if matches!(r.verdict, Verdict::Pass | Verdict::Warn | Verdict::Xpass) {
                    must_held += 1;
                }
            }
        }
        let s = Summary::of(verdicts);
        let colour = if s.exit_code() != 0 {
            Colour::Red
        } else if s.warn > 0 || s.xfail > 0 {
            Colour::Yellow
        } else {
            Colour::Green
        };
        Badge { must_held, must_run, colour }
    }

    /// `176/217 MUST`.
    pub fn message(&self) -> String {
        format!("{}/{} MUST", self.must_held, self.must_run)
    }

    /// The shields.io endpoint JSON.
    pub fn endpoint_json(&self) -> Value {
        json!({"schemaVersion": 1, "label": LABEL, "message": self.message(), "color": self.colour.name()})
    }

    /// The flat SVG: a grey label box and a coloured message box, 20 px high, corners rounded,
    /// text in Verdana 11 px (each text stretched to the width [`text_width`] gives it, so
    /// another font of the fallback list takes the same room), with a 1 px shadow.
    pub fn svg(&self) -> String {
        let message = self.message();
        let (lw, mw) = (text_width(LABEL) + 2.0 * PAD, text_width(&message) + 2.0 * PAD);
        let w = lw + mw;
        let title = format!("{LABEL}: {message}");
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.1}" height="20" role="img" aria-label="{title}">
<title>{title}</title>
<linearGradient id="shine" x2="0" y2="100%"><stop offset="0" stop-color="#bbbbbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>
<clipPath id="round"><rect width="{w:.1}" height="20" rx="3" fill="#ffffff"/></clipPath>
<g clip-path="url(#round)"><rect width="{lw:.1}" height="20" fill="#555555"/><rect x="{lw:.1}" width="{mw:.1}" height="20" fill="{colour}"/><rect width="{w:.1}" height="20" fill="url(#shine)"/></g>
<g fill="#ffffff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">
"##,
            colour = self.colour.hex(),
        );
        for (text, x) in [(LABEL, lw / 2.0), (message.as_str(), lw + mw / 2.0)] {
            let tw = text_width(text);
            let _ = writeln!(
                s,
                r##"<text x="{x:.1}" y="15" fill="#010101" fill-opacity=".3" textLength="{tw:.1}" lengthAdjust="spacingAndGlyphs">{text}</text><text x="{x:.1}" y="14" textLength="{tw:.1}" lengthAdjust="spacingAndGlyphs">{text}</text>"##
            );
        }
        s.push_str("</g>\n</svg>\n");
        s
    }
}

/// Space left and right of each text, in px.
pub const PAD: f64 = 5.0;

/// The width of `text` in Verdana 11 px, in px: the advance widths of its characters (Verdana's
/// units per em are 2048); a character outside the table counts as a typical lowercase letter.
pub fn text_width(text: &str) -> f64 {
    let units: u32 = text.chars().map(advance).sum();
    f64::from(units) * 11.0 / 2048.0
}

/// Verdana's advance width of `c` in font units (2048 per em), for the characters a badge uses.
fn advance(c: char) -> u32 {
    match c {
        ' ' => 720,
        '0'..='9' => 1302,
        '/' => 889,
        '.' | ',' => 745,
        '-' => 861,
        '|' => 1090,
        'a' => 1229,
        'b' | 'd' | 'g' | 'p' | 'q' => 1276,
        'c' => 1063,
        'e' => 1210,
        'f' => 720,
        'h' | 'n' | 'u' => 1296,
        'i' | 'l' => 562,
        'j' => 676,
        'k' | 'v' | 'x' | 'y' => 1212,
        'm' => 1992,
        'o' => 1243,
        'r' => 874,
        's' => 1065,
        't' => 807,
        'w' => 1675,
        'z' => 1075,
        'A' | 'S' | 'V' => 1401,
        'B' | 'X' | 'Z' => 1405,
        'C' => 1430,
        'D' => 1577,
        'E' => 1294,
        'F' => 1178,
        'G' => 1587,
        'H' => 1540,
        'I' => 862,
        'J' => 918,
        'K' => 1415,
        'L' => 1141,
        'M' => 1726,
        'N' => 1532,
        'O' | 'Q' => 1612,
        'P' => 1235,
        'R' => 1438,
        'T' | 'Y' => 1243,
        'U' => 1503,
        'W' => 2025,
        _ => 1277,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(level: Level, verdict: Verdict) -> CaseResult {
        let mut r = CaseResult::blank("x");
        r.level = level;
        r.verdict = verdict;
        r
    }

    #[test]
    fn the_count_is_the_must_scenarios_without_a_must_broken_over_the_must_scenarios_executed() {
        use Verdict::*;
        let rs = [
            case(Level::Must, Pass),
            case(Level::Must, Warn),
            case(Level::Must, Xfail),
            case(Level::Must, Skip),
            case(Level::Should, Pass),
            case(Level::May, Pass),
        ];
        let b = Badge::of(&rs);
        assert_eq!(b.message(), "2/3 MUST");
        assert_eq!(b.colour, Colour::Yellow);
        let b = Badge::of(&[case(Level::Must, Pass), case(Level::Must, Fail)]);
        assert_eq!((b.message().as_str(), b.colour), ("1/2 MUST", Colour::Red));
        let b = Badge::of(&[case(Level::Must, Pass), case(Level::Should, Pass), case(Level::Must, Skip)]);
        assert_eq!((b.message().as_str(), b.colour), ("1/1 MUST", Colour::Green));
        // Nothing executed is a failed run.
        assert_eq!(Badge::of(&[case(Level::Must, Skip)]).colour, Colour::Red);
        assert_eq!(
            b.endpoint_json(),
            json!({"schemaVersion": 1, "label": "protomcp conformance", "message": "1/1 MUST", "color": "brightgreen"})
        );
    }

    #[test]
    fn the_boxes_are_as_wide_as_their_texts() {
        let b = Badge { must_held: 176, must_run: 217, colour: Colour::Red };
        let svg = b.svg();
        let lw = text_width(LABEL) + 2.0 * PAD;
        assert!(svg.contains(&format!(r##"<rect width="{lw:.1}" height="20" fill="#555555"/>"##)), "{svg}");
        assert!(svg.contains(r##"fill="#e05d44""##), "{svg}");
        assert!(svg.contains(">176/217 MUST</text>"), "{svg}");
        // Digits are all as wide, wider than an `i`.
        assert_eq!(text_width("176"), text_width("888"));
        assert!(text_width("m") > text_width("i"));
    }
}
