//! What an HTTP request must be before its body is read as JSON-RPC, as
//! geth checks it: a JSON content type (so a cross-site page cannot send a
//! "simple request" without a CORS preflight), a `Host` the node answers
//! to (`rpc.vhosts`, against DNS rebinding), and a body that arrives
//! within `rpc.read_timeout_ms` and within `rpc.max_request_body_bytes`.

use std::time::Duration;

use actix_web::{http::header, web, HttpRequest, HttpResponse};
use futures::StreamExt;

/// Why a request was refused before its body was read as JSON-RPC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not a JSON content type: 415.
    NotJson,
    /// A `Host` outside `rpc.vhosts`: 403.
    UnknownHost,
    /// A body past `rpc.max_request_body_bytes`: 413.
    TooLarge(usize),
    /// A body not in within `rpc.read_timeout_ms`: 408.
    TimedOut,
    /// The body could not be read (the client broke it off): 400.
    Unreadable(String),
}

impl Refused {
    /// The HTTP answer, in geth's words where geth has them; a refused body
    /// is never read on, so its connection is closed.
    pub(crate) fn response(self) -> HttpResponse {
        match self {
            Refused::NotJson => HttpResponse::UnsupportedMediaType()
                .content_type("text/plain")
                .body("invalid content type, only application/json is supported"),
            Refused::UnknownHost => {
                HttpResponse::Forbidden().content_type("text/plain").body("invalid host specified")
            }
            Refused::TooLarge(limit) => HttpResponse::PayloadTooLarge()
                .force_close()
                .content_type("text/plain")
                .body(format!("content length too large (limit {limit} bytes)")),
            Refused::TimedOut => HttpResponse::RequestTimeout()
                .force_close()
                .content_type("text/plain")
                .body("request body timed out"),
            Refused::Unreadable(e) => {
                HttpResponse::BadRequest().force_close().content_type("text/plain").body(e)
            }
        }
    }
}

/// The content types geth accepts for JSON-RPC over HTTP.
const JSON_TYPES: [&str; 3] = ["application/json", "application/json-rpc", "application/jsonrequest"];

/// Refused unless the request says its body is JSON.
pub(crate) fn json_content(req: &HttpRequest) -> Result<(), Refused> {
    let media = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
    match media {
        Some(m) if JSON_TYPES.contains(&m.as_str()) => Ok(()),
        _ => Err(Refused::NotJson),
    }
}

/// Refused unless the request's `Host` is one `vhosts` allows (comma-separated,
/// `*` any; case-insensitive): as geth, a request without a `Host` or to an
/// IP address passes, since DNS rebinding needs a name.
pub(crate) fn allowed_host(req: &HttpRequest, vhosts: &str) -> Result<(), Refused> {
    let Some(host) = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let name = host_name(host);
    let allowed = name.is_empty()
        || name.parse::<std::net::IpAddr>().is_ok()
        || vhosts.split(',').map(str::trim).any(|v| v == "*" || v.eq_ignore_ascii_case(name));
    if allowed {
        Ok(())
    } else {
        Err(Refused::UnknownHost)
    }
}

/// The name part of a `Host` header: without its port, and without the
/// brackets of an IPv6 literal.
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => name,
        _ => host,
    }
}

/// Reads the whole body within `timeout` of the head and `limit` bytes.
pub(crate) async fn read_body(
    mut payload: web::Payload,
    limit: usize,
    timeout: Duration,
) -> Result<web::Bytes, Refused> {
    let read = async {
        let mut body = web::BytesMut::new();
        while let Some(chunk) = payload.next().await {
            let chunk = chunk.map_err(|e| Refused::Unreadable(e.to_string()))?;
            if body.len() + chunk.len() > limit {
                return Err(Refused::TooLarge(limit));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    };
    match tokio::time::timeout(timeout, read).await {
        Ok(read) => read,
        Err(_) => {
            metrics::counter!(crate::metrics::HTTP_TIMED_OUT, "stage" => "read").increment(1);
            Err(Refused::TimedOut)
        }
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn only_json_bodies_pass() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/json-rpc",
        ] {
            let req = TestRequest::default().insert_header((header::CONTENT_TYPE, ok)).to_http_request();
            assert!(json_content(&req).is_ok(), "{ok}");
        }
        for bad in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""] {
            let req = TestRequest::default().insert_header((header::CONTENT_TYPE, bad)).to_http_request();
            assert_eq!(json_content(&req), Err(Refused::NotJson), "{bad}");
            assert_eq!(Refused::NotJson.response().status(), 415);
        }
        assert!(json_content(&TestRequest::default().to_http_request()).is_err(), "none");
    }

    #[test]
    fn hosts_pass_by_name_in_the_list_or_by_address() {
        let check = |host: &str, vhosts: &str| {
            let req = TestRequest::default().insert_header((header::HOST, host)).to_http_request();
            allowed_host(&req, vhosts).is_ok()
        };
        assert!(check("localhost:8545", "localhost"));
        assert!(check("LOCALHOST", "localhost"));
        assert!(check("127.0.0.1:8545", "localhost"));
        assert!(check("[::1]:8545", "localhost"));
        assert!(check("10.0.0.7", ""));
        assert!(check("node.example:8545", "localhost, node.example"));
        assert!(check("anything.example", "*"));
        assert!(!check("evil.example", "localhost"));
        assert!(!check("evil.example:8545", "localhost"));
        assert!(!check("localhost.evil.example", "localhost"));
    }
}
