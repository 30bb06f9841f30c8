//! The retry policy of every object-store request, in one place: an HTTP layer under
//! object_store's clients ([`RetryConnector`]) that sends each request again on a 5xx, 429 or 408
//! answer, and on a dropped or refused connection (a timeout too, for `GET` and `HEAD`), until the
//! request's time budget is spent.
//!
//! The waits grow exponentially with jitter: the n-th wait is drawn uniformly from
//! `[b/2, b]` where `b = min(init * 2^(n-1), cap)` (50 ms doubling to 5 s by default). A
//! `Retry-After` header (seconds or an HTTP date) sets a floor under the wait. No attempt starts
//! once [`Policy::timeout`] (2 minutes by default) has passed since the first, nor after
//! [`Policy::max_retries`] retries when that is set: the request then fails with [`GaveUp`],
//! naming the method, the URL (its query left out: it may hold a signature), the attempts, the
//! time spent and the last answer. object_store's own retry loop is kept to a few tries for the
//! cases this layer cannot see (an S3 `200` whose body is an error, a `409` on a conditional
//! write); a give-up is final for it.
//!
//! object_store 0.14's loop does not read `Retry-After`, and it stops at its `max_retries`
//! whatever its `retry_timeout`: a few seconds of `503 SlowDown` failed a read (issue 50).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
    ReqwestConnector,
};
use object_store::{BackoffConfig, ClientOptions, RetryConfig};
use stokehold_core::{Error, Result};

/// How long and how often a request is tried.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Policy {
    /// No attempt starts once this much time has passed since the first.
    pub timeout: Duration,
    /// Retries at most (attempts = retries + 1); `None`: as many as the time allows.
    pub max_retries: Option<u32>,
    /// The first wait (before jitter).
    pub init_backoff: Duration,
    /// The longest wait (before jitter); a `Retry-After` may ask for longer.
    pub max_backoff: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            timeout: Duration::from_secs(120),
            max_retries: None,
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// The option keys of the policy (in `set_options`, next to object_store's own keys).
pub const KEYS: &[&str] = &["retry_timeout", "max_retries"];

impl Policy {
    /// The default policy with the retry keys among `options` applied (later pairs win); other
    /// keys are left alone. A malformed value is an error naming the key and the value.
    pub fn from_options<'a>(
        options: impl IntoIterator<Item = &'a (String, String)>,
    ) -> Result<Policy> {
        let mut p = Policy::default();
        for (k, v) in options {
            match k.to_ascii_lowercase().as_str() {
                "retry_timeout" => p.timeout = parse_seconds(k, v)?,
                "max_retries" => {
                    let n: u32 = v.trim().parse().map_err(|_| {
                        Error::invalid(format!(
                            "storage option {k}={v:?}: must be a whole number of retries \
                             (0 to {})",
                            u32::MAX
                        ))
                    })?;
                    p.max_retries = Some(n);
                }
                _ => {}
            }
        }
        Ok(p)
    }

    /// object_store's own retry loop under this layer: a few tries, within the same budget.
    pub(super) fn inner_config(&self) -> RetryConfig {
        RetryConfig {
            backoff: BackoffConfig {
                init_backoff: self.init_backoff,
                max_backoff: self.max_backoff,
                base: 2.0,
            },
            max_retries: 3,
            retry_timeout: self.timeout,
        }
    }

    /// The wait before retry `n` (1-based), before any `Retry-After`: drawn from `[b/2, b]`.
    fn backoff(&self, n: u32) -> Duration {
        let b = self
            .init_backoff
            .saturating_mul(1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        b / 2 + b.mul_f64(unit_random() / 2.0)
    }
}

fn parse_seconds(k: &str, v: &str) -> Result<Duration> {
    let bad = |why: &str| Error::invalid(format!("storage option {k}={v:?}: {why}"));
    let s: f64 = v
        .trim()
        .parse()
        .map_err(|_| bad("must be a number of seconds"))?;
    if !s.is_finite() || s < 0.0 {
        return Err(bad("must be a finite number of seconds, 0 or more"));
    }
    Duration::try_from_secs_f64(s).map_err(|_| bad("is too large"))
}

