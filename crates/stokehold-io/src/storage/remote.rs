//! Object stores through the `object_store` crate (cargo feature `remote`).
//!
//! One tokio runtime per process, started on first use and started again in a child after
//! `fork()` (the pid is checked on every call: a forked child has the parent's memory but none of
//! its runtime threads, and blocking on that runtime hangs). Store clients are cached per
//! `scheme://bucket` inside the runtime's state, so they are rebuilt with it: a connection pool
//! belongs to the runtime that opened its connections.
//!
//! Credentials and endpoints come from the usual environment variables (`AWS_ENDPOINT_URL`,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, `GOOGLE_*`,
//! `AZURE_*`), then from [`set_options`] (object_store's config keys, e.g. `aws_endpoint`).
//! Requests retry on 5xx, 429 and 408 answers, timeouts and dropped connections, with
//! exponential backoff and jitter, honouring `Retry-After`, for a time budget (`remote/retry.rs`,
//! configured by the `retry_timeout` and `max_retries` options); at most [`MAX_IN_FLIGHT`] run at
//! once per process. Endpoints are checked before a client is built (`remote/endpoint.rs`). A ranged
//! read that has not answered within a hedge delay gets one second, identical request, and the
//! first full answer wins (`remote/hedge.rs`); [`stats`] counts requests and hedges.

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path as FsPath;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use stokehold_core::{Error, Result};
use tokio::runtime::Runtime;

use self::hedge::{hedged_get, Answer, Shared, BYTES, REQUESTS};
pub use self::hedge::{stats, Stats, MAX_IN_FLIGHT};
pub use self::listing::left_out_keys;
use self::retry::{gave_up, RetryConnector};
pub use self::retry::{parse_retry_after, GaveUp, Policy};
use super::{split_url, Meta};

mod endpoint;
mod hedge;
mod listing;
mod retry;

/// Ranges closer than this are fetched by one request: a request costs a round trip (~1 ms on
/// loopback, 20+ ms to S3), which buys a MiB or more of transfer.
const COALESCE_GAP: u64 = 1 << 20;

/// A merged request stops growing past this, so one slow request does not hold a whole batch and
/// several requests can run side by side.
const MAX_REQUEST: u64 = 16 << 20;

/// Parts of a multipart upload: S3's minimum part is 5 MiB; 16 MiB keeps a 10 GB file well under
/// the 10 000-part limit.
const PART_SIZE: usize = 16 << 20;

/// Times a whole-object download ([`RemoteObject::copy_to`]) goes on after its body broke off:
/// object_store retries a request until its answer starts, not a body cut mid-way, and a shard of
/// hundreds of MiB is worth resuming rather than failing.
const RESUMES: u32 = 4;

/// Errors a resumed download would meet again: a missing object, refused credentials, a changed
/// object (the ETag no longer matches).
/// A request that gave up (`remote/retry.rs`) spent its whole retry budget: final too.
fn is_final(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    gave_up(e).is_some()
        || matches!(
            e,
            E::NotFound { .. }
                | E::PermissionDenied { .. }
                | E::Unauthenticated { .. }
                | E::Precondition { .. }
        )
}

struct State {
    pid: u32,
    rt: Runtime,
    stores: Mutex<HashMap<String, Arc<dyn ObjectStore>>>,
    shared: Shared,
}

static STATE: Mutex<Option<Arc<State>>> = Mutex::new(None);
/// Option pairs (key, value) by store (`scheme://bucket`), and for every store (key `""`).
type StoreOptions = HashMap<String, Vec<(String, String)>>;
static OPTIONS: Mutex<Option<StoreOptions>> = Mutex::new(None);

