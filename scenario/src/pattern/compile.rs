//! Compiling: the YAML of an `expect` step into a [`Pattern`], checked against the schema.

use super::{
    Arm, Captures, Compiler, Ctx, ENVELOPE, ENVELOPE_PATTERN_KEYS, FieldKind, FieldSchema, KEYWORDS, Loc, MESSAGES,
    Node, NodeKind, Pattern, PatternError, Piece, RegexPattern, SizeRule, VIAS, Value, arm_names, build_regex,
    check_placeholders, default_of, dynamic, fail, literal, template,
};

impl Compiler {
    /// An Envelope pattern (the `envelope:` of an `expect`).
    pub fn envelope(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        self.compile(node, Ctx::Msg(ENVELOPE, true))
    }

    /// A pattern of the message type `message` (`"ToolListResponse"`).
    pub fn message(&mut self, node: &Node, message: &str) -> Result<Pattern, PatternError> {
        let idx = MESSAGES
            .iter()
            .position(|m| m.name == message)
            .ok_or_else(|| PatternError { loc: node.loc, message: format!("no message type `{message}`") })?;
        self.compile(node, Ctx::Msg(idx, false))
    }

    /// A pattern of any value (no schema): for stderr text and the like.
    pub fn value(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        self.compile(node, Ctx::Free)
    }

    fn pieces(&mut self, s: &str, loc: Loc) -> Result<Vec<Piece>, PatternError> {
        let pieces = template::parse(s).map_err(|m| PatternError { loc, message: m.to_string() })?;
        for p in &pieces {
            match p {
                Piece::Var(name) => self.used.push((name.clone(), loc)),
                Piece::Repeat { .. } => {
                    let message = "`${repeat:…}` generates text to send; patterns do not take it".to_owned();
                    return Err(PatternError { loc, message });
                }
                Piece::Fill { .. } => {
                    let message = format!("{}; patterns do not", template::FILL_MISPLACED);
                    return Err(PatternError { loc, message });
                }
                Piece::Lit(_) => {}
            }
        }
        Ok(pieces)
    }

    fn compile(&mut self, node: &Node, ctx: Ctx) -> Result<Pattern, PatternError> {
        if let NodeKind::Map(entries) = &node.kind {
            let keywords = entries.iter().filter(|(k, _)| KEYWORDS.contains(&k.name.as_str())).count();
            if keywords > 0 && keywords == entries.len() {
                return self.matchers(node, ctx);
            }
            let is_message = match ctx {
                Ctx::Msg(..) => true,
                Ctx::Field(f) | Ctx::Elem(f) => {
                    matches!(f.kind, FieldKind::Message(_)) && !(f.repeated && matches!(ctx, Ctx::Field(_)))
                }
                Ctx::Free => false,
            };
            if keywords > 0 && !is_message {
                let (k, _) = entries.iter().find(|(k, _)| KEYWORDS.contains(&k.name.as_str())).expect("counted");
                let others: Vec<&str> = entries
                    .iter()
                    .filter(|(k, _)| !KEYWORDS.contains(&k.name.as_str()))
                    .map(|(k, _)| k.name.as_str())
                    .collect();
                return fail(
                    k.loc,
                    format!(
                        "`{}` is a matcher keyword and cannot be mixed with other keys ({}); write {{equals: …}} to match a literal mapping",
                        k.name,
                        others.join(", ")
                    ),
                );
            }
        }
        match ctx {
            Ctx::Msg(idx, top) => self.message_fields(node, idx, top),
            Ctx::Field(f) if f.repeated => match &node.kind {
                NodeKind::Seq(items) => {
                    Ok(Pattern::List(items.iter().map(|n| self.compile(n, Ctx::Elem(f))).collect::<Result<_, _>>()?))
                }
                other => fail(
                    node.loc,
                    format!(
                        "`{}` is a list: expected a list (or a matcher such as {{includes: […]}}), found {}",
                        f.name,
                        other.describe()
                    ),
                ),
            },
            Ctx::Field(f) | Ctx::Elem(f) => self.typed(node, f),
            Ctx::Free => self.free(node),
        }
    }

