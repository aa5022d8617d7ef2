//! The attempt engine: one logical request, from the first attempt to the final response or the
//! error the caller sees. Both clients send through it ([`RetryingClient`](super::RetryingClient)
//! and [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient), with one attempt when it does
//! not retry), so every rule below holds for both:
//!
//! 1. resolve the endpoint (or take the session's, or the transport's) and check its contract
//!    against the policy (SPEC.md §11.3, §11.5, §17.13);
//! 2. send the request with the opt-in: the request key (the same on every attempt, a new
//!    JSON-RPC id on a retry), the mapping asked for and the limits the response is decoded with
//!    (§10, §11.3, §16, §18.8);
//! 3. verify the body as it streams ([`VerifiedResponse`]) and hand on every message as it is
//!    verified, unchanged (a message that is not UTF-8 fails the call, never altered);
//! 4. hold the final response (the decoder flags it) until the stream ends clean, then deliver it
//!    (under the caller's id, edited into the id member alone after a retry); a stream that ends
//!    without one, or goes on after it, answers nothing (SPEC.md §1);
//! 5. on any other end, record the outcome, decide on a retry (§11.6) within the schedule, and
//!    build the error the caller sees (§11.7).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::{HeaderMap, HeaderValue};
use serde_json::Value;

use super::config::{Config, State};
use super::error::{AttemptError, AttemptReport, CallError};
use super::resolver::{EndpointResolver, error_text};
use crate::contract::{ClientPolicy, ServerDiscovery};
use crate::decoder::StreamDecoder;
use crate::error::Progress;
use crate::frame::HEADER_LEN;
use crate::ids::RequestKey;
use crate::jsonrpc::{self, IdEditError, TopLevel};
use crate::limits::{Limits, MIN_MAX_FRAME_PAYLOAD, compat_event_data_limit, event_data_limit};
use crate::outcome::{DiscoveryMode, Outcome};
use crate::retry::{RequestTraits, RetryDecision, RetryPolicy, RetryReason};
use crate::telemetry::{self, AttemptContext};
use crate::{
    http::{Delivery, VerifiedResponse, opt_in_headers_with},
    mapping::Mapping,
};

/// A response body as the engine reads it.
type Body = BoxStream<'static, Result<Bytes, reqwest::Error>>;

/// The most bytes of an error response's body kept as diagnostic text by default (rmcp's
/// default `max_error_response_size`).
pub(crate) const DEFAULT_MAX_ERROR_TEXT: usize = 64 * 1024;

/// The request header of a legacy MCP session (MCP 2025-*).
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Where the attempts of a call go, and where the policy they are checked against comes from.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // only FramingHttpClient has sessions and a fixed URI
pub(crate) enum Route {
    /// Every attempt resolved afresh, its discovery checked against the policy built from the
    /// first resolution (SPEC.md §11.5, §17.13).
    Resolve(Arc<dyn EndpointResolver>),
    /// Every attempt to the endpoint that issued the request's session, under the policy the
    /// resolutions established: a session lives on one instance (SPEC.md §17.13).
    Session(String),
    /// Every attempt to one endpoint (rmcp's transport URI), under the policy learned from that
    /// endpoint's own `initialize` or `server/discover` result (SPEC.md §11.2, §11.3).
    Endpoint(String),
}

/// What a transport bounds besides the policy (rmcp's `StreamableHttpResponseLimits`): every
/// attempt's decoder and SSE parser are held to them, and the limits travel with the opt-in so
/// that the server frames within them (SPEC.md §11.3, §16).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TransportLimits {
    /// The largest message the transport takes (rmcp: the smaller of its SSE event and JSON body
    /// limits, since a framed message stands for either).
    pub(crate) max_message_size: Option<u64>,
    /// The largest SSE event the transport takes: in the §15 mapping each frame's event must fit
    /// it, so frames are asked for small enough; in the compatible mapping an event carries a
    /// whole message.
    pub(crate) max_sse_event: Option<usize>,
    /// The most bytes of an error response's body kept as diagnostic text.
    pub(crate) max_error_text: usize,
}

impl Default for TransportLimits {
    fn default() -> Self {
        Self {
            max_message_size: None,
            max_sse_event: None,
            max_error_text: DEFAULT_MAX_ERROR_TEXT,
        }
    }
}