/// Extra configuration for the stores built from now on: for `store` (`s3://bucket`), or for
/// every store when `store` is `""`. Keys are object_store's for the scheme, e.g.
/// `aws_endpoint`, `aws_access_key_id`, `aws_secret_access_key`, `aws_region`,
/// `aws_allow_http`; they override the environment, a store's own over the ones for all. Two
/// keys are ours, the retry budget of every request (`remote/retry.rs`): `retry_timeout`
/// (seconds, default 120) and `max_retries` (default: as many as the time allows).
/// Stores already built are dropped so the options apply.
///
/// Checked here, before anything is kept: a retry value that is no number (negative, NaN) and
/// an endpoint or proxy URL the client cannot take are errors naming the option and the value.
pub fn set_options(store: &str, options: Vec<(String, String)>) -> Result<()> {
    Policy::from_options(&options)?;
    for (k, v) in &options {
        if endpoint::is_url_key(k) {
            endpoint::check(&format!("storage option {k}"), v)?;
        }
    }
    let mut g = OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    g.get_or_insert_with(HashMap::new)
        .insert(store.trim_end_matches('/').to_string(), options);
    drop(g);
    if let Some(s) = STATE.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        s.stores.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    Ok(())
}

/// The options for `base`: those for every store, then its own. Of the options for every store,
/// a key named for one backend (`aws_*`, `google_*`, `azure_*`) reaches only that backend's
/// stores: S3 options set for all stores must not make an `http://` or `gs://` store refuse a
/// key it does not know. A store's own options are passed as given, so a wrong key is an error.
fn options_for(base: &str) -> Vec<(String, String)> {
    let g = OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(m) = g.as_ref() else {
        return Vec::new();
    };
    let scheme = super::url::scheme(base);
    let mine = match scheme.as_str() {
        "s3" | "s3a" => "aws_",
        "gs" => "google_",
        "az" | "abfs" | "abfss" => "azure_",
        _ => "",
    };
    let for_this = |k: &str| {
        let k = k.to_ascii_lowercase();
        let named = ["aws_", "google_", "azure_"]
            .into_iter()
            .find(|p| k.starts_with(p));
        named.is_none_or(|p| p == mine)
    };
    let mut out: Vec<(String, String)> = m
        .get("")
        .into_iter()
        .flatten()
        .filter(|(k, _)| for_this(k))
        .cloned()
        .collect();
    out.extend(m.get(base).cloned().unwrap_or_default());
    out
}

