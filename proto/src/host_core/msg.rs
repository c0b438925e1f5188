//! Typed JSON-RPC 2.0 messages between a host and a bridge's MCP side, in the manner of
//! lsp-server's `msg.rs`: a [`Message`] is a [`Request`], a [`Notification`] or a [`Response`];
//! params and results stay JSON values, which the host core reads per method.

use serde_json::{Map, Value, json};

use crate::jsonrpc::{ErrorCode, RequestId};

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// A request: it gets exactly one [`Response`] (unless cancelled, BR-CANCEL-02).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub id: RequestId,
    pub method: String,
    /// `None` when absent or null.
    pub params: Option<Value>,
}

/// A notification: never answered (BR-MCP-19).
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub method: String,
    pub params: Option<Value>,
}

/// A response: a result or an error. `id` is `None` only for an error that answers a message
/// whose id could not be read (JSON-RPC writes it as null).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: Option<RequestId>,
    pub outcome: Result<Value, ResponseError>,
}

/// The error object of a response.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ResponseError {
    pub code: ErrorCode,
    pub message: String,
    pub data: Option<Value>,
}

/// Why a JSON value is not a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAMessage {
    #[error("not a JSON object")]
    NotAnObject,
    #[error("\"jsonrpc\" is not \"2.0\"")]
    Version,
    #[error("\"method\" is not a string")]
    Method,
    #[error("the id is neither a string nor an integer")]
    Id,
    #[error("a response needs exactly one of \"result\" and \"error\"")]
    Outcome,
    #[error("the error object needs an integer \"code\" and a string \"message\"")]
    ErrorObject,
}

impl ResponseError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ResponseError { code, message: message.into(), data: None }
    }

    fn to_value(&self) -> Value {
        let mut e = json!({"code": self.code.code(), "message": self.message});
        if let Some(d) = &self.data {
            e["data"] = d.clone();
        }
        e
    }
}

impl Request {
    pub fn new(id: RequestId, method: impl Into<String>, params: Option<Value>) -> Self {
        Request { id, method: method.into(), params }
    }

    /// A member of the params, when the params are an object holding it.
    pub fn param(&self, name: &str) -> Option<&Value> {
        self.params.as_ref()?.get(name)
    }
}

impl Notification {
    pub fn new(method: impl Into<String>, params: Option<Value>) -> Self {
        Notification { method: method.into(), params }
    }
}

impl Response {
    pub fn ok(id: RequestId, result: Value) -> Self {
        Response { id: Some(id), outcome: Ok(result) }
    }

    pub fn err(id: Option<RequestId>, code: ErrorCode, message: impl Into<String>) -> Self {
        Response { id, outcome: Err(ResponseError::new(code, message)) }
    }
}

fn with_params(mut o: Map<String, Value>, params: &Option<Value>) -> Value {
    if let Some(p) = params {
        o.insert("params".into(), p.clone());
    }
    Value::Object(o)
}

impl Message {
    /// Reads a JSON value as a message.
    pub fn from_value(v: &Value) -> Result<Message, NotAMessage> {
        let o = v.as_object().ok_or(NotAMessage::NotAnObject)?;
        if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(NotAMessage::Version);
        }
        let params = o.get("params").filter(|p| !p.is_null()).cloned();
        let id = match o.get("id") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(i) => Some(Some(RequestId::of(i).ok_or(NotAMessage::Id)?)),
        };
        if let Some(m) = o.get("method") {
            let method = m.as_str().ok_or(NotAMessage::Method)?.to_owned();
            return match id {
                None => Ok(Message::Notification(Notification { method, params })),
                Some(Some(id)) => Ok(Message::Request(Request { id, method, params })),
                Some(None) => Err(NotAMessage::Id),
            };
        }
        let outcome = match (o.get("result"), o.get("error")) {
            (Some(r), None) => Ok(r.clone()),
            (None, Some(e)) => {
                let eo = e.as_object().ok_or(NotAMessage::ErrorObject)?;
                let code = eo.get("code").and_then(Value::as_i64).ok_or(NotAMessage::ErrorObject)?;
                let message = eo.get("message").and_then(Value::as_str).ok_or(NotAMessage::ErrorObject)?;
                Err(ResponseError {
                    code: ErrorCode(i32::try_from(code).map_err(|_| NotAMessage::ErrorObject)?),
                    message: message.to_owned(),
                    data: eo.get("data").cloned(),
                })
            }
            _ => return Err(NotAMessage::Outcome),
        };
        match id {
            Some(id) => Ok(Message::Response(Response { id, outcome })),
            None => Err(NotAMessage::Id),
        }
    }

    /// The message as JSON.
    pub fn to_value(&self) -> Value {
        let mut o = Map::new();
        o.insert("jsonrpc".into(), Value::from("2.0"));
        match self {
            Message::Request(r) => {
                o.insert("id".into(), r.id.to_value());
                o.insert("method".into(), Value::from(r.method.as_str()));
                with_params(o, &r.params)
            }
            Message::Notification(n) => {
                o.insert("method".into(), Value::from(n.method.as_str()));
                with_params(o, &n.params)
            }
            Message::Response(r) => {
                o.insert("id".into(), r.id.as_ref().map_or(Value::Null, RequestId::to_value));
                match &r.outcome {
                    Ok(v) => o.insert("result".into(), v.clone()),
                    Err(e) => o.insert("error".into(), e.to_value()),
                };
                Value::Object(o)
            }
        }
    }

    /// The message as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        self.to_value().to_string()
    }
}

impl From<Request> for Message {
    fn from(r: Request) -> Self {
        Message::Request(r)
    }
}

impl From<Notification> for Message {
    fn from(n: Notification) -> Self {
        Message::Notification(n)
    }
}

impl From<Response> for Message {
    fn from(r: Response) -> Self {
        Message::Response(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_message_reads_back_as_it_was_written() {
        let msgs = [
            Message::from(Request::new(RequestId::Number(7), "tools/call", Some(json!({"name": "x"})))),
            Message::from(Request::new(RequestId::String("a".into()), "ping", None)),
            Message::from(Notification::new("notifications/initialized", None)),
            Message::from(Response::ok(RequestId::Number(1), json!({}))),
            Message::from(Response::err(None, ErrorCode::PARSE_ERROR, "parse error")),
        ];
        for m in msgs {
            assert_eq!(Message::from_value(&m.to_value()), Ok(m.clone()), "{}", m.to_line());
        }
    }

    #[test]
    fn values_that_are_not_messages_say_why() {
        let cases = [
            (json!([1]), NotAMessage::NotAnObject),
            (json!({"jsonrpc": "1.0", "method": "x"}), NotAMessage::Version),
            (json!({"jsonrpc": "2.0", "method": 3}), NotAMessage::Method),
            (json!({"jsonrpc": "2.0", "id": 1.5, "method": "x"}), NotAMessage::Id),
            (json!({"jsonrpc": "2.0", "id": null, "method": "x"}), NotAMessage::Id),
            (json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}), NotAMessage::Outcome),
            (json!({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}), NotAMessage::ErrorObject),
        ];
        for (v, why) in cases {
            assert_eq!(Message::from_value(&v), Err(why), "{v}");
        }
    }
}
