//! A client's options, kept in one place that the attempt engine reads when it sends: every
//! option means the same for both clients, with or without retries, whatever the order in which
//! the builder set them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::error::AttemptReport;
use super::schedule::RetrySchedule;
use super::stats::{ClientStats, RetryStats};
use crate::contract::{ClientPolicy, ContractError, ServerDiscovery};
use crate::{http::DEFAULT_IDLE_TIMEOUT, mapping::Mapping};

/// Methods treated as idempotent (retried even without deduplication): MCP's reads and lists.
pub(crate) const IDEMPOTENT_METHODS: &[&str] = &[
    "ping",
    "server/discover",
    "tools/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
];

/// Called with every attempt that ended (besides the telemetry).
pub(crate) type Observer = Arc<dyn Fn(&AttemptReport<'_>) + Send + Sync>;

/// The options of a client (both [`RetryingClient`](super::RetryingClient) and
/// [`FramingHttpClient`](crate::rmcp_http::FramingHttpClient)).
#[derive(Clone)]
pub(crate) struct Config {
    /// Every attempt's HTTP client.
    pub(crate) http: reqwest::Client,
    /// The mapping asked for (a response in another one the client reads is taken too).
    pub(crate) mapping: Mapping,
    /// The longest time between two frames of a response.
    pub(crate) idle_timeout: Option<Duration>,
    /// Whether a server without a contract (Regime C) is accepted (SPEC.md §11.3).
    pub(crate) accept_ambiguity: bool,
    /// Attempts and backoff (one attempt: no retries).
    pub(crate) schedule: RetrySchedule,
    /// The methods retried without deduplication.
    pub(crate) idempotent: Vec<String>,
    pub(crate) observer: Option<Observer>,
}

impl Config {
    /// The defaults: the compatible mapping (SPEC.md §18), the default idle timeout, Regime C
    /// refused, the default schedule, MCP's reads and lists idempotent.
    pub(crate) fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            mapping: Mapping::Compat,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            accept_ambiguity: false,
            schedule: RetrySchedule::default(),
            idempotent: IDEMPOTENT_METHODS.iter().map(|&m| m.to_owned()).collect(),
            observer: None,
        }
    }

    /// Asks for `mapping` if `ask`; otherwise, if `mapping` was asked for, back to `instead`.
    pub(crate) fn ask_for(&mut self, mapping: Mapping, ask: bool, instead: Mapping) {
        if ask {
            self.mapping = mapping;
        } else if self.mapping == mapping {
            self.mapping = instead;
        }
    }

    /// The policy builder for this client's options.
    pub(crate) fn policy_builder(&self) -> crate::contract::policy::PolicyBuilder {
        ClientPolicy::builder().accept_ambiguity(self.accept_ambiguity)
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("mapping", &self.mapping)
            .field("idle_timeout", &self.idle_timeout)
            .field("accept_ambiguity", &self.accept_ambiguity)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

/// What the clones of one client share: the established policies and the counters.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The policy built from the first resolution and checked against every later one.
    resolved: Mutex<Option<ClientPolicy>>,
    /// The policy learned from each endpoint's own `initialize` or `server/discover` result.
    learned: Mutex<HashMap<String, ClientPolicy>>,
    pub(crate) responses: Arc<ClientStats>,
    pub(crate) calls: Arc<RetryStats>,
}

impl State {
    /// State starting from an established policy.
    pub(crate) fn with_policy(&self, policy: ClientPolicy) {
        *self.resolved.lock().unwrap_or_else(PoisonError::into_inner) = Some(policy);
    }

    /// The policy for a resolution: built from the first one, every later one checked against
    /// it (SPEC.md §11.5: a downgrade fails closed).
    pub(crate) fn resolved(
        &self,
        discovery: &ServerDiscovery,
        config: &Config,
    ) -> Result<ClientPolicy, ContractError> {
        let mut slot = self.resolved.lock().unwrap_or_else(PoisonError::into_inner);
        establish(&mut slot, discovery, config)
    }