/// This process's runtime state, started on first use and again after `fork()`.
fn state() -> Result<Arc<State>> {
    let pid = std::process::id();
    let mut g = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = g.as_ref() {
        if s.pid == pid {
            return Ok(s.clone());
        }
        // A forked child: the parent's runtime has no threads here, and dropping it would wait
        // for them. Leaked on purpose (once per fork).
        std::mem::forget(g.take());
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        // The work is waiting on sockets: two threads drive hundreds of requests.
        .worker_threads(2)
        .thread_name("stokehold-io")
        .enable_all()
        .build()
        .map_err(|e| Error::thread("object store runtime", e))?;
    let s = Arc::new(State {
        pid,
        rt,
        stores: Mutex::new(HashMap::new()),
        shared: Shared::new(),
    });
    *g = Some(s.clone());
    Ok(s)
}

fn bad_url(url: &str, why: impl std::fmt::Display) -> Error {
    Error::invalid(format!("{url}: {why}"))
}

/// Checks the URL-valued variables of the environment a backend reads (`AWS_ENDPOINT_URL`,
/// `AZURE_STORAGE_ENDPOINT`, ...; those whose names start with `prefix`), by name.
fn check_env_endpoints(prefix: &str) -> Result<()> {
    for (k, v) in std::env::vars() {
        if k.starts_with(prefix) && endpoint::is_url_key(&k) {
            endpoint::check(&k, &v)?;
        }
    }
    Ok(())
}

/// The client for `scheme://bucket`, built once per process. Every endpoint it would use is
/// checked first (`remote/endpoint.rs`); every request goes through the retry layer
/// (`remote/retry.rs`) with the policy of the store's options.
fn store(st: &State, base: &str) -> Result<Arc<dyn ObjectStore>> {
    let mut stores = st.stores.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = stores.get(base) {
        return Ok(s.clone());
    }
    let (ours, options): (Vec<_>, Vec<_>) = options_for(base)
        .into_iter()
        .partition(|(k, _)| retry::KEYS.contains(&k.to_ascii_lowercase().as_str()));
    let policy = Policy::from_options(&ours)?;
    let connector = || RetryConnector { policy };
    let scheme = super::url::scheme(base);
    let built: std::result::Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme
        .as_str()
    {
        "s3" | "s3a" => {
            use object_store::aws::AmazonS3Builder;
            check_env_endpoints("AWS_")?;
            let mut b = AmazonS3Builder::from_env().with_url(base);
            // The AWS profile fills what the environment leaves unset; options set in code
            // come after it and win.
            let mut settings = super::aws_profile::settings().map_err(|e| bad_url(base, e))?;
            for (k, v) in &settings {
                if endpoint::is_url_key(k) {
                    endpoint::check(&format!("AWS profile setting {k}"), v)?;
                }
            }
            settings.extend(options.iter().cloned());
            for (k, v) in &settings {
                b = b.with_config(k.parse().map_err(|e| bad_url(base, e))?, v);
            }
            // An http:// endpoint (a local S3 such as moto or MinIO) needs no separate
            // switch: naming it is the intent.
            let endpoint = settings
                .iter()
                .rev()
                .find(|(k, _)| k.contains("endpoint"))
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok())
                .unwrap_or_default();
            if endpoint.starts_with("http://") {
                b = b.with_allow_http(true);
            }
            b.with_retry(policy.inner_config())
                .with_http_connector(connector())
                .build()
                .map(|s| Arc::new(s) as _)
        }
        "gs" => {
            use object_store::gcp::GoogleCloudStorageBuilder;
            check_env_endpoints("GOOGLE_")?;
            let mut b = GoogleCloudStorageBuilder::from_env().with_url(base);
            for (k, v) in &options {
                b = b.with_config(k.parse().map_err(|e| bad_url(base, e))?, v);
            }
            b.with_retry(policy.inner_config())
                .with_http_connector(connector())
                .build()
                .map(|s| Arc::new(s) as _)
        }
        "az" | "abfs" | "abfss" => {
            use object_store::azure::MicrosoftAzureBuilder;
            check_env_endpoints("AZURE_")?;
            let mut b = MicrosoftAzureBuilder::from_env().with_url(base);
            for (k, v) in &options {
                b = b.with_config(k.parse().map_err(|e| bad_url(base, e))?, v);
            }
            b.with_retry(policy.inner_config())
                .with_http_connector(connector())
                .build()
                .map(|s| Arc::new(s) as _)
        }
        "http" | "https" => {
            use object_store::http::HttpBuilder;
            endpoint::check("the store URL", base)?;
            let mut b = HttpBuilder::new().with_url(base);
            for (k, v) in &options {
                b = b.with_config(k.parse().map_err(|e| bad_url(base, e))?, v);
            }
            if scheme == "http" {
                b = b.with_client_options(object_store::ClientOptions::new().with_allow_http(true));
            }
            b.with_retry(policy.inner_config())
                .with_http_connector(connector())
                .build()
                .map(|s| Arc::new(s) as _)
        }
        _ => return Err(bad_url(base, "unknown object store scheme")),
    };
    let s = built.map_err(|e| bad_url(base, format!("cannot configure the store: {e}")))?;
    stores.insert(base.to_string(), s.clone());
    Ok(s)
}

/// `(base, key)` of `url`, the key as object_store's path.
fn parse(url: &str) -> Result<(&str, Path)> {
    let (base, key) = split_url(url).ok_or_else(|| bad_url(url, "not an object store URL"))?;
    let path = Path::parse(key).map_err(|e| bad_url(url, e))?;
    Ok((base, path))
}

/// An object_store error as ours, naming the URL and the offset. A missing object, refused
/// credentials, a changed object: each says so in words.
fn store_error(url: &str, offset: u64, e: object_store::Error) -> Error {
    use object_store::Error as E;
    let kind = match &e {
        E::NotFound { .. } => std::io::ErrorKind::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            std::io::ErrorKind::PermissionDenied
        }
        E::Precondition { .. } => {
            return Error::corrupt(
                url,
                offset,
                format!("the object changed since it was opened (its ETag differs): {e}"),
            )
        }
        _ => std::io::ErrorKind::Other,
    };
    if let Some(g) = gave_up(&e) {
        return Error::io(
            url,
            std::io::Error::new(kind, format!("at offset {offset}: {g}")),
        );
    }
    let what = match &e {
        E::Generic { source, .. } => {
            // Whether it is a missing bucket or refused credentials is inside the XML body
            // that object_store passes on; the chain below carries it.
            format!("{e}: {}", error_chain(source.as_ref()))
        }
        _ => e.to_string(),
    };
    Error::io(
        url,
        std::io::Error::new(kind, format!("at offset {offset}: {what}")),
    )
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out.join(": ")
}

