//! Matching: a compiled [`Pattern`] against the tree of what the peer sent.

use super::{
    Captures, Mismatch, PathSeg, Pattern, Piece, RegexPattern, RenderError, SizeRule, Value, build_regex, dynamic, fmt,
    literal, template,
};

/// Matches an Envelope tree (from [`dynamic::decode`] or [`super::normalize`]). On success the
/// captures the pattern binds are added to `captures`; on failure `captures` is unchanged.
pub fn match_envelope(pattern: &Pattern, actual: &Value, captures: &mut Captures) -> Result<(), Mismatch> {
    match_value(pattern, Some(actual), captures)
}

/// Matches any value; `None` is "nothing there" (a missing field).
pub fn match_value(pattern: &Pattern, actual: Option<&Value>, captures: &mut Captures) -> Result<(), Mismatch> {
    let mut caps = captures.clone();
    let mut path = Vec::new();
    m(pattern, actual, &mut path, &mut caps)?;
    *captures = caps;
    Ok(())
}

/// Matches each pattern against a different one of `actuals`, in any order (`expect_any_order`);
/// there must be as many values as patterns. Returns, for each pattern, the index of the value
/// it matched.
pub fn match_any_order(
    patterns: &[Pattern],
    actuals: &[Value],
    captures: &mut Captures,
) -> Result<Vec<usize>, Mismatch> {
    if patterns.len() != actuals.len() {
        return Err(Mismatch {
            path: Vec::new(),
            expected: format!("{} Envelopes", patterns.len()),
            actual: format!("{}", actuals.len()),
        });
    }
    let refs: Vec<&Value> = actuals.iter().collect();
    let mut caps = captures.clone();
    let assignment = assign(patterns, &refs, &mut Vec::new(), &mut caps)?;
    *captures = caps;
    Ok(assignment)
}

