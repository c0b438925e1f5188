//! The checks in front of the Streamable HTTP endpoint (spec §23), in the order the spec gives:
//! Host (DNS rebinding, BR-HTTP-04), Origin (BR-HTTP-05), authentication (BR-HTTP-20/23,
//! BR-SECURITY-07), path and method (BR-HTTP-01/16). Sans-IO: headers in, verdict out.

/// Endpoint path (BR-HTTP-01).
pub const PATH: &str = "/mcp";

/// How the endpoint is guarded.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The listener is bound to loopback only: Host and Origin must name loopback.
    pub loopback: bool,
    /// `Authorization: Bearer <token>` required when set.
    pub token: Option<String>,
}

/// A refusal: status, reason, and whether to add `WWW-Authenticate: Bearer` / `Allow`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
}

/// Whether `host` (a Host header value or an authority, with optional port) names loopback.
pub fn is_loopback_host(host: &str) -> bool {
    if let Some(rest) = host.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else { return false };
        return inner == "::1" && (after.is_empty() || after.strip_prefix(':').is_some_and(valid_port));
    }
    let name = match host.rsplit_once(':') {
        Some((name, port)) if valid_port(port) => name,
        Some(_) => return false,
        None => host,
    };
    name.eq_ignore_ascii_case("localhost") || name == "127.0.0.1"
}

fn valid_port(p: &str) -> bool {
    !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit())
}

/// The authority of an Origin (`scheme://authority`), if it is one.
fn origin_authority(origin: &str) -> Option<&str> {
    let (scheme, rest) = origin.split_once("://")?;
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return None;
    }
    (!rest.is_empty() && !rest.contains('/')).then_some(rest)
}

impl Guard {
    /// The verdict for one request; `None` lets it through to the MCP server.
    pub fn check(
        &self,
        method: &str,
        path: &str,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Option<Refusal> {
        if self.loopback && !host.is_some_and(is_loopback_host) {
            return Some(Refusal { status: 403, reason: "Host is not a loopback name" });
        }
        if let Some(o) = origin {
            let allowed = match origin_authority(o) {
                Some(auth) => {
                    (self.loopback && is_loopback_host(auth)) || host.is_some_and(|h| h.eq_ignore_ascii_case(auth))
                }
                None => false,
            };
            if !allowed {
                return Some(Refusal { status: 403, reason: "Origin not allowed" });
            }
        }
        if let Some(token) = &self.token {
            // Exact match: no trimming, case-sensitive (BR-SECURITY-07).
            let ok = authorization.and_then(|a| a.strip_prefix("Bearer ")).is_some_and(|t| t == token);
            if !ok {
                return Some(Refusal { status: 401, reason: "missing or wrong bearer token" });
            }
        }
        if path != PATH {
            return Some(Refusal { status: 404, reason: "the MCP endpoint is /mcp" });
        }
        if !matches!(method, "GET" | "POST" | "DELETE") {
            return Some(Refusal { status: 405, reason: "method not allowed" });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names() {
        for ok in ["localhost", "localhost:8080", "127.0.0.1", "127.0.0.1:1", "[::1]", "[::1]:9", "LOCALHOST"] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in ["evil.com", "127.0.0.1.evil.com", "10.0.0.1:80", "[::2]", "localhost:", "localhost:x", ""] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn order_of_checks() {
        let g = Guard { loopback: true, token: Some("s3cret".into()) };
        let h = Some("127.0.0.1:5000");
        let ok = Some("Bearer s3cret");
        assert_eq!(g.check("POST", "/mcp", h, None, ok), None);
        assert_eq!(g.check("POST", "/mcp", Some("evil.com"), None, ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", None, None, ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", h, Some("https://evil.com"), ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", h, Some("http://localhost:3000"), ok), None);
        assert_eq!(g.check("POST", "/mcp", h, Some("null"), ok).unwrap().status, 403);
        for bad in [None, Some("Bearer S3CRET"), Some("Bearer s3cret "), Some("bearer s3cret"), Some("Bearer  s3cret")]
        {
            assert_eq!(g.check("POST", "/mcp", h, None, bad).unwrap().status, 401, "{bad:?}");
        }
        // Host and Origin come before authentication.
        assert_eq!(g.check("POST", "/mcp", Some("evil.com"), None, None).unwrap().status, 403);
        assert_eq!(g.check("PUT", "/mcp", h, None, ok).unwrap().status, 405);
        assert_eq!(g.check("POST", "/other", h, None, ok).unwrap().status, 404);
        let open = Guard { loopback: false, token: None };
        assert_eq!(g.check("POST", "/mcp", h, None, ok), None);
        assert_eq!(open.check("POST", "/mcp", Some("example.org"), Some("http://example.org"), None), None);
        assert_eq!(open.check("POST", "/mcp", Some("example.org"), Some("http://evil.org"), None).unwrap().status, 403);
    }
}