/// Runs `fut` on the runtime, holding one in-flight permit.
fn run<T>(
    st: &State,
    fut: impl std::future::Future<Output = std::result::Result<T, object_store::Error>>,
) -> std::result::Result<T, object_store::Error> {
    st.rt.block_on(async move {
        let _permit = st.shared.in_flight.acquire().await.expect("never closed");
        fut.await
    })
}

/// Size and version of the object at `url`, `None` when there is none.
pub fn head(url: &str) -> Result<Option<Meta>> {
    let st = state()?;
    let (base, path) = parse(url)?;
    let s = store(&st, base)?;
    match run(&st, s.head(&path)) {
        Ok(m) => Ok(Some(Meta {
            location: url.to_string(),
            size: m.size,
            version: m.e_tag.or(m.version),
        })),
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(store_error(url, 0, e)),
    }
}

/// An object opened for range reads, pinned to the ETag it had when opened.
pub struct RemoteObject {
    meta: Meta,
    base: String,
    path: Path,
}

impl RemoteObject {
    /// Looks the object up (`HEAD`): its size and ETag.
    pub fn open(url: &str) -> Result<Self> {
        let meta = head(url)?.ok_or_else(|| {
            Error::io(
                url,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such object"),
            )
        })?;
        let (base, path) = parse(url)?;
        Ok(RemoteObject {
            meta,
            base: base.to_string(),
            path,
        })
    }

