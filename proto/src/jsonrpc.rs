//! JSON-RPC 2.0 vocabulary shared by everything that speaks MCP: error codes by name and request
//! ids as the protocol defines them (a string or an integer; never a fraction, never null in a
//! request).

use std::fmt;

use serde_json::Value;

/// A JSON-RPC error code. The named ones are those of JSON-RPC 2.0 and of MCP that the harness
/// and the reference bridge send or check; any other integer is a valid code too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: ErrorCode = ErrorCode(-32700);
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: ErrorCode = ErrorCode(-32600);
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: ErrorCode = ErrorCode(-32601);
    /// Invalid method parameters.
    pub const INVALID_PARAMS: ErrorCode = ErrorCode(-32602);
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(-32603);
    /// MCP: the resource does not exist (resources/read).
    pub const RESOURCE_NOT_FOUND: ErrorCode = ErrorCode(-32002);
    /// MCP 2026-07-28: an HTTP header is missing or does not match the body.
    pub const HEADER_MISMATCH: ErrorCode = ErrorCode(-32020);
    /// MCP 2026-07-28: the request's protocol version is not supported.
    pub const UNSUPPORTED_VERSION: ErrorCode = ErrorCode(-32022);

    pub const fn code(self) -> i32 {
        self.0
    }

    /// The name of a named code, for reports.
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::PARSE_ERROR => "parse error",
            ErrorCode::INVALID_REQUEST => "invalid request",
            ErrorCode::METHOD_NOT_FOUND => "method not found",
            ErrorCode::INVALID_PARAMS => "invalid params",
            ErrorCode::INTERNAL_ERROR => "internal error",
            ErrorCode::HEADER_MISMATCH => "header mismatch",
            ErrorCode::UNSUPPORTED_VERSION => "unsupported protocol version",
            ErrorCode::RESOURCE_NOT_FOUND => "resource not found",
            _ => return None,
        })
    }
}

impl From<ErrorCode> for i32 {
    fn from(c: ErrorCode) -> i32 {
        c.0
    }
}

impl From<ErrorCode> for Value {
    fn from(c: ErrorCode) -> Value {
        Value::from(c.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{} ({n})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// A request id: a string or an integer (JSON-RPC 2.0 §4; MCP forbids null).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Number(i64),
    String(String),
}

impl RequestId {
    /// The id of a request message, if it has a valid one.
    pub fn of(v: &Value) -> Option<RequestId> {
        match v {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::String(s.clone()),
        }
    }
}

impl From<&RequestId> for Value {
    fn from(id: &RequestId) -> Value {
        id.to_value()
    }
}

impl fmt::Display for RequestId {
    /// As it is written in JSON: `7`, `"a"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{}", Value::String(s.clone())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn named_codes_print_their_number_and_name_and_others_their_number() {
        assert_eq!(ErrorCode::INVALID_PARAMS.to_string(), "-32602 (invalid params)");
        assert_eq!(ErrorCode(7).to_string(), "7");
        assert_eq!(Value::from(ErrorCode::RESOURCE_NOT_FOUND), json!(-32002));
    }

    #[test]
    fn request_ids_are_strings_or_integers_and_nothing_else() {
        assert_eq!(RequestId::of(&json!(3)), Some(RequestId::Number(3)));
        assert_eq!(RequestId::of(&json!("x")), Some(RequestId::String("x".into())));
        assert_eq!(RequestId::of(&json!(1.5)), None);
        assert_eq!(RequestId::of(&Value::Null), None);
        assert_eq!(RequestId::String("x".into()).to_string(), "\"x\"");
        assert_eq!(RequestId::Number(-4).to_value(), json!(-4));
    }
}
