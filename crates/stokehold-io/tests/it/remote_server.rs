//! Test infrastructure for the object-store tests: moto's S3 server on loopback (one per test
//! binary, stopped when the binary exits), bucket creation, and a fault-injecting HTTP proxy
//! placed between our client and moto. The thing under test is our client; moto and the proxy
//! are the real network it talks to.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The moto server of this test binary.
pub struct Moto {
    pub port: u16,
    _child: ChildGuard,
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `moto_server` to run: `$STOKEHOLD_MOTO`, the workspace's `.venv` (where `make test`
/// installs it), else `moto_server` on the PATH.
fn moto_bin() -> String {
    if let Ok(p) = std::env::var("STOKEHOLD_MOTO") {
        return p;
    }
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../../.venv/bin/moto_server");
    if std::path::Path::new(venv).exists() {
        return venv.to_string();
    }
    "moto_server".to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

static MOTO: OnceLock<Moto> = OnceLock::new();

/// Starts moto once per test binary (killed at exit, see [`register_stop`]), points every S3
/// store at it, and returns it.
pub fn moto() -> &'static Moto {
    MOTO.get_or_init(|| {
        let port = free_port();
        let bin = moto_bin();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {bin} (pip install 'moto[server]'; make test does): {e}")
            });
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Every store reaches moto unless a test names another endpoint for its bucket.
        stokehold_io::storage::remote::set_options(
            "",
            vec![
                ("aws_endpoint".into(), format!("http://127.0.0.1:{port}")),
                ("aws_access_key_id".into(), "testing".into()),
                ("aws_secret_access_key".into(), "testing".into()),
                ("aws_region".into(), "us-east-1".into()),
                ("aws_allow_http".into(), "true".into()),
            ],
        )
        .unwrap();
        register_stop();
        Moto {
            port,
            _child: ChildGuard(child),
        }
    })
}

/// Kills moto when the test binary exits (statics are never dropped).
fn register_stop() {
    extern "C" fn stop() {
        if let Some(m) = MOTO.get() {
            // SAFETY: kill(2) on our own child's pid; nothing else is touched.
            unsafe { kill(m._child.0.id() as i32, 9) };
        }
    }
    extern "C" {
        fn atexit(f: extern "C" fn()) -> i32;
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: registering a plain function with the C runtime.
    unsafe { atexit(stop) };
}

/// Creates `bucket` in moto (an unsigned `PUT /bucket`, which moto accepts).
pub fn make_bucket(bucket: &str) {
    let port = moto().port;
    let (status, _) = raw_request(port, "PUT", &format!("/{bucket}"));
    assert!(status == 200, "create bucket {bucket}: HTTP {status}");
}

/// One HTTP/1.1 request without a body; the status and the body.
pub fn raw_request(port: u16, method: &str, path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r).unwrap();
    let body = read_body(&mut r, &headers, method == "HEAD", status).unwrap_or_default();
    (status, body)
}

/// What the proxy does with one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Forward it and its answer.
    Pass,
    /// Answer 503 Slow Down without asking moto.
    ServerError,
    /// Answer S3's throttling answer without asking moto: `503 Slow Down` with the XML body
    /// `<Code>SlowDown</Code>`, and a `Retry-After` header of this many seconds when `Some`.
    SlowDown(Option<u64>),
    /// Close the connection without an answer.
    Drop,
    /// Forward, then send the answer's head and only half its body, and close.
    Truncate,
    /// Answer 403 AccessDenied (S3's XML) without asking moto.
    Forbidden,
    /// Hold the request for [`STALL`] before forwarding it, unless the same request (method,
    /// target, range) came before: a server's slow tail, where a repeated request answers.
    StallFirst,
    /// Forward, send the answer's head and half its body, then hold the connection for
    /// [`STALL`] (a transfer that hangs mid-way).
    HalfThenStall,
}

/// How long a stalled request is held: far longer than any test waits.
pub const STALL: Duration = Duration::from_secs(60);

/// One request the proxy saw: its method and target (`/bucket/key?query`), and its `Range`.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub range: Option<String>,
}

/// A proxy on loopback in front of moto; `decide(n, method, target)` picks the fault for the
/// n-th request (counted from 0). Counts the faults it injected.
pub struct Proxy {
    pub port: u16,
    pub faults: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<Seen>>>,
}

type Decide = dyn Fn(usize, &str, &str) -> Fault + Send + Sync;

impl Proxy {
    pub fn start(decide: impl Fn(usize, &str, &str) -> Fault + Send + Sync + 'static) -> Proxy {
        let upstream = moto().port;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let faults = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let decide: Arc<Decide> = Arc::new(decide);
        let (rq, ft, lg) = (requests, faults.clone(), log.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (rq, ft, lg, decide) = (rq.clone(), ft.clone(), lg.clone(), decide.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, &rq, &ft, &lg, &*decide);
                });
            }
        });
        Proxy { port, faults, log }
    }

    /// Every request seen so far, in arrival order.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    /// The `GET`s seen so far whose target's key ends with `suffix` (query left out).
    pub fn gets_of(&self, suffix: &str) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|r| r.method == "GET" && r.target.split('?').next().unwrap().ends_with(suffix))
            .collect()
    }

    /// [`Proxy::gets_of`] counting identical requests once (a hedge or a retry repeats one).
    pub fn distinct_gets_of(&self, suffix: &str) -> usize {
        let mut v: Vec<(String, Option<String>)> = self
            .gets_of(suffix)
            .into_iter()
            .map(|r| (r.target, r.range))
            .collect();
        v.sort();
        v.dedup();
        v.len()
    }

    /// Forgets the requests seen so far.
    pub fn clear(&self) {
        self.log.lock().unwrap().clear();
    }

    /// Points the store `s3://bucket` at this proxy.
    pub fn route(&self, bucket: &str) {
        self.route_with(bucket, &[]);
    }

    /// [`Proxy::route`] with more options for the store (`("retry_timeout", "5")`).
    pub fn route_with(&self, bucket: &str, options: &[(&str, &str)]) {
        let mut all = vec![(
            "aws_endpoint".to_string(),
            format!("http://127.0.0.1:{}", self.port),
        )];
        all.extend(options.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        stokehold_io::storage::remote::set_options(&format!("s3://{bucket}"), all).unwrap();
    }
}