    /// Location, size and version.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    fn get_options(&self, r: &Range<u64>) -> GetOptions {
        GetOptions {
            range: Some(GetRange::Bounded(r.clone())),
            if_match: self.meta.version.clone(),
            ..Default::default()
        }
    }

    /// One ranged `GET` (callers checked the range against the size).
    pub fn read_range(&self, range: Range<u64>) -> Result<Bytes> {
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let st = state()?;
        let s = store(&st, &self.base)?;
        let opts = self.get_options(&range);
        let len = range.end - range.start;
        let got = st
            .rt
            .block_on(hedged_get(&st.shared, &s, &self.path, opts, len));
        let (e_tag, data) = got.map_err(|e| store_error(&self.meta.location, range.start, e))?;
        self.check(&range, e_tag, &data)?;
        Ok(data)
    }

    /// The whole object streamed into `out` by one `GET` pinned to the opened ETag; a body that
    /// breaks off is resumed from where it stopped (a ranged `GET`, pinned the same way) up to
    /// [`RESUMES`] times. The bytes written are exactly the object's size, or an error naming the
    /// URL and the offset. For the local cache's fills: nothing is held in memory but one chunk.
    pub fn copy_to(&self, out: &mut dyn std::io::Write) -> Result<u64> {
        let size = self.meta.size;
        let st = state()?;
        let s = store(&st, &self.base)?;
        let mut written = 0u64;
        let mut resumes = 0;
        while written < size {
            let opts = self.get_options(&(written..size));
            let (s, path, sem) = (&s, &self.path, &st.shared.in_flight);
            let url = &self.meta.location;
            let got: std::result::Result<Option<String>, (u64, object_store::Error)> =
                st.rt.block_on(async {
                    let _permit = sem.acquire().await.expect("never closed");
                    REQUESTS.fetch_add(1, Ordering::Relaxed);
                    let g = s.get_opts(path, opts).await.map_err(|e| (written, e))?;
                    let e_tag = g.meta.e_tag.clone();
                    let mut body = g.into_stream();
                    while let Some(chunk) = body.next().await {
                        let chunk = chunk.map_err(|e| (written, e))?;
                        if written + chunk.len() as u64 > size {
                            break; // reported below as a length mismatch
                        }
                        out.write_all(&chunk).map_err(|e| {
                            let e = object_store::Error::Generic {
                                store: "local file",
                                source: Box::new(e),
                            };
                            (written, e)
                        })?;
                        written += chunk.len() as u64;
                        BYTES.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                    Ok(e_tag)
                });
            match got {
                Ok(e_tag) => {
                    if let (Some(want), Some(got)) = (&self.meta.version, &e_tag) {
                        if want != got {
                            return Err(Error::corrupt(
                                url,
                                written,
                                format!("the object changed since it was opened (ETag {got}, opened as {want})"),
                            ));
                        }
                    }
                    if written != size {
                        if resumes < RESUMES && written < size {
                            resumes += 1;
                            continue;
                        }
                        return Err(Error::corrupt(
                            url,
                            written,
                            format!("short read: the body ended at offset {written} of {size}"),
                        ));
                    }
                }
                // A body that broke off mid-way (a dropped connection): go on from there.
                Err((_, e)) if resumes < RESUMES && !is_final(&e) => resumes += 1,
                Err((at, e)) => return Err(store_error(url, at, e)),
            }
        }
        Ok(written)
    }

    /// The checks every response passes: the version it came from, and its length.
    fn check(&self, r: &Range<u64>, e_tag: Option<String>, data: &Bytes) -> Result<()> {
        if let (Some(want), Some(got)) = (&self.meta.version, &e_tag) {
            if want != got {
                return Err(Error::corrupt(
                    &self.meta.location,
                    r.start,
                    format!(
                        "the object changed since it was opened (ETag {got}, opened as {want})"
                    ),
                ));
            }
        }
        let want = r.end - r.start;
        if data.len() as u64 != want {
            return Err(Error::corrupt(
                &self.meta.location,
                r.start + data.len() as u64,
                format!(
                    "short read: asked for {want} bytes at offset {}, got {}",
                    r.start,
                    data.len()
                ),
            ));
        }
        Ok(())
    }

    /// Many ranges: merged where they are within [`COALESCE_GAP`] of each other (up to
    /// [`MAX_REQUEST`] per request), the requests run concurrently, then cut back into ranges.
    pub fn read_ranges(&self, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let merged = coalesce(ranges);
        let st = state()?;
        let s = store(&st, &self.base)?;
        let reqs: Vec<(Range<u64>, GetOptions)> = merged
            .iter()
            .map(|r| (r.clone(), self.get_options(r)))
            .collect();
        let (s, path, shared) = (&s, &self.path, &st.shared);
        let got: Vec<(Range<u64>, Answer)> = st.rt.block_on(
            futures_util::stream::iter(reqs)
                .map(|(r, opts)| async move {
                    let len = r.end - r.start;
                    (r, hedged_get(shared, s, path, opts, len).await)
                })
                .buffered(MAX_IN_FLIGHT)
                .collect(),
        );
        let mut blocks = Vec::with_capacity(got.len());
        for (r, res) in got {
            let (e_tag, data) = res.map_err(|e| store_error(&self.meta.location, r.start, e))?;
            self.check(&r, e_tag, &data)?;
            blocks.push((r, data));
        }
        Ok(ranges
            .iter()
            .map(|r| {
                if r.is_empty() {
                    return Bytes::new();
                }
                // The merged block that holds `r` (blocks are sorted and disjoint).
                let k = blocks.partition_point(|(b, _)| b.end <= r.start);
                let (b, data) = &blocks[k];
                data.slice((r.start - b.start) as usize..(r.end - b.start) as usize)
            })
            .collect())
    }
}

/// Sorted, merged request ranges covering every non-empty range of `ranges`.
fn coalesce(ranges: &[Range<u64>]) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
    sorted.sort_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::new();
    for r in sorted {
        if let Some(last) = out.last_mut() {
            // Overlapping ranges always merge (each range must lie inside one request); a
            // near one only while the request stays under MAX_REQUEST.
            let near = r.start <= last.end + COALESCE_GAP && r.end - last.start <= MAX_REQUEST;
            if r.start < last.end || near {
                last.end = last.end.max(r.end);
                continue;
            }
        }
        out.push(r);
    }
    out
}

