//! Display: the pattern in a compact YAML-like flow form, for mismatch messages.

use super::{Pattern, Piece, RegexPattern, SizeRule, fmt};

fn pieces_text(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Lit(l) => l.replace('$', "$$"),
            Piece::Var(n) => format!("${{{n}}}"),
            Piece::Repeat { count, text } => format!("${{repeat:{count}:{text}}}"),
            Piece::Fill { total, ch } => format!("${{fill:{total}:{ch}}}"),
        })
        .collect()
}

fn list(f: &mut fmt::Formatter<'_>, items: &[Pattern]) -> fmt::Result {
    f.write_str("[")?;
    for (i, p) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{p}")?;
    }
    f.write_str("]")
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Literal(v) => write!(f, "{v}"),
            Pattern::Text(pieces) => write!(f, "{:?}", pieces_text(pieces)),
            Pattern::Object(fields) => {
                f.write_str("{")?;
                for (i, (k, p)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match k {
                        Some(k) => write!(f, "{k}: {p}")?,
                        None => write!(f, "{p}")?,
                    }
                }
                f.write_str("}")
            }
            Pattern::List(items) => list(f, items),
            Pattern::Unordered(items) => {
                f.write_str("{unordered: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Includes(items) => {
                f.write_str("{includes: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Entries(items) => {
                f.write_str("{entries: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Regex(RegexPattern::Fixed(r)) => write!(f, "{{regex: {:?}}}", r.as_str()),
            Pattern::Regex(RegexPattern::Template(p)) => write!(f, "{{regex: {:?}}}", pieces_text(p)),
            Pattern::Contains(p) => write!(f, "{{contains: {:?}}}", pieces_text(p)),
            Pattern::Capture(n) => write!(f, "{{capture: {n}}}"),
            Pattern::AnyOf(items) => {
                f.write_str("{any_of: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::All(items) => {
                f.write_str("{all: ")?;
                list(f, items)?;
                f.write_str("}")
            }
            Pattern::Not(p) => write!(f, "{{not: {p}}}"),
            Pattern::Absent(b) => write!(f, "{{absent: {b}}}"),
            Pattern::NotEmpty => f.write_str("{not_empty: true}"),
            Pattern::Equals(v) => write!(f, "{{equals: {v}}}"),
            Pattern::Json(p) => write!(f, "{p}"),
            Pattern::JsonText(p) => write!(f, "{:?}", pieces_text(p)),
            Pattern::Default(_, p) => write!(f, "{p}"),
            Pattern::Arm(names) => write!(f, "arm: {}", names.join(" | ")),
            Pattern::Via(vias) => write!(f, "via: {}", vias.join(" | ")),
            Pattern::SizeRule(SizeRule::SidebandOver(n)) => write!(f, "size_rule: {{sideband_over: {n}}}"),
            Pattern::SizeRule(SizeRule::CompressOver(n)) => write!(f, "size_rule: {{compress_over: {n}}}"),
        }
    }
}