fn serve(
    conn: TcpStream,
    upstream: u16,
    requests: &AtomicUsize,
    faults: &AtomicUsize,
    log: &Mutex<Vec<Seen>>,
    decide: &Decide,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut client = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    loop {
        let mut line = String::new();
        if client.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let mut head = line.clone();
        let mut len = 0usize;
        let mut range = None;
        loop {
            let mut h = String::new();
            client.read_line(&mut h)?;
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
                if k.eq_ignore_ascii_case("range") {
                    range = Some(v.trim().to_string());
                }
            }
            head.push_str(&h);
            if h == "\r\n" || h.is_empty() {
                break;
            }
        }
        let mut body = vec![0u8; len];
        client.read_exact(&mut body)?;
        let n = requests.fetch_add(1, Ordering::SeqCst);
        let repeated = {
            let mut log = log.lock().unwrap();
            let seen = log
                .iter()
                .any(|r| r.method == method && r.target == target && r.range == range);
            log.push(Seen {
                method: method.clone(),
                target: target.clone(),
                range,
            });
            seen
        };
        let fault = match decide(n, &method, &target) {
            Fault::StallFirst if repeated => Fault::Pass,
            f => f,
        };
        if fault != Fault::Pass {
            faults.fetch_add(1, Ordering::SeqCst);
        }
        match fault {
            Fault::Drop => return Ok(()),
            Fault::ServerError => {
                out.write_all(
                    b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )?;
                return Ok(());
            }
            Fault::SlowDown(retry_after) => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown\
                           </Code><Message>Please reduce your request rate.</Message></Error>";
                let after = retry_after.map_or(String::new(), |s| format!("Retry-After: {s}\r\n"));
                write!(
                    out,
                    "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\n{after}\
                     Content-Length: {}\r\nConnection: close\r\n\r\n{xml}",
                    xml.len()
                )?;
                return Ok(());
            }
            Fault::Forbidden => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied\
                           </Code><Message>Access Denied</Message></Error>";
                write!(
                    out,
                    "HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: \
                     {}\r\nConnection: close\r\n\r\n{xml}",
                    xml.len()
                )?;
                return Ok(());
            }
            Fault::StallFirst => std::thread::sleep(STALL),
            Fault::Pass | Fault::Truncate | Fault::HalfThenStall => {}
        }
        let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
        up.write_all(head.as_bytes())?;
        up.write_all(&body)?;
        let mut ur = BufReader::new(up);
        let mut status_line = String::new();
        ur.read_line(&mut status_line)?;
        let status: u16 = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut rhead = status_line.clone();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            ur.read_line(&mut h)?;
            if h == "\r\n" || h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
            rhead.push_str(&h);
        }
        rhead.push_str("\r\n");
        let rbody = read_body(&mut ur, &headers, method == "HEAD", status)?;
        out.write_all(rhead.as_bytes())?;
        if matches!(fault, Fault::Truncate | Fault::HalfThenStall) && rbody.len() > 1 {
            out.write_all(&rbody[..rbody.len() / 2])?;
            out.flush()?;
            if fault == Fault::HalfThenStall {
                std::thread::sleep(STALL);
            }
            return Ok(());
        }
        out.write_all(&rbody)?;
        out.flush()?;
    }
}

fn read_head(r: &mut impl BufRead) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        if h == "\r\n" || h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok((status, headers))
}

/// A response body: by Content-Length, chunked, or none (HEAD, 204, 304).
fn read_body(
    r: &mut impl BufRead,
    headers: &[(String, String)],
    head: bool,
    status: u16,
) -> std::io::Result<Vec<u8>> {
    if head || status == 204 || status == 304 {
        return Ok(Vec::new());
    }
    let get = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let mut b = vec![0u8; len];
        r.read_exact(&mut b)?;
        return Ok(b);
    }
    if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        // The proxy forwards the head as it is, so a chunked body goes on as one chunk.
        let mut out = Vec::new();
        loop {
            let mut size = String::new();
            r.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            r.read_exact(&mut chunk)?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
        if out.is_empty() {
            return Ok(b"0\r\n\r\n".to_vec());
        }
        let mut framed = format!("{:x}\r\n", out.len()).into_bytes();
        framed.extend_from_slice(&out);
        framed.extend_from_slice(b"\r\n0\r\n\r\n");
        return Ok(framed);
    }
    let mut b = Vec::new();
    r.read_to_end(&mut b)?;
    Ok(b)
}