/// The objects matching the glob `pattern` (a URL), sorted by key. Lists the keys under the
/// pattern's literal prefix (up to its last `/` before the first glob character) and matches
/// each whole key; `*` and `?` stop at `/`, `**` crosses it. A key with a `..`, `.` or empty
/// segment is left out, counted in [`stats`] and named by [`left_out_keys`]
/// (`remote/listing.rs`).
pub fn list(pattern: &str) -> Result<Vec<Meta>> {
    let (base, key) = split_url(pattern).ok_or_else(|| bad_url(pattern, "not a URL"))?;
    let first_glob = key.find(['*', '?', '[']).unwrap_or(key.len());
    let prefix = &key[..key[..first_glob].rfind('/').map_or(0, |i| i + 1)];
    let matcher = globset::GlobBuilder::new(key)
        .literal_separator(true)
        .build()
        .map_err(|e| bad_url(pattern, format!("bad pattern: {e}")))?
        .compile_matcher();
    let st = state()?;
    let s = store(&st, base)?;
    let prefix_path = Path::parse(prefix.trim_end_matches('/')).map_err(|e| bad_url(pattern, e))?;
    let listed: Vec<object_store::ObjectMeta> = run(&st, async {
        let p = (!prefix.is_empty()).then_some(&prefix_path);
        s.list(p).try_collect::<Vec<_>>().await
    })
    .map_err(|e| store_error(pattern, 0, e))?;
    let mut out: Vec<Meta> = listed
        .into_iter()
        .filter(|m| matcher.is_match(m.location.as_ref()))
        .map(|m| Meta {
            location: super::join(base, m.location.as_ref()),
            size: m.size,
            version: m.e_tag.or(m.version),
        })
        .collect();
    out.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(out)
}

/// Writes `data` as the object at `url` (one `PUT`; S3 shows the object only when complete).
pub fn put(url: &str, data: Bytes) -> Result<()> {
    let st = state()?;
    let (base, path) = parse(url)?;
    let s = store(&st, base)?;
    if data.len() > PART_SIZE {
        return run(&st, async move {
            let mut w =
                WriteMultipart::new_with_chunk_size(s.put_multipart(&path).await?, PART_SIZE);
            w.put(data);
            w.finish().await
        })
        .map(drop)
        .map_err(|e| store_error(url, 0, e));
    }
    run(&st, s.put(&path, PutPayload::from_bytes(data)))
        .map(drop)
        .map_err(|e| store_error(url, 0, e))
}

/// Uploads the local file `src` as the object at `url`, in [`PART_SIZE`] parts (a multipart
/// upload: the object appears only when the last part is committed; a failure aborts it).
pub fn upload_file(src: &FsPath, url: &str, sent: &mut dyn FnMut(u64)) -> Result<()> {
    use std::io::Read;
    let mut f = std::fs::File::open(src).map_err(|e| Error::io(src, e))?;
    let size = f.metadata().map_err(|e| Error::io(src, e))?.len();
    if size <= PART_SIZE as u64 {
        let mut v = Vec::with_capacity(size as usize);
        f.read_to_end(&mut v).map_err(|e| Error::io(src, e))?;
        put(url, Bytes::from(v))?;
        sent(size);
        return Ok(());
    }
    let st = state()?;
    let (base, path) = parse(url)?;
    let s = store(&st, base)?;
    let src_owned = src.to_path_buf();
    let res: std::result::Result<std::result::Result<(), Error>, object_store::Error> =
        run(&st, async move {
            let mut w =
                WriteMultipart::new_with_chunk_size(s.put_multipart(&path).await?, PART_SIZE);
            let mut buf = vec![0u8; PART_SIZE];
            loop {
                // Bounded: at most 4 parts (64 MiB) buffered or in flight per upload.
                w.wait_for_capacity(4).await?;
                let n = match read_full(&mut f, &mut buf) {
                    Ok(n) => n,
                    Err(e) => {
                        w.abort().await?;
                        return Ok::<_, object_store::Error>(Err(Error::io(&src_owned, e)));
                    }
                };
                if n == 0 {
                    break;
                }
                w.write(&buf[..n]);
                sent(n as u64);
            }
            w.finish().await?;
            Ok::<_, object_store::Error>(Ok(()))
        });
    res.map_err(|e| store_error(url, 0, e))?
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_neighbours_and_caps_requests() {
        let r = coalesce(&[10..20, 0..5, 30..40, (5 << 20)..(5 << 20) + 1, 12..13, 7..7]);
        assert_eq!(r, vec![0..40, (5 << 20)..(5 << 20) + 1]);
        let big = coalesce(&[0..(10 << 20), (10 << 20)..(20 << 20)]);
        assert_eq!(big.len(), 2, "a merged request stays under MAX_REQUEST");
    }
}
