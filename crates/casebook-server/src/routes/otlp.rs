//! The OTLP/HTTP receiver: what OpenTelemetry exporters send (`POST /v1/traces` and
//! `POST /v1/logs`, the paths an SDK appends to `OTEL_EXPORTER_OTLP_ENDPOINT`, and the project's
//! own `POST /api/v1/projects/{project}/v1/traces` and `…/v1/logs`), protobuf or JSON, gzip or
//! not, authenticated by the project's API key in `Authorization` (`OTEL_EXPORTER_OTLP_HEADERS`).
//! Spans are not made into cases at once: they are kept in the store ([`crate::pending`] makes
//! the cases of a trace when it is complete), so a trace sent in several batches becomes its
//! cases once, whole. Log records carrying GenAI events (the messages of instrumentations that
//! write them to logs) are kept with the spans of their trace and join them when the cases are
//! made, as `casebook capture traces.json logs.json` joins them; other log records are taken and
//! not kept.
//!
//! Answers follow the OTLP/HTTP specification: 200 with an `ExportTraceServiceResponse` (or
//! `ExportLogsServiceResponse`) in the request's encoding (its `partial_success` counts the spans
//! or GenAI records left out); every failure has a `google.rpc.Status` body, protobuf when the
//! request was protobuf, JSON otherwise: 400 for a body that cannot be decoded; 401 for a missing
//! or bad key, 403 for a read-only one, 404 for another project's route; 415 for another content
//! type or encoding; 413 for a body (or its decompressed bytes) over [`crate::Limits::max_otlp`];
//! 429 with `Retry-After` when [`crate::Limits::max_receiving`] requests are being received
//! already; 503 with `Retry-After` when [`crate::Limits::max_pending_spans`] spans wait already.
//! Exporters retry 429 and 503 after the delay given.
//!
//! The dataset: the one the `X-Casebook-Dataset` header names, else one per `service.name`
//! ([`dataset_for`]).

use std::collections::BTreeMap;
use std::io::Read;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use casebook_formats::capture::logs::Record;
use casebook_formats::capture::{self, Signal, Span};
use casebook_store::{PendingSpan, Store};
use futures_util::StreamExt;
use prost::Message;
use serde_json::json;

use crate::AppState;
use crate::api::PendingList;
use crate::auth::{Reader, Writer};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::Path;

/// The dataset of spans whose request has no `X-Casebook-Dataset` and whose resource has no
/// `service.name`.
pub const DEFAULT_DATASET: &str = "traces";

/// The dataset a span goes to without `X-Casebook-Dataset`: its `service.name` made a valid
/// dataset name: `/`, `@`, control, bidirectional and invisible characters become `-`, white
/// space at either end is trimmed, it is cut to 128 bytes (at a character boundary); an empty
/// name, `.` or `..` is [`DEFAULT_DATASET`].
pub fn dataset_for(service: Option<&str>) -> String {
    let Some(service) = service else { return DEFAULT_DATASET.to_owned() };
    let mut out = String::new();
    for c in service.trim().chars() {
        let c = if c == '/' || c == '@' || c.is_control() || invisible(c) { '-' } else { c };
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    match casebook_store::names::dataset_name(&out) {
        Ok(name) if !matches!(name.as_str(), "" | "." | "..") => name,
        _ => DEFAULT_DATASET.to_owned(),
    }
}

fn invisible(c: char) -> bool {
    matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(crate) struct ProjectPath {
    /// The project (the API key's).
    #[allow(dead_code)] // `auth` checks it against the key's project
    pub project: String,
}

/// Receives spans as OpenTelemetry exporters send them (OTLP/HTTP), into the API key's
/// project. The spans are kept until their trace is complete, then made into cases (one per
/// agent invocation, draft expectations) of the dataset `X-Casebook-Dataset` names, else of one
/// dataset per `service.name`.
#[utoipa::path(post, path = "/v1/traces", tag = "capture", security(("bearer" = ["write"])),
    params(("X-Casebook-Dataset" = Option<String>, Header, description = "The dataset the cases go to (default: one per `service.name`)")),
    request_body(description = "An OTLP `ExportTraceServiceRequest`, protobuf or JSON, gzip or not",
        content((Vec<u8> = "application/x-protobuf"), (Object = "application/json"))),
    responses((status = 200, description = "Received (an `ExportTraceServiceResponse`, in the request's encoding; `partial_success` counts spans left out)"),
        (status = 400, description = "The body is not an `ExportTraceServiceRequest` in its content type (a `google.rpc.Status`, as every failure)"),
        (status = 401, description = "No key, or an unknown or revoked one"), (status = 403, description = "A read-only key"),
        (status = 413, description = "The body, or its decompressed bytes, is too large"),
        (status = 415, description = "Another content type or content encoding"),
        (status = 429, description = "Too many requests are being received: retry after `Retry-After` seconds"),
        (status = 503, description = "Too many spans wait to be made into cases: retry after `Retry-After` seconds")))]