/// A number in `[0, 1)` for the jitter (splitmix64 over a process-wide counter seeded by the
/// clock: the waits of concurrent requests differ, which is all jitter is for).
fn unit_random() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut seed = STATE.load(Ordering::Relaxed);
    if seed == 0 {
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let _ = STATE.compare_exchange(0, t | 1, Ordering::Relaxed, Ordering::Relaxed);
    }
    seed = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A request that was tried until its budget ran out: what the error of the read says.
#[derive(Debug)]
pub struct GaveUp {
    method: String,
    url: String,
    attempts: u32,
    elapsed: Duration,
    policy: Policy,
    last: String,
    /// Why no further attempt was made.
    why: String,
}

impl std::fmt::Display for GaveUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: gave up after {} attempts in {:.1} s ({}; retry_timeout {:.1} s, max_retries \
             {}): the last answer was {}",
            self.method,
            self.url,
            self.attempts,
            self.elapsed.as_secs_f64(),
            self.why,
            self.policy.timeout.as_secs_f64(),
            self.policy
                .max_retries
                .map_or("unset".to_string(), |n| n.to_string()),
            self.last
        )
    }
}

impl std::error::Error for GaveUp {}

/// The [`GaveUp`] in `e`'s chain of sources, if a request gave up.
pub fn gave_up<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a GaveUp> {
    let mut cur: Option<&'a (dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        if let Some(g) = c.downcast_ref::<GaveUp>() {
            return Some(g);
        }
        cur = c.source();
    }
    None
}

/// Builds object_store's HTTP clients (reqwest's) with the retry layer on top.
#[derive(Debug)]
pub(super) struct RetryConnector {
    pub(super) policy: Policy,
}

impl HttpConnector for RetryConnector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        // reqwest's rustls is built without a crypto provider (Cargo.toml: ring, not aws-lc-rs);
        // ring's becomes rustls' default on the first connection. `Err` means one is set already
        // (by an earlier call), which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(RetryService {
            inner,
            policy: self.policy,
        }))
    }
}

#[derive(Debug)]
struct RetryService {
    inner: HttpClient,
    policy: Policy,
}

impl HttpService for RetryService {
    fn call<'life0, 'async_trait>(
        &'life0 self,
        req: HttpRequest,
    ) -> Pin<
        Box<
            dyn Future<Output = std::result::Result<HttpResponse, HttpError>> + Send + 'async_trait,
        >,
    >
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.send(req))
    }
}

/// The URL of a request without its query (a presigned or SAS query holds a signature).
fn url_of(req: &HttpRequest) -> String {
    let u = req.uri();
    format!(
        "{}://{}{}",
        u.scheme_str().unwrap_or("http"),
        u.authority().map_or("", |a| a.as_str()),
        u.path()
    )
}

impl RetryService {
    async fn send(&self, req: HttpRequest) -> std::result::Result<HttpResponse, HttpError> {
        let start = Instant::now();
        let safe = matches!(req.method().as_str(), "GET" | "HEAD");
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let (last, retry_after) = match self.inner.execute(req.clone()).await {
                Ok(r) if is_retried_status(r.status().as_u16()) => {
                    let after = r
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now()));
                    (answer_of(r).await, after)
                }
                Ok(r)
                    if r.status().as_u16() == 200
                        && super::listing::is_listing(req.method().as_str(), req.uri().query()) =>
                {
                    // A listing's answer is read whole (a page of at most 1000 keys) and
                    // cleared of keys object_store cannot parse (`remote/listing.rs`).
                    let (mut parts, body) = r.into_parts();
                    match body.bytes().await {
                        Ok(b) => {
                            let place = url_of(&req);
                            let place = place.split_once("://").map_or(&*place, |(_, p)| p);
                            let b = match super::listing::filter(&b, place) {
                                Some(kept) => {
                                    parts.headers.remove("content-length");
                                    kept
                                }
                                None => b,
                            };
                            return Ok(HttpResponse::from_parts(parts, b.into()));
                        }
                        Err(e) if is_retried_error(e.kind(), safe) => (e.to_string(), None),
                        Err(e) => return Err(e),
                    }
                }
                Ok(r) => return Ok(r),
                Err(e) if is_retried_error(e.kind(), safe) => (e.to_string(), None),
                Err(e) => return Err(e),
            };
            let elapsed = start.elapsed();
            let wait = self
                .policy
                .backoff(attempts)
                .max(retry_after.unwrap_or_default());
            let why = if self.policy.max_retries.is_some_and(|m| attempts > m) {
                Some("max_retries reached".to_string())
            } else if elapsed + wait > self.policy.timeout {
                Some(match retry_after {
                    Some(a) if a >= wait => format!(
                        "the server asked to retry after {:.1} s, past the retry budget",
                        a.as_secs_f64()
                    ),
                    _ => "the retry budget is spent".to_string(),
                })
            } else {
                None
            };
            if let Some(why) = why {
                return Err(HttpError::new(
                    HttpErrorKind::Unknown,
                    GaveUp {
                        method: req.method().to_string(),
                        url: url_of(&req),
                        attempts,
                        elapsed,
                        policy: self.policy,
                        last,
                        why,
                    },
                ));
            }
            tokio::time::sleep(wait).await;
        }
    }
}

