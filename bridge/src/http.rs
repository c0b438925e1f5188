//! The checks in front of the Streamable HTTP endpoint (spec §23), in the order the spec gives:
//! Host (DNS rebinding, BR-HTTP-04), Origin (BR-HTTP-05), authentication (BR-HTTP-20/23,
//! BR-SECURITY-07, BR-HTTP-21/22 for API keys), path and method (BR-HTTP-01/16). Sans-IO:
//! headers in, verdict out.

use protomcp_proto::fault::{self, Fault};

/// Endpoint path (BR-HTTP-01).
pub const PATH: &str = "/mcp";

/// How the endpoint is guarded.
#[derive(Debug, Clone)]
pub struct Guard {
    /// The listener is bound to loopback only: Host and Origin must name loopback.
    pub loopback: bool,
    /// Credentials every request must carry, all of them (BR-HTTP-22); empty: none.
    pub auth: Vec<Credential>,
}

/// One credential configured with `--auth`, holding the secret's value.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// `--auth token:ENV`: `Authorization: Bearer <secret>`.
    Bearer(String),
    /// `--auth apikey:ENV`: `X-API-Key: <secret>`.
    ApiKey(String),
}

impl std::fmt::Debug for Credential {
    // The secret stays out of debug output (BR-SECURITY-06).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credential::Bearer(_) => "Bearer(..)",
            Credential::ApiKey(_) => "ApiKey(..)",
        })
    }
}

/// A refusal: status and reason; the caller adds `WWW-Authenticate: Bearer` when `challenge`
/// (a missing or wrong bearer token) and `Allow` to a 405.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub reason: &'static str,
    pub challenge: bool,
}

impl Refusal {
    fn new(status: u16, reason: &'static str) -> Self {
        Refusal { status, reason, challenge: false }
    }
}