pub async fn traces(
    State(state): State<AppState>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    receive(state, Signal::Traces, writer, headers, body).await
}

/// [`traces`] on the project's own route.
#[utoipa::path(post, path = "/api/v1/projects/{project}/v1/traces", tag = "capture",
    security(("bearer" = ["write"])),
    params(ProjectPath, ("X-Casebook-Dataset" = Option<String>, Header, description = "The dataset the cases go to (default: one per `service.name`)")),
    request_body(description = "An OTLP `ExportTraceServiceRequest`, protobuf or JSON, gzip or not",
        content((Vec<u8> = "application/x-protobuf"), (Object = "application/json"))),
    responses((status = 200, description = "Received (an `ExportTraceServiceResponse`, in the request's encoding)"),
        (status = 400, description = "The body is not an `ExportTraceServiceRequest` in its content type (a `google.rpc.Status`, as every failure)"),
        (status = 401, description = "No key, or an unknown or revoked one"), (status = 403, description = "A read-only key"),
        (status = 404, description = "Another project than the key's"),
        (status = 413, description = "The body, or its decompressed bytes, is too large"),
        (status = 415, description = "Another content type or content encoding"),
        (status = 429, description = "Too many requests are being received: retry after `Retry-After` seconds"),
        (status = 503, description = "Too many spans wait to be made into cases: retry after `Retry-After` seconds")))]
pub async fn project_traces(
    State(state): State<AppState>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    receive(state, Signal::Traces, writer, headers, body).await
}

/// Receives log records as OpenTelemetry exporters send them (OTLP/HTTP), into the API key's
/// project: those carrying GenAI events (the messages of instrumentations that write them to
/// logs) are kept with the spans of their trace and join them when its cases are made (a record
/// after that rebuilds them, as a late span does; one whose trace never comes is dropped after
/// `--capture-max-wait`, with a warning); other records are taken and not kept.
#[utoipa::path(post, path = "/v1/logs", tag = "capture", security(("bearer" = ["write"])),
    params(("X-Casebook-Dataset" = Option<String>, Header, description = "The dataset of the records (their trace's spans decide it when they come)")),
    request_body(description = "An OTLP `ExportLogsServiceRequest`, protobuf or JSON, gzip or not",
        content((Vec<u8> = "application/x-protobuf"), (Object = "application/json"))),
    responses((status = 200, description = "Received (an `ExportLogsServiceResponse`, in the request's encoding; `partial_success` counts GenAI records left out)"),
        (status = 400, description = "The body is not an `ExportLogsServiceRequest` in its content type (a `google.rpc.Status`, as every failure)"),
        (status = 401, description = "No key, or an unknown or revoked one"), (status = 403, description = "A read-only key"),
        (status = 413, description = "The body, or its decompressed bytes, is too large"),
        (status = 415, description = "Another content type or content encoding"),
        (status = 429, description = "Too many requests are being received: retry after `Retry-After` seconds"),
        (status = 503, description = "Too many spans wait to be made into cases: retry after `Retry-After` seconds")))]