    fn message_fields(&mut self, node: &Node, idx: usize, top: bool) -> Result<Pattern, PatternError> {
        let schema = &MESSAGES[idx];
        let entries: &[(crate::yaml::Key, Node)] = match &node.kind {
            NodeKind::Map(e) => e,
            NodeKind::Null => &[],
            other => {
                return fail(
                    node.loc,
                    format!("expected a mapping of {} fields, found {}", schema.name, other.describe()),
                );
            }
        };
        let mut out = Vec::new();
        for (key, value) in entries {
            let name = key.name.as_str();
            if top && name == "arm" {
                out.push((
                    None,
                    Pattern::Arm(self.names_of(
                        value,
                        "an arm name",
                        &|n| Arm::from_name(n).is_some(),
                        &arm_names(),
                    )?),
                ));
            } else if top && name == "size_rule" {
                out.push((None, Pattern::SizeRule(self.size_rule(value)?)));
            } else if top && name == "via" {
                let vias: Vec<String> = VIAS.iter().map(|s| (*s).to_owned()).collect();
                out.push((None, Pattern::Via(self.names_of(value, "a result form", &|n| VIAS.contains(&n), &vias)?)));
            } else if (top && (name == "sideband" || name == "stream")) || name == dynamic::UNKNOWN_FIELDS {
                out.push((Some(key.name.clone()), self.compile(value, Ctx::Free)?));
            } else if let Some(f) = schema.field_by_name(name) {
                let p = self.compile(value, Ctx::Field(f))?;
                let p = match default_of(f) {
                    Some(d) => Pattern::Default(d, Box::new(p)),
                    None => p,
                };
                out.push((Some(key.name.clone()), p));
            } else {
                let mut valid: Vec<&str> = schema.fields.iter().map(|f| f.name).collect();
                valid.push(dynamic::UNKNOWN_FIELDS);
                if top {
                    valid.extend(ENVELOPE_PATTERN_KEYS);
                }
                let what = if top { "Envelope pattern".to_owned() } else { schema.name.to_owned() };
                return fail(key.loc, format!("{what} has no field `{name}`; valid: {}", valid.join(", ")));
            }
        }
        Ok(Pattern::Object(out))
    }

    /// A name or a list of names, each accepted by `ok`.
    /// `{sideband_over: N}` or `{compress_over: N}`.
    fn size_rule(&mut self, node: &Node) -> Result<SizeRule, PatternError> {
        const HELP: &str = "size_rule is {sideband_over: N} or {compress_over: N}";
        let NodeKind::Map(entries) = &node.kind else { return fail(node.loc, HELP.to_owned()) };
        let [(key, value)] = entries.as_slice() else { return fail(node.loc, HELP.to_owned()) };
        let n = match &value.kind {
            NodeKind::Int(n) => u64::try_from(*n).map_err(|_| PatternError { loc: value.loc, message: HELP.into() })?,
            other => return fail(value.loc, format!("{HELP}: expected a number, found {}", other.describe())),
        };
        match key.name.as_str() {
            "sideband_over" => Ok(SizeRule::SidebandOver(n)),
            "compress_over" => Ok(SizeRule::CompressOver(n)),
            other => fail(key.loc, format!("unknown size rule `{other}`; {HELP}")),
        }
    }

    fn names_of(
        &mut self,
        node: &Node,
        what: &str,
        ok: &dyn Fn(&str) -> bool,
        valid: &[String],
    ) -> Result<Vec<String>, PatternError> {
        let items: Vec<&Node> = match &node.kind {
            NodeKind::Seq(items) if !items.is_empty() => items.iter().collect(),
            NodeKind::Str(_) => vec![node],
            other => return fail(node.loc, format!("expected {what} or a list of them, found {}", other.describe())),
        };
        items
            .into_iter()
            .map(|n| match n.as_str() {
                Some(s) if ok(s) => Ok(s.to_owned()),
                Some(s) => fail(n.loc, format!("unknown {what} `{s}`; valid: {}", valid.join(", "))),
                None => fail(n.loc, format!("expected {what}, found {}", n.kind.describe())),
            })
            .collect()
    }