/// The credential-bearing request headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// `Authorization`.
    pub authorization: Option<&'a str>,
    /// `X-API-Key`.
    pub api_key: Option<&'a str>,
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
        credentials: Credentials<'_>,
    ) -> Option<Refusal> {
        let loopback_host = |h: &str| {
            if fault::on(Fault::BrHttpHostSubstring) {
                return h.contains("localhost") || h.contains("127.0.0.1") || h.contains("[::1]");
            }
            is_loopback_host(h)
        };
        if self.loopback && !host.is_some_and(loopback_host) {
            return Some(Refusal::new(403, "Host is not a loopback name"));
        }
        let origin = origin.filter(|o| !(fault::on(Fault::BrHttpOriginNullAllowed) && *o == "null"));
        if origin.is_none() && fault::on(Fault::BrHttpOriginRequired) {
            return Some(Refusal::new(403, "Origin not allowed"));
        }
        if let Some(o) = origin {
            let allowed = match origin_authority(o) {
                Some(auth) => {
                    (self.loopback && is_loopback_host(auth)) || host.is_some_and(|h| h.eq_ignore_ascii_case(auth))
                }
                None => false,
            };
            if !allowed {
                return Some(Refusal::new(403, "Origin not allowed"));
            }
        }
        // Every credential must match (BR-HTTP-22); bearer tokens are checked first so that a
        // request lacking one gets the challenge. Exact match: no trimming, case-sensitive
        // (BR-SECURITY-07).
        let bearer = credentials.authorization.and_then(|a| a.strip_prefix("Bearer "));
        let checked = if fault::on(Fault::BrHttpFirstCredentialOnly) { 1 } else { self.auth.len() };
        let auth = &self.auth[..checked.min(self.auth.len())];
        for c in auth {
            if let Credential::Bearer(token) = c
                && bearer != Some(token.as_str())
                && !(fault::on(Fault::BrSecurityAuthCaseInsensitive)
                    && bearer.is_some_and(|b| b.eq_ignore_ascii_case(token)))
            {
                if fault::on(Fault::BrSecuritySecretLogged) {
                    crate::diag(&format!("refused bearer token {bearer:?} (expected {token:?})"));
                }
                return Some(Refusal { status: 401, reason: "missing or wrong bearer token", challenge: true });
            }
        }
        for c in auth {
            if let Credential::ApiKey(key) = c
                && !(fault::on(Fault::BrHttpApiKeyPostOnly) && method != "POST")
                && credentials.api_key != Some(key.as_str())
            {
                return Some(Refusal::new(401, "missing or wrong API key"));
            }
        }
        let endpoint = if fault::on(Fault::BrHttpPathRoot) { "/" } else { PATH };
        if path != endpoint {
            return Some(Refusal::new(404, "the MCP endpoint is /mcp"));
        }
        if !matches!(method, "GET" | "POST" | "DELETE") {
            return Some(Refusal::new(405, "method not allowed"));
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
        let g = Guard { loopback: true, auth: vec![Credential::Bearer("s3cret".into())] };
        let h = Some("127.0.0.1:5000");
        let ok = bearer(Some("Bearer s3cret"));
        assert_eq!(g.check("POST", "/mcp", h, None, ok), None);
        assert_eq!(g.check("POST", "/mcp", Some("evil.com"), None, ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", None, None, ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", h, Some("https://evil.com"), ok).unwrap().status, 403);
        assert_eq!(g.check("POST", "/mcp", h, Some("http://localhost:3000"), ok), None);
        assert_eq!(g.check("POST", "/mcp", h, Some("null"), ok).unwrap().status, 403);
        for bad in [None, Some("Bearer S3CRET"), Some("Bearer s3cret "), Some("bearer s3cret"), Some("Bearer  s3cret")]
        {
            let r = g.check("POST", "/mcp", h, None, bearer(bad)).unwrap();
            assert_eq!((r.status, r.challenge), (401, true), "{bad:?}");
        }
        // Host and Origin come before authentication.
        assert_eq!(g.check("POST", "/mcp", Some("evil.com"), None, bearer(None)).unwrap().status, 403);
        assert_eq!(g.check("PUT", "/mcp", h, None, ok).unwrap().status, 405);
        assert_eq!(g.check("POST", "/other", h, None, ok).unwrap().status, 404);
        let open = Guard { loopback: false, auth: vec![] };
        let none = Credentials::default();
        assert_eq!(g.check("POST", "/mcp", h, None, ok), None);
        assert_eq!(open.check("POST", "/mcp", Some("example.org"), Some("http://example.org"), none), None);
        assert_eq!(open.check("POST", "/mcp", Some("example.org"), Some("http://evil.org"), none).unwrap().status, 403);
    }

    fn bearer(authorization: Option<&str>) -> Credentials<'_> {
        Credentials { authorization, api_key: None }
    }

    #[test]
    fn every_credential_must_match() {
        let g =
            Guard { loopback: true, auth: vec![Credential::Bearer("tok".into()), Credential::ApiKey("key".into())] };
        let h = Some("localhost");
        let both = Credentials { authorization: Some("Bearer tok"), api_key: Some("key") };
        assert_eq!(g.check("POST", "/mcp", h, None, both), None);
        let cases = [
            (Credentials { authorization: None, api_key: Some("key") }, true),
            (Credentials { authorization: Some("Bearer key"), api_key: Some("key") }, true),
            (Credentials { authorization: Some("Bearer tok"), api_key: None }, false),
            (Credentials { authorization: Some("Bearer tok"), api_key: Some("KEY") }, false),
            (Credentials { authorization: Some("Bearer tok"), api_key: Some("key ") }, false),
            (Credentials { authorization: Some("Bearer tok"), api_key: Some("tok") }, false),
        ];
        for (c, challenge) in cases {
            let r = g.check("POST", "/mcp", h, None, c).unwrap();
            assert_eq!((r.status, r.challenge), (401, challenge), "{c:?}");
        }
        let key_only = Guard { loopback: true, auth: vec![Credential::ApiKey("key".into())] };
        assert_eq!(
            key_only.check("GET", "/mcp", h, None, Credentials { authorization: None, api_key: Some("key") }),
            None
        );
        let r = key_only.check("DELETE", "/x", h, None, bearer(Some("Bearer key"))).unwrap();
        assert_eq!((r.status, r.challenge), (401, false));
        assert_eq!(format!("{:?}", g.auth), "[Bearer(..), ApiKey(..)]");
    }
}