pub async fn logs(
    State(state): State<AppState>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    receive(state, Signal::Logs, writer, headers, body).await
}

/// [`logs`] on the project's own route.
#[utoipa::path(post, path = "/api/v1/projects/{project}/v1/logs", tag = "capture",
    security(("bearer" = ["write"])),
    params(ProjectPath, ("X-Casebook-Dataset" = Option<String>, Header, description = "The dataset of the records (their trace's spans decide it when they come)")),
    request_body(description = "An OTLP `ExportLogsServiceRequest`, protobuf or JSON, gzip or not",
        content((Vec<u8> = "application/x-protobuf"), (Object = "application/json"))),
    responses((status = 200, description = "Received (an `ExportLogsServiceResponse`, in the request's encoding)"),
        (status = 400, description = "The body is not an `ExportLogsServiceRequest` in its content type (a `google.rpc.Status`, as every failure)"),
        (status = 401, description = "No key, or an unknown or revoked one"), (status = 403, description = "A read-only key"),
        (status = 404, description = "Another project than the key's"),
        (status = 413, description = "The body, or its decompressed bytes, is too large"),
        (status = 415, description = "Another content type or content encoding"),
        (status = 429, description = "Too many requests are being received: retry after `Retry-After` seconds"),
        (status = 503, description = "Too many spans wait to be made into cases: retry after `Retry-After` seconds")))]
pub async fn project_logs(
    State(state): State<AppState>,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    receive(state, Signal::Logs, writer, headers, body).await
}

/// The traces whose spans the receiver keeps (those waiting to be complete, and those made into
/// cases whose spans are kept a while for late ones, `captured`), and the most recent warnings of
/// the captures made of them, per dataset.
#[utoipa::path(get, path = "/api/v1/projects/{project}/capture/pending", tag = "capture",
    security(("bearer" = ["read"])), params(ProjectPath),
    responses((status = 200, body = PendingList), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn pending(reader: Reader, Path(_path): Path<ProjectPath>) -> ApiResult<axum::Json<PendingList>> {
    let traces = reader.store.pending_traces(false).await?;
    let warnings = reader.store.capture_warnings().await?;
    Ok(axum::Json(PendingList {
        traces: traces.into_iter().map(Into::into).collect(),
        warnings: warnings.into_iter().map(Into::into).collect(),
    }))
}

/// The encoding of a request (and so of its answer).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

/// The encoding of a request by its content type, `None` for neither.
fn encoding_of(headers: &HeaderMap) -> Option<Encoding> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match media.as_str() {
        "application/x-protobuf" | "application/protobuf" => Some(Encoding::Protobuf),
        "application/json" => Some(Encoding::Json),
        _ => None,
    }
}

/// `google.rpc.Status`, which OTLP/HTTP answers errors with (its `details` left empty).
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// gRPC's code for an argument that is not valid.
const INVALID_ARGUMENT: i32 = 3;
/// gRPC's code for a resource used up.
const RESOURCE_EXHAUSTED: i32 = 8;
/// gRPC's code for a service that cannot answer now.
const UNAVAILABLE: i32 = 14;

fn status(encoding: Encoding, http: StatusCode, code: i32, message: String) -> Response {
    let (content_type, bytes) = match encoding {
        Encoding::Protobuf => ("application/x-protobuf", RpcStatus { code, message }.encode_to_vec()),
        Encoding::Json => ("application/json", json!({"code": code, "message": message}).to_string().into_bytes()),
    };
    (http, [(CONTENT_TYPE, HeaderValue::from_static(content_type))], bytes).into_response()
}