    /// The policy established by resolutions, if any.
    pub(crate) fn resolved_policy(&self) -> Option<ClientPolicy> {
        self.resolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The policy learned from `endpoint`'s discovery results, if any.
    pub(crate) fn learned_policy(&self, endpoint: &str) -> Option<ClientPolicy> {
        self.learned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(endpoint)
            .cloned()
    }

    /// Learns `endpoint`'s policy from a discovery result it answered, or checks that result
    /// against the policy learned before (a re-initialization is a re-resolution, §11.5).
    pub(crate) fn learn(
        &self,
        endpoint: &str,
        discovery: &ServerDiscovery,
        config: &Config,
    ) -> Result<(), ContractError> {
        let mut learned = self.learned.lock().unwrap_or_else(PoisonError::into_inner);
        let mut slot = learned.get(endpoint).cloned();
        let policy = establish(&mut slot, discovery, config)?;
        learned.insert(endpoint.to_owned(), policy);
        Ok(())
    }
}

/// Builds the policy into an empty `slot`, or rechecks `discovery` against the one in it.
fn establish(
    slot: &mut Option<ClientPolicy>,
    discovery: &ServerDiscovery,
    config: &Config,
) -> Result<ClientPolicy, ContractError> {
    match slot {
        // SPEC.md §11.5: every resolution is checked before anything is sent.
        Some(policy) => policy.recheck(discovery).map(|()| policy.clone()),
        None => {
            let policy = config.policy_builder().build(discovery)?;
            *slot = Some(policy.clone());
            Ok(policy)
        }
    }
}

/// The option setters both clients share, written once (each sets a field of the one [`Config`]
/// the attempt engine reads when it sends, so that the order of the calls does not matter).
/// The type needs `fn config_mut(&mut self) -> &mut Config`; `$example` is an expression that
/// makes one, for the doc examples.
macro_rules! option_setters {
    ($example:literal) => {
        /// Asks for `mapping` (default [`Mapping::Compat`](crate::mapping::Mapping::Compat), the
        /// compatible SSE mapping of SPEC.md §18, in which the messages stay plain MCP events that
        /// gateways and tools can read); a response in another mapping the client reads is taken
        /// too (a server without the compatible mapping answers in §15's).
        ///
        /// # Examples
        ///
        /// ```
        /// use mcp_framing::mapping::Mapping;
        #[doc = concat!("let client = ", $example, ".mapping(Mapping::Sse);")]
        /// # let _ = client;
        /// ```
        #[must_use]
        pub fn mapping(mut self, mapping: crate::mapping::Mapping) -> Self {
            self.config_mut().mapping = mapping;
            self
        }

        /// Asks for the binary mapping (`application/vnd.mcp-framing`); `false` goes back to the
        /// default, the compatible SSE mapping, if binary was asked for.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let client = ", $example, ".binary(true);")]
        /// # let _ = client;
        /// ```
        // Hidden: a shorthand for `mapping(Mapping::Binary)` the tests use; `mapping` is the one setter.
        #[doc(hidden)]
        #[must_use]
        pub fn binary(mut self, binary: bool) -> Self {
            use crate::mapping::Mapping;
            self.config_mut()
                .ask_for(Mapping::Binary, binary, Mapping::Compat);
            self
        }

        /// Sets the idle timeout of every attempt's response: the longest time between two
        /// frames before the response is abandoned (default
        /// `DEFAULT_IDLE_TIMEOUT`, 60 s; `None`: wait for
        /// ever). The attempt is then classified `abandoned` with the kind `IdleTimeout`, and
        /// retried like any abandoned response. See
        /// [`VerifiedResponse::idle_timeout`](crate::http::VerifiedResponse::idle_timeout).
        ///
        /// # Examples
        ///
        /// ```
        /// use std::time::Duration;
        #[doc = concat!("let client = ", $example, ".idle_timeout(Some(Duration::from_secs(300)));")]
        /// # let _ = client;
        /// ```
        #[must_use]
        pub fn idle_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
            self.config_mut().idle_timeout = timeout;
            self
        }

        /// Accepts a server that declares no framing contract, or one that does not require the
        /// sentinel (Regime C, SPEC.md §11.3; default `false`: a configuration error before any
        /// request other than `initialize` or `server/discover`). A response that arrives framed
        /// anyway (a server that frames without declaring it) is verified as usual; an unframed
        /// one is completion-ambiguous, never delivered and not retried by default.
        ///
        /// # Examples
        ///
        /// ```
        #[doc = concat!("let client = ", $example, ".accept_ambiguity(true);")]
        /// # let _ = client;
        /// ```
        #[must_use]
        pub fn accept_ambiguity(mut self, accept: bool) -> Self {
            self.config_mut().accept_ambiguity = accept;
            self
        }
    };
}
pub(crate) use option_setters;