/// One verified message of a call, in the order the caller gets them: the verified bytes,
/// checked once to be UTF-8 (JSON-RPC text), never altered.
#[derive(Debug)]
pub(crate) enum Item {
    /// A message before the final response (a notification, a server request), as verified.
    Message(String),
    /// The final response, as verified (its id member edited back to the caller's after a
    /// retry); always the last item.
    Response(String),
}

/// One attempt being received.
struct Attempt {
    verified: VerifiedResponse<Body>,
    /// The final response, held back until the stream ends: a caller (rmcp) stops reading once
    /// it has it, so the stream's end is decided here, before.
    held: Option<String>,
    /// A message came after the final response (SPEC.md §1): the stream answers nothing.
    after_final: bool,
    retry_policy: RetryPolicy,
}

/// How an attempt ended before its body was read.
enum Failure {
    /// No retry can help.
    Final(CallError),
    /// The attempt did not complete: decide on its outcome.
    Incomplete(Outcome, RetryPolicy, AttemptError),
}

/// One logical request: its attempts, their decisions, and what the caller gets.
pub(crate) struct Call {
    config: Arc<Config>,
    state: Arc<State>,
    route: Route,
    request: Value,
    id: Value,
    method: String,
    /// `params.name` of a `tools/call`, for telemetry.
    tool: Option<String>,
    key: RequestKey,
    traits: RequestTraits,
    /// Headers every attempt carries (the caller's, authorization, the session).
    headers: HeaderMap,
    limits: TransportLimits,
    /// When the logical request started (the operation's duration).
    started: Instant,
    attempt: u32,
    current: Option<Attempt>,
    retry_after: Duration,
    /// The endpoint of the last attempt.
    endpoint: String,
    /// The session the server issued (`Mcp-Session-Id` of a response).
    session: Option<String>,
    done: bool,
}

impl Call {
    /// A call of `request` (a JSON-RPC request with an id; a request key is drawn and written
    /// into its `_meta` unless it carries one), nothing sent yet.
    pub(crate) fn new(
        config: Arc<Config>,
        state: Arc<State>,
        route: Route,
        mut request: Value,
        headers: HeaderMap,
        limits: TransportLimits,
    ) -> Result<Self, CallError> {
        let (Some(id), Some(method)) = (
            request.get("id").cloned(),
            request
                .get("method")
                .and_then(Value::as_str)
                .map(str::to_owned),
        ) else {
            return Err(CallError::NotARequest);
        };
        let key = match crate::request::request_key(&request)? {
            Some(key) => key,
            None => {
                let key = RequestKey::random();
                crate::request::set_request_key(&mut request, key)?;
                key
            }
        };
        crate::http::declare_framing_capability(&mut request);
        state.calls.call();
        let traits = RequestTraits {
            is_idempotent: config.idempotent.contains(&method),
            request_key: Some(key),
        };
        let tool = (method == "tools/call")
            .then(|| request["params"]["name"].as_str().map(str::to_owned))
            .flatten();
        let endpoint = match &route {
            Route::Resolve(_) => String::new(),
            Route::Session(endpoint) | Route::Endpoint(endpoint) => endpoint.clone(),
        };
        Ok(Self {
            config,
            state,
            route,
            request,
            id,
            method,
            tool,
            key,
            traits,
            headers,
            limits,
            started: Instant::now(),
            attempt: 0,
            current: None,
            retry_after: Duration::ZERO,
            endpoint,
            session: None,
            done: false,
        })
    }

    /// The request key every attempt carries.
    pub(crate) fn key(&self) -> RequestKey {
        self.key
    }