/// The API's error as a `google.rpc.Status` (its gRPC code the one of its HTTP status), keeping
/// its request id header.
fn api_status(encoding: Encoding, err: ApiError) -> Response {
    let code = match err.status {
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNPROCESSABLE_ENTITY => INVALID_ARGUMENT,
        StatusCode::UNAUTHORIZED => 16, // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,     // PERMISSION_DENIED
        StatusCode::NOT_FOUND => 5,     // NOT_FOUND
        StatusCode::CONFLICT => 10,     // ABORTED
        StatusCode::TOO_MANY_REQUESTS => RESOURCE_EXHAUSTED,
        StatusCode::SERVICE_UNAVAILABLE => UNAVAILABLE,
        StatusCode::GATEWAY_TIMEOUT | StatusCode::REQUEST_TIMEOUT => 4, // DEADLINE_EXCEEDED
        _ => 13,                                                        // INTERNAL
    };
    let mut response = status(encoding, err.status, code, err.body.message.clone());
    if let Ok(value) = err.body.request_id.parse() {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

fn retry_later(encoding: Encoding, http: StatusCode, code: i32, seconds: u32, message: String) -> Response {
    let mut response = status(encoding, http, code, message);
    response.headers_mut().insert(RETRY_AFTER, seconds.into());
    response
}

async fn receive(
    state: AppState,
    signal: Signal,
    writer: Result<Writer, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    // Failures before the content type is known answer in JSON.
    let encoding = encoding_of(&headers);
    let writer = match writer {
        Ok(writer) => writer,
        Err(e) => return api_status(encoding.unwrap_or(Encoding::Json), e),
    };
    let Some(encoding) = encoding else {
        return status(
            Encoding::Json,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            INVALID_ARGUMENT,
            format!(
                "the content type `{content_type}` is not OTLP: send `application/x-protobuf` or `application/json`"
            ),
        );
    };
    let gzip = match headers.get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()).map(str::trim) {
        None | Some("" | "identity") => false,
        Some(e) if e.eq_ignore_ascii_case("gzip") => true,
        Some(other) => {
            return status(
                encoding,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                INVALID_ARGUMENT,
                format!("the content encoding `{other}` is not taken: send the body as it is, or gzip"),
            );
        }
    };
    let limits = &state.limits;
    let Ok(_permit) = state.receiver.receiving.clone().try_acquire_owned() else {
        return retry_later(
            encoding,
            StatusCode::TOO_MANY_REQUESTS,
            RESOURCE_EXHAUSTED,
            1,
            format!("{} requests are being received already: retry later", limits.max_receiving),
        );
    };
    if state.receiver.backlog() >= limits.max_pending_spans {
        return retry_later(
            encoding,
            StatusCode::SERVICE_UNAVAILABLE,
            UNAVAILABLE,
            crate::pending::BACKLOG_RETRY_SECONDS,
            format!(
                "{} spans and log records wait to be made into cases already (`casebook serve --max-pending-spans`): retry later",
                limits.max_pending_spans
            ),
        );
    }
    let max = limits.max_otlp;
    let batch = match signal {
        Signal::Traces => "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        Signal::Logs => "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE",
    };
    let too_large = |what: &str| {
        status(
            encoding,
            StatusCode::PAYLOAD_TOO_LARGE,
            INVALID_ARGUMENT,
            format!(
                "{what} is larger than this server takes ({max} bytes): export smaller batches (`{batch}`), or raise `casebook serve --max-otlp`"
            ),
        )
    };
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return too_large("the body");
    }
    let mut bytes = Vec::with_capacity(declared.map_or(0, |n| usize::try_from(n).unwrap_or(0)));
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(err) => {
                let what = match signal {
                    Signal::Traces => ": no span was received",
                    Signal::Logs => ": no log record was received",
                };
                return api_status(encoding, super::unread_body(&err, what));
            }
        };
        if (bytes.len() + chunk.len()) as u64 > max {
            return too_large("the body");
        }
        bytes.extend_from_slice(&chunk);
    }
    let protobuf = encoding == Encoding::Protobuf;
    let decoded = tokio::task::spawn_blocking(move || {
        let bytes = if gzip {
            let mut out = Vec::new();
            let read = flate2::read::GzDecoder::new(bytes.as_slice()).take(max + 1).read_to_end(&mut out);
            match read {
                Ok(_) if out.len() as u64 > max => return Err(Unzip::TooLarge),
                Ok(_) => out,
                Err(e) => return Err(Unzip::Bad(e.to_string())),
            }
        } else {
            bytes
        };
        Ok(match signal {
            Signal::Traces => Decoded::Traces(capture::decode("the request", &bytes, protobuf)),
            Signal::Logs => Decoded::Logs(capture::logs::decode("the request", &bytes, protobuf)),
        })
    })
    .await;
    let decoded = match decoded {
        Ok(Ok(decoded)) => decoded,
        Ok(Err(Unzip::TooLarge)) => return too_large("the decompressed body"),
        Ok(Err(Unzip::Bad(e))) => {
            return status(
                encoding,
                StatusCode::BAD_REQUEST,
                INVALID_ARGUMENT,
                format!("the body is not gzip, as its `Content-Encoding` says: {e}"),
            );
        }
        Err(e) => return api_status(encoding, ApiError::internal(e)),
    };
    let (undecodable, diagnostics, other_signal) = match &decoded {
        Decoded::Traces(d) => (d.undecodable(), &d.diagnostics, d.other_signal),
        Decoded::Logs(d) => (d.undecodable(), &d.diagnostics, d.other_signal),
    };
    if let Some(other) = other_signal {
        // Taking it would lose what it holds: the exporter is told where it goes.
        return status(
            encoding,
            StatusCode::BAD_REQUEST,
            INVALID_ARGUMENT,
            format!(
                "the body is an OTLP `{}` ({}), not an `{}`: send it to `{}`, not `{}`",
                other.request(),
                other.items(),
                signal.request(),
                other.path(),
                signal.path()
            ),
        );
    }
    if undecodable {
        let first = diagnostics.iter().find(|d| d.is_error());
        let what = match encoding {
            Encoding::Protobuf => "protobuf",
            Encoding::Json => "JSON",
        };
        let detail = first.map(|d| format!(": {}", d.message)).unwrap_or_default();
        return status(
            encoding,
            StatusCode::BAD_REQUEST,
            INVALID_ARGUMENT,
            format!("the body is not an OTLP {what} `{}` (its content type says it is){detail}", signal.request()),
        );
    }

    let dataset_header = headers.get("x-casebook-dataset").map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let chosen = match dataset_header.as_deref().map(casebook_store::names::dataset_name) {
        None => None,
        Some(Ok(name)) => Some(name),
        Some(Err(e)) => {
            return status(
                encoding,
                StatusCode::BAD_REQUEST,
                INVALID_ARGUMENT,
                format!("the `X-Casebook-Dataset` header does not name a dataset: {e}"),
            );
        }
    };
    let mut by_dataset: BTreeMap<String, Vec<PendingSpan>> = BTreeMap::new();
    let (rejected, what) = match &decoded {
        Decoded::Traces(d) => {
            for span in &d.spans {
                let dataset = chosen.clone().unwrap_or_else(|| dataset_for(span.service.as_deref()));
                match pending_span(span) {
                    Ok(p) => by_dataset.entry(dataset).or_default().push(p),
                    Err(e) => return api_status(encoding, ApiError::internal(e)),
                }
            }
            (d.rejected, "span(s)")
        }
        Decoded::Logs(d) => {
            // A record's trace takes the dataset of its spans; this one counts only for records
            // whose spans never come.
            let dataset = chosen.clone().unwrap_or_else(|| DEFAULT_DATASET.to_owned());
            for record in &d.records {
                match pending_record(record) {
                    Ok(p) => by_dataset.entry(dataset.clone()).or_default().push(p),
                    Err(e) => return api_status(encoding, ApiError::internal(e)),
                }
            }
            (d.rejected, "GenAI log record(s)")
        }
    };
    let message = (rejected > 0).then(|| {
        let first = diagnostics.iter().find(|d| d.is_error() || d.code == casebook_model::Code::Dropped).map(|d| {
            let at = d.pointer.as_deref().filter(|p| !p.is_empty()).map(|p| format!(" (at {p})")).unwrap_or_default();
            format!(": {}{at}", d.message)
        });
        format!("{rejected} {what} left out{}", first.unwrap_or_default())
    });
    let received = crate::pending::now_ms();
    let mut count = 0;
    for (dataset, spans) in &by_dataset {
        if let Err(e) = writer.store.pending_add(dataset, received, spans).await {
            return api_status(encoding, ApiError::from(e));
        }
        count += spans.len() as u64;
    }
    state.receiver.received(count);
    answer(encoding, signal, rejected, message)
}