    /// The value of one (non-list) field of a known kind.
    fn typed(&mut self, node: &Node, f: &'static FieldSchema) -> Result<Pattern, PatternError> {
        let lone_placeholder = |c: &mut Self| -> Option<Result<Pattern, PatternError>> {
            let s = node.as_str()?;
            let pieces = template::parse(s).ok()?;
            matches!(pieces.as_slice(), [Piece::Var(_)]).then(|| c.pieces(s, node.loc).map(Pattern::Text))
        };
        match f.kind {
            FieldKind::Message(idx) => self.compile(node, Ctx::Msg(idx, false)),
            FieldKind::String if f.name.ends_with("_json") => self.json(node),
            FieldKind::String => match &node.kind {
                NodeKind::Str(s) => Ok(Pattern::Text(self.pieces(s, node.loc)?)),
                other => fail(
                    node.loc,
                    format!(
                        "`{}` is a string: expected a string, found {}{}",
                        f.name,
                        other.describe(),
                        if matches!(other, NodeKind::Null) {
                            " (write {absent: true} for an empty field)"
                        } else {
                            " (quote it)"
                        }
                    ),
                ),
            },
            FieldKind::Bytes => self.bytes(node, f),
            FieldKind::Bool => match &node.kind {
                NodeKind::Bool(b) => Ok(Pattern::Literal(Value::Bool(*b))),
                _ => lone_placeholder(self).unwrap_or_else(|| {
                    fail(
                        node.loc,
                        format!("`{}` is a boolean: expected true or false, found {}", f.name, node.kind.describe()),
                    )
                }),
            },
            kind => {
                let (name, min, max): (&str, i128, i128) = match kind {
                    FieldKind::Int32 => ("int32", i32::MIN.into(), i32::MAX.into()),
                    FieldKind::Int64 => ("int64", i64::MIN.into(), i64::MAX.into()),
                    FieldKind::Uint32 => ("uint32", 0, u32::MAX.into()),
                    _ => ("uint64", 0, u64::MAX.into()),
                };
                match &node.kind {
                    NodeKind::Int(i) if (min..=max).contains(i) => {
                        Ok(Pattern::Literal(Value::Number(dynamic::number_from_i128(*i).expect("in range"))))
                    }
                    NodeKind::Int(i) => fail(node.loc, format!("{i} is out of range for `{}` ({name})", f.name)),
                    _ => lone_placeholder(self).unwrap_or_else(|| {
                        fail(
                            node.loc,
                            format!("`{}` is an {name}: expected an integer, found {}", f.name, node.kind.describe()),
                        )
                    }),
                }
            }
        }
    }

    /// A bytes field: `{hex: …}` and/or `{text: …}` (matched against the decoded `{hex, text}`).
    fn bytes(&mut self, node: &Node, f: &FieldSchema) -> Result<Pattern, PatternError> {
        let Some(entries) = node.as_map() else {
            return fail(
                node.loc,
                format!("`{}` is bytes: expected {{hex: …}} or {{text: …}}, found {}", f.name, node.kind.describe()),
            );
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let p = match (k.name.as_str(), &v.kind) {
                ("hex", NodeKind::Str(s)) if !template::has_placeholders(s) => {
                    let bytes = dynamic::hex_decode(s)
                        .map_err(|m| PatternError { loc: v.loc, message: format!("invalid hex: {m}") })?;
                    Pattern::Text(vec![Piece::Lit(dynamic::hex_encode(&bytes))])
                }
                ("hex" | "text", _) => self.compile(v, Ctx::Free)?,
                (other, _) => {
                    return fail(k.loc, format!("bytes pattern has no key `{other}`; valid: hex, text"));
                }
            };
            out.push((Some(k.name.clone()), p));
        }
        Ok(Pattern::Object(out))
    }

    /// A `*_json` field (or a `json:` matcher): a string is JSON text, anything else a structure.
    fn json(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        match &node.kind {
            NodeKind::Str(s) if template::has_placeholders(s) => Ok(Pattern::JsonText(self.pieces(s, node.loc)?)),
            NodeKind::Str(s) => {
                // Validate placeholder syntax (`$$` escapes) before parsing.
                let text = template::fill_text(&self.pieces(s, node.loc)?, &Captures::new())
                    .map_err(|e| PatternError { loc: node.loc, message: e.to_string() })?;
                match serde_json::from_str::<Value>(&text) {
                    Ok(v) => Ok(Pattern::Json(Box::new(literal(&v)))),
                    Err(e) => fail(
                        node.loc,
                        format!(
                            "a string here is JSON text, and this one does not parse ({e}); match raw text with {{regex: …}}, {{contains: …}} or {{equals: …}}"
                        ),
                    ),
                }
            }
            _ => Ok(Pattern::Json(Box::new(self.compile(node, Ctx::Free)?))),
        }
    }

    fn free(&mut self, node: &Node) -> Result<Pattern, PatternError> {
        Ok(match &node.kind {
            NodeKind::Null => Pattern::Literal(Value::Null),
            NodeKind::Bool(b) => Pattern::Literal(Value::Bool(*b)),
            NodeKind::Int(_) | NodeKind::Float(_) => {
                Pattern::Literal(node.to_value().map_err(|(loc, message)| PatternError { loc, message })?)
            }
            NodeKind::Str(s) => Pattern::Text(self.pieces(s, node.loc)?),
            NodeKind::Seq(items) => {
                Pattern::List(items.iter().map(|n| self.compile(n, Ctx::Free)).collect::<Result<_, _>>()?)
            }
            NodeKind::Map(entries) => Pattern::Object(
                entries.iter().map(|(k, v)| Ok((Some(k.name.clone()), self.compile(v, Ctx::Free)?))).collect::<Result<
                    _,
                    PatternError,
                >>(
                )?,
            ),
        })
    }