/// Answers worth another try: server errors (S3's `503 SlowDown` among them), too many
/// requests, a request timeout.
fn is_retried_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// Transport errors worth another try: the request was not sent (refused, reset before it
/// went), or, for a `GET` or `HEAD` (safe to repeat), it timed out or broke off.
fn is_retried_error(kind: HttpErrorKind, safe: bool) -> bool {
    match kind {
        HttpErrorKind::Connect | HttpErrorKind::Request => true,
        HttpErrorKind::Timeout | HttpErrorKind::Interrupted => safe,
        _ => false,
    }
}

/// `503 Slow Down` and the start of its body (S3's XML names the code).
async fn answer_of(r: HttpResponse) -> String {
    use futures_util::StreamExt;
    let status = r.status();
    let mut text = format!(
        "{} {}",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    );
    let mut body = Vec::new();
    let mut stream = r.into_body().bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        body.extend_from_slice(&chunk);
        if body.len() >= 512 {
            break;
        }
    }
    let body = String::from_utf8_lossy(&body[..body.len().min(512)]);
    if let Some(code) = body
        .split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map(|(code, _)| code)
    {
        text.push_str(&format!(" ({code})"));
    }
    text.trim_end().to_string()
}

/// A `Retry-After` value as a wait from `now`: delay-seconds, or an HTTP date (RFC 9110's
/// IMF-fixdate, e.g. `Wed, 21 Oct 2015 07:28:00 GMT`; a date already past is no wait). `None` for
/// anything else.
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    let at = parse_http_date(v)?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_http_date(v: &str) -> Option<SystemTime> {
    let (_, rest) = v.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: u64 = parts.next()?.parse().ok()?;
    let mon = parts.next()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == mon)? as u64
        + 1;
    let year: u64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|x| x.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next()? != "GMT"
        || !(1..=31).contains(&day)
        || year < 1970
        || h > 23
        || m > 59
        || s > 60
    {
        return None;
    }
    // Days since 1970-01-01 (the civil-from-days inverse, Howard Hinnant's).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3600 + m * 60 + s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_400); // 2015-10-21 07:26:40
        assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now),
            Some(Duration::from_secs(80))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO),
            "a date already past: no wait"
        );
        for bad in ["", "-1", "soon", "Wed, 21 Oct 2015 07:28:00 PST", "1.5"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn waits_double_to_the_cap_with_jitter_in_the_upper_half() {
        let p = Policy::default();
        for n in 1..40 {
            let b = (p.init_backoff * 2u32.saturating_pow(n - 1).min(1 << 20)).min(p.max_backoff);
            let w = p.backoff(n);
            assert!(
                w >= b / 2 && w <= b,
                "retry {n}: {w:?} outside [{:?}, {b:?}]",
                b / 2
            );
        }
    }

    #[test]
    fn policy_options_are_checked_by_name() {
        let opts = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let p = Policy::from_options(&opts("retry_timeout", "2.5")).unwrap();
        assert_eq!(p.timeout, Duration::from_millis(2500));
        assert_eq!(p.max_retries, None);
        let p = Policy::from_options(&opts("max_retries", "3")).unwrap();
        assert_eq!(p.max_retries, Some(3));
        for (k, v) in [
            ("retry_timeout", "-1"),
            ("retry_timeout", "NaN"),
            ("retry_timeout", "inf"),
            ("retry_timeout", "1e30"),
            ("retry_timeout", "soon"),
            ("max_retries", "-1"),
            ("max_retries", "2.5"),
        ] {
            let e = Policy::from_options(&opts(k, v)).unwrap_err().to_string();
            assert!(e.contains(k) && e.contains(v), "{k}={v}: {e}");
        }
    }
}