/// Finds a distinct element for every pattern (bipartite matching), binding captures along the
/// found assignment.
fn assign(
    patterns: &[Pattern],
    items: &[&Value],
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<Vec<usize>, Mismatch> {
    // Which element each pattern can match, judged with the captures as they are: captures bind
    // names for later steps only, so pairs do not depend on each other.
    let mut ok = vec![vec![false; items.len()]; patterns.len()];
    for (i, p) in patterns.iter().enumerate() {
        let mut first_err = None;
        for (j, item) in items.iter().enumerate() {
            let mut c = caps.clone();
            path.push(PathSeg::Index(j));
            match m(p, Some(item), path, &mut c) {
                Ok(()) => ok[i][j] = true,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
            path.pop();
        }
        if !ok[i].iter().any(|x| *x) {
            let detail = first_err.map(|e| format!(" (first element: {e})")).unwrap_or_default();
            return Err(Mismatch {
                path: path.clone(),
                expected: format!("an element matching pattern {} ({p})", i + 1),
                actual: format!("none of the {} elements{detail}", items.len()),
            });
        }
    }
    // Kuhn's augmenting paths.
    let mut owner: Vec<Option<usize>> = vec![None; items.len()];
    fn augment(i: usize, ok: &[Vec<bool>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for j in 0..owner.len() {
            if ok[i][j] && !seen[j] {
                seen[j] = true;
                if owner[j].is_none_or(|k| augment(k, ok, seen, owner)) {
                    owner[j] = Some(i);
                    return true;
                }
            }
        }
        false
    }
    for i in 0..patterns.len() {
        let mut seen = vec![false; items.len()];
        if !augment(i, &ok, &mut seen, &mut owner) {
            return Err(Mismatch {
                path: path.clone(),
                expected: format!("a distinct element for each of {} patterns", patterns.len()),
                actual: format!(
                    "no arrangement of the {} elements fits (pattern {} has none left)",
                    items.len(),
                    i + 1
                ),
            });
        }
    }
    let mut result = vec![0; patterns.len()];
    for (j, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            result[*i] = j;
        }
    }
    for (i, j) in result.iter().enumerate() {
        path.push(PathSeg::Index(*j));
        let r = m(&patterns[i], Some(items[*j]), path, caps);
        path.pop();
        r?;
    }
    Ok(result)
}

const SHOWN: usize = 200;

/// A value for a mismatch message.
pub fn show(v: Option<&Value>) -> String {
    match v {
        None => "nothing (not present)".to_owned(),
        Some(v) => {
            let text = v.to_string();
            if text.chars().count() > SHOWN {
                format!("{}… ({} bytes)", text.chars().take(SHOWN).collect::<String>(), text.len())
            } else {
                text
            }
        }
    }
}

fn mismatch(path: &[PathSeg], p: &dyn fmt::Display, actual: Option<&Value>) -> Mismatch {
    Mismatch { path: path.to_vec(), expected: p.to_string(), actual: show(actual) }
}

fn render_err(path: &[PathSeg], e: RenderError) -> Mismatch {
    Mismatch { path: path.to_vec(), expected: format!("a pattern that can be filled in ({e})"), actual: "-".into() }
}

/// Numbers by value, everything else structurally.
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
            match (int(x), int(y)) {
                (Some(i), Some(j)) => i == j,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| values_equal(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Missing, null, false, 0, "", [] or bytes `{hex: ""}`: what proto3 does not send.
fn is_default(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => {
            o.get("hex").and_then(Value::as_str) == Some("") && o.keys().all(|k| k == "hex" || k == "text")
        }
    }
}

fn m(p: &Pattern, actual: Option<&Value>, path: &mut Vec<PathSeg>, caps: &mut Captures) -> Result<(), Mismatch> {
    match p {
        Pattern::Default(def, inner) => m(inner, Some(actual.unwrap_or(def)), path, caps),
        Pattern::Literal(v) => match actual {
            Some(a) if values_equal(v, a) => Ok(()),
            _ => Err(mismatch(path, p, actual)),
        },
        Pattern::Text(pieces) => {
            let want = template::fill(pieces, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(a) if values_equal(&want, a) => Ok(()),
                _ => Err(Mismatch { path: path.clone(), expected: show(Some(&want)), actual: show(actual) }),
            }
        }
        Pattern::Equals(v) => {
            let want = template::substitute(v, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(a) if values_equal(&want, a) => Ok(()),
                _ => Err(Mismatch {
                    path: path.clone(),
                    expected: format!("exactly {}", show(Some(&want))),
                    actual: show(actual),
                }),
            }
        }
        Pattern::Object(fields) => m_object(fields, actual, path, caps),
        Pattern::List(items) => m_list(p, items, actual, path, caps),
        Pattern::Unordered(items) | Pattern::Includes(items) => m_any_order(p, items, actual, path, caps),
        Pattern::Entries(items) => {
            let Some(Value::Object(o)) = actual else {
                return Err(Mismatch { path: path.clone(), expected: "an object".into(), actual: show(actual) });
            };
            if o.len() != items.len() {
                return Err(Mismatch {
                    path: path.clone(),
                    expected: format!("an object of {} members", items.len()),
                    actual: show(actual),
                });
            }
            let pairs: Vec<Value> = o.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect();
            let refs: Vec<&Value> = pairs.iter().collect();
            assign(items, &refs, path, caps).map(drop)
        }
        Pattern::Regex(r) => m_regex(p, r, actual, path, caps),
        Pattern::Contains(pieces) => {
            let needle = template::fill_text(pieces, caps).map_err(|e| render_err(path, e))?;
            match actual {
                Some(Value::String(s)) if s.contains(&needle) => Ok(()),
                _ => Err(Mismatch {
                    path: path.clone(),
                    expected: format!("a string containing {needle:?}"),
                    actual: show(actual),
                }),
            }
        }
        Pattern::Capture(name) => match actual {
            Some(v) => {
                caps.insert(name.clone(), v.clone());
                Ok(())
            }
            None => Err(mismatch(path, p, actual)),
        },
        Pattern::AnyOf(alts) => m_any_of(alts, actual, path, caps),
        Pattern::All(ps) => ps.iter().try_for_each(|sub| m(sub, actual, path, caps)),
        Pattern::Not(inner) => {
            let mut c = caps.clone();
            match m(inner, actual, path, &mut c) {
                Ok(()) => Err(mismatch(path, p, actual)),
                Err(_) => Ok(()),
            }
        }
        Pattern::Absent(want_absent) => {
            if is_default(actual) == *want_absent {
                Ok(())
            } else {
                Err(mismatch(path, p, actual))
            }
        }
        Pattern::NotEmpty => {
            let empty = is_default(actual) || matches!(actual, Some(Value::Object(o)) if o.is_empty());
            if empty { Err(mismatch(path, p, actual)) } else { Ok(()) }
        }
        Pattern::Json(inner) => {
            let parsed = parse_json(path, actual)?;
            m(inner, Some(&parsed), path, caps)
        }
        Pattern::JsonText(pieces) => {
            let text = template::fill_text(pieces, caps).map_err(|e| render_err(path, e))?;
            let want: Value = serde_json::from_str(&text).map_err(|e| Mismatch {
                path: path.clone(),
                expected: format!("JSON text (the pattern {text:?} does not parse once filled in: {e})"),
                actual: "-".into(),
            })?;
            let parsed = parse_json(path, actual)?;
            m(&literal(&want), Some(&parsed), path, caps)
        }
        Pattern::Arm(names) => {
            let arm = actual.and_then(dynamic::arm_of);
            if arm.is_some_and(|a| names.iter().any(|n| n == a)) {
                Ok(())
            } else {
                Err(Mismatch {
                    path: path.clone(),
                    expected: format!("arm {}", names.join(" or ")),
                    actual: arm.map_or_else(|| "no arm".to_owned(), |a| format!("arm {a}")),
                })
            }
        }
        Pattern::SizeRule(rule) => m_size_rule(rule, actual, path),
        Pattern::Via(vias) => m_via(vias, actual, path),
    }
}

/// Each key's pattern against the object's field (`None`: against the object itself).
fn m_object(
    fields: &[(Option<String>, Pattern)],
    actual: Option<&Value>,
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<(), Mismatch> {
    let Some(Value::Object(obj)) = actual else {
        return Err(Mismatch { path: path.clone(), expected: "an object".into(), actual: show(actual) });
    };
    for (key, sub) in fields {
        match key {
            Some(k) => {
                path.push(PathSeg::Key(k.clone()));
                let r = m(sub, obj.get(k), path, caps);
                path.pop();
                r?;
            }
            None => m(sub, actual, path, caps)?,
        }
    }
    Ok(())
}

/// Element-wise, in order, with the same length.
fn m_list(
    p: &Pattern,
    items: &[Pattern],
    actual: Option<&Value>,
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<(), Mismatch> {
    let Some(Value::Array(arr)) = actual else {
        return Err(Mismatch {
            path: path.clone(),
            expected: format!("a list of {}", items.len()),
            actual: show(actual),
        });
    };
    if arr.len() != items.len() {
        return Err(Mismatch {
            path: path.clone(),
            expected: format!("{} elements ({p})", items.len()),
            actual: format!("{} elements: {}", arr.len(), show(actual)),
        });
    }
    for (i, (sub, a)) in items.iter().zip(arr).enumerate() {
        path.push(PathSeg::Index(i));
        let r = m(sub, Some(a), path, caps);
        path.pop();
        r?;
    }
    Ok(())
}

/// `unordered` (as many elements, any order) and `includes` (at least these, any order).
fn m_any_order(
    p: &Pattern,
    items: &[Pattern],
    actual: Option<&Value>,
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<(), Mismatch> {
    let Some(Value::Array(arr)) = actual else {
        return Err(Mismatch { path: path.clone(), expected: "a list".into(), actual: show(actual) });
    };
    if matches!(p, Pattern::Unordered(_)) && arr.len() != items.len() {
        return Err(Mismatch {
            path: path.clone(),
            expected: format!("{} elements in any order", items.len()),
            actual: format!("{} elements: {}", arr.len(), show(actual)),
        });
    }
    let refs: Vec<&Value> = arr.iter().collect();
    assign(items, &refs, path, caps).map(drop)
}

/// A regex, its placeholders filled in (escaped) first.
fn m_regex(
    p: &Pattern,
    r: &RegexPattern,
    actual: Option<&Value>,
    path: &[PathSeg],
    caps: &Captures,
) -> Result<(), Mismatch> {
    let Some(Value::String(s)) = actual else { return Err(mismatch(path, p, actual)) };
    let hit = match r {
        RegexPattern::Fixed(re) => re.is_match(s),
        RegexPattern::Template(pieces) => {
            let mut text = String::new();
            for piece in pieces {
                match piece {
                    Piece::Lit(l) => text.push_str(l),
                    Piece::Var(name) => {
                        let v = caps.get(name).ok_or_else(|| render_err(path, RenderError::Unbound(name.clone())))?;
                        text.push_str(&regex::escape(&template::text_of(v)));
                    }
                    Piece::Repeat { .. } => text.push_str(&regex::escape(&piece.generated().unwrap_or_default())),
                    Piece::Fill { .. } => {
                        return Err(render_err(path, RenderError::Malformed(template::FILL_MISPLACED.into())));
                    }
                }
            }
            build_regex(&text).map_err(|e| render_err(path, RenderError::Malformed(e.to_string())))?.is_match(s)
        }
    };
    if hit { Ok(()) } else { Err(mismatch(path, p, actual)) }
}

/// The first alternative that matches binds its captures; otherwise every reason is listed.
fn m_any_of(
    alts: &[Pattern],
    actual: Option<&Value>,
    path: &mut Vec<PathSeg>,
    caps: &mut Captures,
) -> Result<(), Mismatch> {
    let mut reasons = Vec::new();
    for alt in alts {
        let mut c = caps.clone();
        match m(alt, actual, path, &mut c) {
            Ok(()) => {
                *caps = c;
                return Ok(());
            }
            Err(e) => reasons.push(e.to_string()),
        }
    }
    Err(Mismatch {
        path: path.clone(),
        expected: format!("any of {} alternatives [{}]", alts.len(), reasons.join("; ")),
        actual: show(actual),
    })
}

/// `size_rule`: the form (and compression) the received result's own length calls for.
fn m_size_rule(rule: &SizeRule, actual: Option<&Value>, path: &[PathSeg]) -> Result<(), Mismatch> {
    let via = match actual.and_then(|a| a.get(crate::normalize::VIA)) {
        Some(Value::String(s)) => s.as_str(),
        _ => "frame",
    };
    let len = actual
        .and_then(|a| a.get("call_result"))
        .and_then(|r| r.get("result_json"))
        .and_then(Value::as_str)
        .map(|s| s.len() as u64);
    let Some(len) = len else {
        return Err(Mismatch {
            path: path.to_vec(),
            expected: "a call_result with result_json (size_rule)".into(),
            actual: show(actual),
        });
    };
    let compression = actual.and_then(|a| a.get("sideband")).and_then(|s| s.get("compression")).and_then(Value::as_str);
    let (ok, expected, got) = match rule {
        SizeRule::SidebandOver(n) => {
            let want = if len > *n { "sideband" } else { "frame" };
            (via == want, format!("via {want} (result_json is {len} bytes, threshold {n})"), format!("via {via}"))
        }
        SizeRule::CompressOver(n) => {
            let want = if len > *n { "zstd" } else { "" };
            let c = compression.unwrap_or("");
            (
                via == "sideband" && c == want,
                format!("via sideband with compression {want:?} (payload is {len} bytes, threshold {n})"),
                format!("via {via} with compression {c:?}"),
            )
        }
    };
    if ok { Ok(()) } else { Err(Mismatch { path: path.to_vec(), expected, actual: got }) }
}

/// `via`: the form the result came in.
fn m_via(vias: &[String], actual: Option<&Value>, path: &[PathSeg]) -> Result<(), Mismatch> {
    let via = match actual.and_then(|a| a.get(crate::normalize::VIA)) {
        Some(Value::String(s)) => s.as_str(),
        _ => "frame",
    };
    if vias.iter().any(|v| v == via) {
        Ok(())
    } else {
        Err(Mismatch {
            path: path.to_vec(),
            expected: format!("via {}", vias.join(" or ")),
            actual: format!("via {via}"),
        })
    }
}

fn parse_json(path: &[PathSeg], actual: Option<&Value>) -> Result<Value, Mismatch> {
    let Some(Value::String(s)) = actual else {
        return Err(Mismatch { path: path.to_vec(), expected: "a string holding JSON".into(), actual: show(actual) });
    };
    serde_json::from_str(s).map_err(|e| Mismatch {
        path: path.to_vec(),
        expected: "a string holding JSON".into(),
        actual: format!("{} (not JSON: {e})", show(actual)),
    })
}