/// What a request body held.
enum Decoded {
    Traces(capture::Decoded),
    Logs(capture::logs::Decoded),
}

enum Unzip {
    TooLarge,
    Bad(String),
}

fn pending_span(span: &Span) -> serde_json::Result<PendingSpan> {
    Ok(PendingSpan {
        trace_id: span.trace_id.clone(),
        span_id: span.span_id.clone(),
        root: span.parent_id.is_none(),
        record: false,
        json: serde_json::to_string(span)?,
    })
}

fn pending_record(record: &Record) -> serde_json::Result<PendingSpan> {
    Ok(PendingSpan {
        trace_id: record.trace_id.clone(),
        span_id: format!("{}/{}", record.span_id, record.key()),
        root: false,
        record: true,
        json: serde_json::to_string(record)?,
    })
}

/// 200 with an `ExportTraceServiceResponse` (`ExportLogsServiceResponse`), its partial success
/// set when spans (records) were left out.
fn answer(encoding: Encoding, signal: Signal, rejected: u64, message: Option<String>) -> Response {
    use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsPartialSuccess, ExportLogsServiceResponse};
    use opentelemetry_proto::tonic::collector::trace::v1::{ExportTracePartialSuccess, ExportTraceServiceResponse};
    let rejected = i64::try_from(rejected).unwrap_or(i64::MAX);
    let (content_type, bytes) = match encoding {
        Encoding::Protobuf => {
            let bytes = match signal {
                Signal::Traces => ExportTraceServiceResponse {
                    partial_success: message
                        .map(|error_message| ExportTracePartialSuccess { rejected_spans: rejected, error_message }),
                }
                .encode_to_vec(),
                Signal::Logs => ExportLogsServiceResponse {
                    partial_success: message.map(|error_message| ExportLogsPartialSuccess {
                        rejected_log_records: rejected,
                        error_message,
                    }),
                }
                .encode_to_vec(),
            };
            ("application/x-protobuf", bytes)
        }
        Encoding::Json => {
            let count = match signal {
                Signal::Traces => "rejectedSpans",
                Signal::Logs => "rejectedLogRecords",
            };
            let value = match message {
                // int64 is a decimal string in protobuf's JSON mapping.
                Some(m) => json!({"partialSuccess": {count: rejected.to_string(), "errorMessage": m}}),
                None => json!({}),
            };
            ("application/json", value.to_string().into_bytes())
        }
    };
    (StatusCode::OK, [(CONTENT_TYPE, HeaderValue::from_static(content_type))], bytes).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_become_dataset_names() {
        assert_eq!(dataset_for(Some("support-agent")), "support-agent");
        assert_eq!(dataset_for(Some(" billing/agent@eu ")), "billing-agent-eu");
        assert_eq!(dataset_for(Some("a\u{202e}b\tc")), "a-b-c");
        assert_eq!(dataset_for(Some("..")), DEFAULT_DATASET);
        assert_eq!(dataset_for(Some("   ")), DEFAULT_DATASET);
        assert_eq!(dataset_for(None), DEFAULT_DATASET);
        assert_eq!(dataset_for(Some(&"é".repeat(100))).len(), 128);
    }
}