    fn matchers(&mut self, node: &Node, ctx: Ctx) -> Result<Pattern, PatternError> {
        let entries = node.as_map().expect("checked by the caller");
        let elem_ctx = |k: &crate::yaml::Key| -> Result<Ctx, PatternError> {
            match ctx {
                Ctx::Field(f) if f.repeated => Ok(Ctx::Elem(f)),
                Ctx::Free => Ok(Ctx::Free),
                _ => fail(k.loc, format!("`{}` applies to lists, and this value is not one", k.name)),
            }
        };
        let mut all = Vec::new();
        for (k, v) in entries {
            let p = match k.name.as_str() {
                "regex" => {
                    let Some(s) = v.as_str() else { return fail(v.loc, "`regex` takes a string") };
                    if template::has_placeholders(s) {
                        let pieces = self.pieces(s, v.loc)?;
                        let probe: String =
                            pieces.iter().map(|p| if let Piece::Lit(l) = p { l.as_str() } else { "x" }).collect();
                        build_regex(&probe).map_err(|m| PatternError { loc: v.loc, message: m.to_string() })?;
                        Pattern::Regex(RegexPattern::Template(pieces))
                    } else {
                        let text = template::fill_text(&self.pieces(s, v.loc)?, &Captures::new())
                            .map_err(|e| PatternError { loc: v.loc, message: e.to_string() })?;
                        Pattern::Regex(RegexPattern::Fixed(
                            build_regex(&text).map_err(|m| PatternError { loc: v.loc, message: m.to_string() })?,
                        ))
                    }
                }
                "contains" => {
                    let Some(s) = v.as_str() else { return fail(v.loc, "`contains` takes a string") };
                    Pattern::Contains(self.pieces(s, v.loc)?)
                }
                "capture" => match v.as_str() {
                    Some(name) if template::is_name(name) => {
                        self.defined.push(name.to_owned());
                        Pattern::Capture(name.to_owned())
                    }
                    _ => {
                        return fail(
                            v.loc,
                            "`capture` takes a name: letters, digits and `_`, not starting with a digit",
                        );
                    }
                },
                "any_of" => match &v.kind {
                    NodeKind::Seq(items) if !items.is_empty() => {
                        Pattern::AnyOf(items.iter().map(|n| self.compile(n, ctx)).collect::<Result<_, _>>()?)
                    }
                    _ => return fail(v.loc, "`any_of` takes a non-empty list of patterns"),
                },
                "absent" => match v.kind {
                    NodeKind::Bool(b) => Pattern::Absent(b),
                    _ => return fail(v.loc, "`absent` takes true or false"),
                },
                "not_empty" => match v.kind {
                    NodeKind::Bool(true) => Pattern::NotEmpty,
                    _ => return fail(v.loc, "`not_empty` takes true (use {absent: true} for the opposite)"),
                },
                "unordered" | "includes" => {
                    let ectx = elem_ctx(k)?;
                    let NodeKind::Seq(items) = &v.kind else {
                        return fail(v.loc, format!("`{}` takes a list of patterns", k.name));
                    };
                    let ps = items.iter().map(|n| self.compile(n, ectx)).collect::<Result<_, _>>()?;
                    if k.name == "unordered" { Pattern::Unordered(ps) } else { Pattern::Includes(ps) }
                }
                "equals" => {
                    let value = v.to_value().map_err(|(loc, message)| PatternError { loc, message })?;
                    let mut names = Vec::new();
                    template::names_in(&value, &mut names);
                    self.used.extend(names.into_iter().map(|n| (n, v.loc)));
                    check_placeholders(&value).map_err(|e| PatternError { loc: v.loc, message: e.to_string() })?;
                    Pattern::Equals(value)
                }
                "not" => Pattern::Not(Box::new(self.compile(v, ctx)?)),
                "json" => self.json(v)?,
                "entries" => {
                    if !matches!(ctx, Ctx::Free) {
                        return fail(k.loc, "`entries` applies to JSON objects (MCP messages, *_json fields)");
                    }
                    let NodeKind::Seq(items) = &v.kind else {
                        return fail(v.loc, "`entries` takes a list of {key: …, value: …} patterns");
                    };
                    Pattern::Entries(items.iter().map(|n| self.compile(n, Ctx::Free)).collect::<Result<_, _>>()?)
                }
                _ => unreachable!("only keywords come here"),
            };
            all.push(p);
        }
        Ok(if all.len() == 1 { all.pop().expect("one") } else { Pattern::All(all) })
    }
}