    /// Attempts sent so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempt
    }

    /// The endpoint of the last attempt.
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The session a response issued, if one did.
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    /// The JSON-RPC error response under the caller's id that stands for `err` (SPEC.md §11.7).
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) fn error_response(&self, err: &CallError) -> String {
        err.error_response(&self.id, Some(self.key), self.attempt)
    }

    /// Sends attempts until one is receiving its body, or the call failed (the error is then the
    /// call's last item, already recorded). Idempotent.
    #[cfg_attr(not(feature = "rmcp-client"), allow(dead_code))] // used by rmcp_http
    pub(crate) async fn open(&mut self) -> Result<(), CallError> {
        if self.done || self.current.is_some() {
            return Ok(());
        }
        match self.start_attempt().await {
            Ok(()) => Ok(()),
            Err(err) => Err(self.fail(err)),
        }
    }

    /// The next verified message; the final response last, or the error that ended the call.
    pub(crate) async fn next(&mut self) -> Option<Result<Item, CallError>> {
        loop {
            if self.done {
                return None;
            }
            if self.current.is_none() {
                if let Err(err) = self.start_attempt().await {
                    return Some(Err(self.fail(err)));
                }
            }
            let attempt = self.current.as_mut().expect("an attempt in progress");
            match attempt.verified.next().await {
                Some(Ok(Delivery::Message(message))) => {
                    let index = message.summary().index;
                    // SPEC.md §1, §7.1: the decoder (keyed, assembling) flags the final response.
                    let is_final = message.is_final_response();
                    let text = match String::from_utf8(message.into_bytes().into()) {
                        Ok(text) => text,
                        Err(err) => {
                            // Never altered (no lossy replacement): the call fails.
                            self.state.responses.ended(false);
                            self.current = None;
                            let err = CallError::InvalidUtf8 {
                                attempts: self.attempt,
                                index,
                                valid_up_to: err.utf8_error().valid_up_to(),
                            };
                            return Some(Err(self.fail(err)));
                        }
                    };
                    self.state.responses.verified_message();
                    if attempt.held.is_some() {
                        // SPEC.md §1: nothing follows the final response; a stream that goes on
                        // answers nothing, and what follows is not handed on.
                        attempt.after_final = true;
                        continue;
                    }
                    if !is_final {
                        return Some(Ok(Item::Message(text)));
                    }
                    attempt.held = Some(text);
                }
                Some(Ok(Delivery::Complete(_))) => {
                    let attempt = self.current.take().expect("an attempt in progress");
                    self.state.responses.completed();
                    match self.complete(attempt) {
                        Ok(Some(response)) => return Some(Ok(Item::Response(response))),
                        Ok(None) => continue,
                        Err(err) => return Some(Err(self.fail(err))),
                    }
                }
                Some(Err(err)) => {
                    let attempt = self.current.take().expect("an attempt in progress");
                    self.state.responses.ended(err.is_abandoned());
                    let outcome = attempt
                        .verified
                        .outcome()
                        .cloned()
                        .or_else(|| err.outcome())
                        .unwrap_or_else(nothing_received);
                    let cause = AttemptError::Receive(err);
                    if let Some(err) = self.decide(outcome, &attempt.retry_policy, cause) {
                        return Some(Err(self.fail(err)));
                    }
                }
                None => {
                    // Not reached: a verified response ends with Complete or an error.
                    let attempt = self.current.take().expect("an attempt in progress");
                    let cause = AttemptError::NoFinalResponse;
                    let outcome = nothing_received();
                    if let Some(err) = self.decide(outcome, &attempt.retry_policy, cause) {
                        return Some(Err(self.fail(err)));
                    }
                }
            }
        }
    }

    /// An attempt whose stream ended complete: its final response for the caller, `None` to
    /// retry (a retryable refusal, or no final response), or the error ending the call.
    fn complete(&mut self, attempt: Attempt) -> Result<Option<String>, CallError> {
        let progress = attempt.verified.progress();
        let head = attempt.verified.head();
        let held = match attempt.held {
            Some(held) if !attempt.after_final => held,
            // The stream ended without a final response, or went on after it (SPEC.md §1): it
            // answers nothing, and the request is decided as for an abandoned stream.
            held => {
                let outcome = Outcome::abandoned(None, progress, head);
                let cause = match held {
                    None => AttemptError::NoFinalResponse,
                    Some(_) => AttemptError::AfterFinalResponse,
                };
                return match self.decide(outcome, &attempt.retry_policy, cause) {
                    None => Ok(None),
                    Some(err) => Err(err),
                };
            }
        };
        let outcome = attempt
            .verified
            .outcome()
            .cloned()
            .unwrap_or_else(|| Outcome::abandoned(None, progress, head));
        self.record(&outcome);
        let text = held.as_str();
        let members = jsonrpc::top_level(text).unwrap_or_default();
        if let Some(after) = self.retryable_refusal(text, &members, &attempt.retry_policy) {
            self.retry_after = after;
            self.state.calls.refusal_retried();
            return Ok(None);
        }
        self.learn(text)?;
        self.report(&outcome, None);
        // OpenTelemetry's `error.type` of an operation answered with a JSON-RPC error: its code.
        let code = members
            .error
            .and_then(|span| error_code(&text[span]))
            .map(|code| code.to_string());
        let response = if self.attempt > 1 {
            // A retry went out under a new id (SPEC.md §10): the caller's goes back into the id
            // member alone, every other byte as verified.
            let id = serde_json::to_string(&self.id).expect("a JSON value serializes");
            match jsonrpc::with_id(text, &id) {
                Ok(edited) => edited,
                // Only a duplicate can fail: the message is a response (one object, an id).
                Err(IdEditError::DuplicateId | IdEditError::NoId | IdEditError::NotAnObject) => {
                    return Err(CallError::DuplicateId {
                        attempts: self.attempt,
                    });
                }
            }
        } else {
            held
        };
        self.done = true;
        telemetry::record_operation(&self.context(), self.started.elapsed(), code.as_deref());
        Ok(Some(response))
    }

    /// Learns the contract from the final response of an `initialize` or `server/discover`
    /// exchange on an endpoint route (SPEC.md §11.2), or checks it against the one learned
    /// before: Regime C is refused here, before any other request (§11.3).
    fn learn(&self, response: &str) -> Result<(), CallError> {
        let Route::Endpoint(endpoint) = &self.route else {
            return Ok(());
        };
        let read = match self.method.as_str() {
            "initialize" => ServerDiscovery::from_initialize,
            "server/discover" => ServerDiscovery::from_discover,
            _ => return Ok(()),
        };
        let Ok(value) = serde_json::from_str::<Value>(response) else {
            return Ok(());
        };
        if value.get("result").is_none() {
            // An error response declares nothing: the caller gets it as it is.
            return Ok(());
        }
        let discovery = read(&value)?;
        self.state.learn(endpoint, &discovery, &self.config)?;
        Ok(())
    }

    /// Sends attempts (after the backoff, for a retry) until one is receiving its body, or the
    /// call must fail.
    async fn start_attempt(&mut self) -> Result<(), CallError> {
        loop {
            if self.attempt > 0 {
                let delay = self.config.schedule.delay(self.attempt, self.retry_after);
                self.state.calls.retry();
                tracing::event!(target: "mcp_framing::client", tracing::Level::INFO,
                    request_key = %self.key.fingerprint(), next_attempt = self.attempt + 1,
                    delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                    "retrying with the same request key");
                tokio::time::sleep(delay).await;
                self.retry_after = Duration::ZERO;
            }
            match self.send().await {
                Ok(attempt) => {
                    self.current = Some(attempt);
                    return Ok(());
                }
                Err(Failure::Final(err)) => return Err(err),
                Err(Failure::Incomplete(outcome, retry_policy, cause)) => {
                    if let Some(err) = self.decide(outcome, &retry_policy, cause) {
                        return Err(err);
                    }
                }
            }
        }
    }

    /// Where the next attempt goes, and the policy it is checked against.
    async fn route(&mut self) -> Result<(String, Option<ClientPolicy>), CallError> {
        let (endpoint, policy) = match &self.route {
            Route::Resolve(resolver) => {
                let resolution = resolver.resolve().await?;
                let policy = self.state.resolved(&resolution.discovery, &self.config)?;
                (resolution.endpoint, Some(policy))
            }
            Route::Session(endpoint) => (endpoint.clone(), self.state.resolved_policy()),
            Route::Endpoint(endpoint) => (endpoint.clone(), self.state.learned_policy(endpoint)),
        };
        let discovers = matches!(self.method.as_str(), "initialize" | "server/discover");
        if policy.is_none() && !discovers && !self.config.accept_ambiguity {
            return Err(CallError::NotDiscovered {
                method: self.method.clone(),
            });
        }
        Ok((endpoint, policy))
    }

    /// The decoder of one attempt: the policy's limits (the defaults before a contract is known),
    /// lowered to the transport's, and the request key the stream head must echo.
    fn decoder(&self, policy: Option<&ClientPolicy>) -> StreamDecoder {
        let mut limits = policy.map_or(Limits::DEFAULT, ClientPolicy::decoder_limits);
        if let Some(max) = self.limits.max_message_size {
            limits.max_message_size = limits.max_message_size.min(max);
        }
        if let (Mapping::Sse, Some(event)) = (self.config.mapping, self.limits.max_sse_event) {
            // The largest frame whose event data, 4 * ceil((20 + payload) / 3), fits the event
            // limit (SPEC.md §15), but never below the control frames' minimum.
            let fitting = u32::try_from((event / 4 * 3).saturating_sub(HEADER_LEN))
                .unwrap_or(u32::MAX)
                .max(MIN_MAX_FRAME_PAYLOAD);
            limits.max_frame_payload = limits.max_frame_payload.min(fitting);
        }
        StreamDecoder::builder()
            .limits(limits)
            .expect_request_key(self.key)
            .build()
    }

    /// Resolves, re-checks the contract, sends the next attempt and reads its headers.
    async fn send(&mut self) -> Result<Attempt, Failure> {
        let (endpoint, policy) = self.route().await.map_err(Failure::Final)?;
        self.endpoint = endpoint;
        self.attempt += 1;
        let retry_policy = policy.as_ref().map_or_else(RetryPolicy::default, |policy| {
            RetryPolicy::for_method(policy, &self.method)
        });
        let body = if self.attempt > 1 {
            // A retry is a new JSON-RPC request with the same key (SPEC.md §10).
            let mut request = self.request.clone();
            request["id"] = retry_id(&self.id, self.attempt);
            serde_json::to_vec(&request)
        } else {
            serde_json::to_vec(&self.request)
        }
        .expect("a JSON value serializes");
        // The limits it decodes with travel with the opt-in (SPEC.md §11.3, §16).
        let decoder = self.decoder(policy.as_ref());
        let (max_frame_payload, max_message_size) =
            (decoder.max_frame_payload(), decoder.max_message_size());
        let mut headers = self.headers.clone();
        crate::http::add_request_headers(&self.request, &mut headers);
        headers.extend(opt_in_headers_with(self.key, self.config.mapping, &decoder));
        self.state.calls.attempt();
        let incomplete = |outcome, cause| Failure::Incomplete(outcome, retry_policy, cause);
        let response = match post(&self.config.http, &self.endpoint, headers, body).await {
            Ok(response) => response,
            // The request may or may not have reached the server: abandoned, nothing received.
            Err(err) => return Err(incomplete(nothing_received(), AttemptError::Send(err))),
        };
        if let Some(session) = response.headers().get(SESSION_HEADER) {
            if let Ok(session) = session.to_str() {
                self.session = Some(session.to_owned());
            }
        }
        let status = response.status();
        if !status.is_success() {
            let text = error_text(response.bytes_stream(), self.limits.max_error_text).await;
            if status.is_server_error() {
                let cause = AttemptError::Status { status, text };
                return Err(incomplete(nothing_received(), cause));
            }
            return Err(Failure::Final(CallError::Status {
                status,
                text,
                attempts: self.attempt,
            }));
        }
        // Decided from the headers, before the body (SPEC.md §16): a response that is not
        // framed is a contract violation whatever its body holds, never a truncation.
        let headers = response.headers().clone();
        let declared = Mapping::from_response_headers(&headers).unwrap_or(self.config.mapping);
        let body: Body = response.bytes_stream().boxed();
        let verified = match VerifiedResponse::from_headers(body, &headers, decoder) {
            Ok(verified) => verified.idle_timeout(self.config.idle_timeout),
            Err(err) => {
                self.state.responses.ended(false);
                // Under an accept-ambiguity policy an unframed body is Regime C: ambiguous,
                // never delivered (SPEC.md §11.3).
                let regime_c = policy
                    .as_ref()
                    .map_or(self.config.accept_ambiguity, |p| p.negotiated().is_none());
                let outcome = if regime_c {
                    let mode = policy
                        .as_ref()
                        .map_or(DiscoveryMode::Sticky, ClientPolicy::discovery_mode);
                    Outcome::unframed_close(mode, 0)
                } else {
                    err.outcome().unwrap_or_else(nothing_received)
                };
                return Err(incomplete(outcome, AttemptError::Receive(err)));
            }
        };
        let verified = match self.limits.max_sse_event {
            // The event bound follows the mapping the response declares: one frame (§15) or one
            // message (§18.7), within the transport's event limit.
            Some(max) => {
                let bound = if declared == Mapping::Compat {
                    compat_event_data_limit(max_message_size)
                } else {
                    event_data_limit(max_frame_payload)
                };
                verified.max_event_data(bound.min(max))
            }
            None => verified,
        };
        Ok(Attempt {
            verified,
            held: None,
            after_final: false,
            retry_policy,
        })
    }

    /// Decides on an attempt that did not complete: `None` to retry, or the error ending the
    /// call. The outcome and the decision are recorded first, whatever follows (SPEC.md §11.6).
    fn decide(
        &mut self,
        outcome: Outcome,
        retry_policy: &RetryPolicy,
        cause: AttemptError,
    ) -> Option<CallError> {
        self.record(&outcome);
        let mut decision = retry_policy.decide(&outcome, &self.traits);
        if decision.is_retry() && self.attempt >= self.config.schedule.attempts() {
            decision = RetryDecision::SurfaceToCaller(decision.reason());
        }
        self.record_decision(&decision);
        self.report(&outcome, Some(decision));
        if decision.is_retry() {
            return None;
        }
        Some(CallError::Incomplete {
            outcome: Box::new(outcome),
            decision,
            attempts: self.attempt,
            cause,
        })
    }

    /// A retryable deduplication refusal (SPEC.md §17.9) with attempts left and a request the
    /// policy may repeat: how long to wait at least before the retry.
    fn retryable_refusal(
        &self,
        response: &str,
        members: &TopLevel,
        retry_policy: &RetryPolicy,
    ) -> Option<Duration> {
        let span = members.error.clone()?;
        let error: Value = serde_json::from_str(&response[span]).ok()?;
        let (reason, retryable) = crate::retry::dedupe_refusal(&error)?;
        let may_repeat = retry_policy
            .decide(&nothing_received(), &self.traits)
            .is_retry();
        let decision = if retryable && may_repeat && self.attempt < self.config.schedule.attempts()
        {
            RetryDecision::Retry(RetryReason::Keyed)
        } else {
            RetryDecision::DoNotRetry(RetryReason::WouldRepeat)
        };
        self.record_decision(&decision);
        tracing::event!(target: "mcp_framing::client", tracing::Level::INFO,
            request_key = %self.key.fingerprint(), attempt = self.attempt, reason = reason,
            retryable = retryable, "deduplication refusal");
        if !decision.is_retry() {
            return None;
        }
        let after = error["data"][crate::retry::DEDUPE_DATA_KEY]["retryAfterMs"]
            .as_u64()
            .unwrap_or(0);
        Some(Duration::from_millis(after.min(10_000)))
    }

    /// Ends the call with `err`: counted, timed, handed back.
    fn fail(&mut self, err: CallError) -> CallError {
        self.done = true;
        self.current = None;
        self.state.calls.gave_up();
        let elapsed = self.started.elapsed();
        telemetry::record_operation(&self.context(), elapsed, Some(err.classification()));
        err
    }

    fn context(&self) -> AttemptContext<'_> {
        let mut ctx = AttemptContext::default()
            .request_key(self.key)
            .endpoint(&self.endpoint)
            .method(&self.method)
            .attempt(self.attempt);
        if let Some(tool) = self.tool.as_deref() {
            ctx = ctx.tool(tool);
        }
        ctx
    }

    fn record(&self, outcome: &Outcome) {
        telemetry::record_outcome(outcome, &self.context());
    }

    fn record_decision(&self, decision: &RetryDecision) {
        telemetry::record_decision(decision, &self.context());
        if decision.is_retry() {
            telemetry::record_retry(decision, &self.context());
        }
    }

    fn report(&self, outcome: &Outcome, decision: Option<RetryDecision>) {
        if let Some(observer) = &self.config.observer {
            observer(&AttemptReport {
                request_key: self.key,
                attempt: self.attempt,
                endpoint: &self.endpoint,
                outcome,
                decision,
            });
        }
    }
}

/// POSTs a JSON-RPC message: the one place a client builds a request.
pub(crate) async fn post(
    http: &reqwest::Client,
    endpoint: &str,
    mut headers: HeaderMap,
    body: Vec<u8>,
) -> Result<reqwest::Response, reqwest::Error> {
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    http.post(endpoint).headers(headers).body(body).send().await
}

/// The outcome of an attempt of which nothing was received: abandoned (Regime B).
fn nothing_received() -> Outcome {
    Outcome::abandoned(None, Progress::default(), None)
}

/// The `code` of a JSON-RPC error object's text, if it has an integer one.
fn error_code(error: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    serde_json::from_str::<Code>(error).ok().map(|c| c.code)
}

/// The id of attempt `attempt` of a request whose id is `id`: a new id (SPEC.md §10), derived so
/// that it is readable in logs.
fn retry_id(id: &Value, attempt: u32) -> Value {
    let base = match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    Value::String(format!("{base}~attempt-{attempt}"))
}
