//! Endpoint checks before any client is built: an endpoint option, an endpoint from the
//! environment or a profile, or an `http(s)://` store's own URL that the HTTP stack cannot take is
//! an `InvalidArgumentError` naming where it came from and the value. (object_store hands its
//! URL to reqwest with an `unwrap`: a port past 65535 or a bad IPv4 address panicked inside a
//! request, issue 50.)

use std::net::{Ipv4Addr, Ipv6Addr};

use stokehold_core::{Error, Result};

/// Whether the option `key` names a URL that [`check`] must accept: an endpoint, a base URL or
/// a proxy.
pub fn is_url_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("endpoint") && !k.starts_with("azure_use") && k != "aws_use_fips_endpoint"
        || k.ends_with("base_url")
        || k == "proxy_url"
        || k == "url"
}

/// Checks `value`, given as `source` (`storage option aws_endpoint`, `AWS_ENDPOINT_URL`), as an
/// absolute URL the client can connect to: `http`/`https` (a proxy may be `socks5(h)` too), a
/// host (a name, an IPv4 address or `[IPv6]`), an optional port 1-65535, a path of URL
/// characters, no user name or password, query or fragment.
pub fn check(source: &str, value: &str) -> Result<()> {
    let proxy = source.to_ascii_lowercase().contains("proxy");
    why(value, proxy).map_err(|why| {
        Error::invalid(format!(
            "{source} = {:?}: not a valid endpoint URL ({why})",
            redact(value)
        ))
    })
}

/// `value` with a user name and password (`http://user:secret@host`) left out.
fn redact(value: &str) -> String {
    match value.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            match rest[..end].rfind('@') {
                Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
                None => value.to_string(),
            }
        }
        None => value.to_string(),
    }
}

fn why(value: &str, proxy: bool) -> std::result::Result<(), String> {
    let (scheme, rest) = value
        .split_once("://")
        .ok_or("no scheme: write http://host:port or https://host")?;
    let scheme = scheme.to_ascii_lowercase();
    let allowed: &[&str] = if proxy {
        &["http", "https", "socks5", "socks5h"]
    } else {
        &["http", "https"]
    };
    if !allowed.contains(&scheme.as_str()) {
        return Err(format!("the scheme must be one of {}", allowed.join(", ")));
    }
    if rest.contains(['?', '#']) {
        return Err("a query or fragment has no place in an endpoint".into());
    }
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    if authority.contains('@') {
        return Err("credentials go in their own options, not in the URL".into());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or("an IPv6 address without its ']'")?;
        addr.parse::<Ipv6Addr>()
            .map_err(|_| format!("{addr:?} is not an IPv6 address"))?;
        match after {
            "" => (addr, None),
            p => (
                addr,
                Some(p.strip_prefix(':').ok_or("junk after the IPv6 address")?),
            ),
        }
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if !authority.starts_with('[') {
        check_host(host)?;
    }
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return Err(format!("port {p:?} is not a number from 1 to 65535")),
        }
    }
    let bad = path
        .bytes()
        .find(|&b| !(b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%".contains(&b)));
    if let Some(b) = bad {
        return Err(format!("{:?} in the path", b as char));
    }
    Ok(())
}

/// A host name (letters, digits, `-`, `_`, non-empty labels) or a dotted IPv4 address: a name
/// whose last label is a number is read as an address, as URL parsers do.
fn check_host(host: &str) -> std::result::Result<(), String> {
    if let Some(b) = host
        .bytes()
        .find(|&b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.'))
    {
        return Err(format!("{:?} in the host {host:?}", b as char));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.split('.').any(str::is_empty) {
        return Err(format!("an empty label in the host {host:?}"));
    }
    let last = host.rsplit('.').next().unwrap_or("");
    if last.bytes().all(|b| b.is_ascii_digit()) && host.parse::<Ipv4Addr>().is_err() {
        return Err(format!("{host:?} is not an IPv4 address"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_endpoints_pass_and_bad_ones_are_named() {
        for ok in [
            "http://127.0.0.1:9000",
            "https://minio.lab:9000/",
            "http://[::1]:5000",
            "https://s3.us-east-1.amazonaws.com",
            "http://localhost/prefix/x",
            "https://my_bucket.r2.dev",
        ] {
            check("storage option aws_endpoint", ok).unwrap();
        }
        for bad in [
            "127.0.0.1:9000",
            "ftp://host",
            "http://",
            "http://host:99999",
            "http://host:0",
            "http://host:",
            "http://host:9x",
            "http://999.1.1.1",
            "http://1.2.3",
            "http://a..b",
            "http://exa mple",
            "http://[::1",
            "http://[zz]:1",
            "http://host/a b",
            "http://host?x=1",
            "http://user:pw@host",
        ] {
            let e = check("storage option aws_endpoint", bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("aws_endpoint"), "{bad}: {e}");
            assert!(!e.contains("pw@"), "the password stays out: {e}");
        }
        check("storage option proxy_url", "socks5://127.0.0.1:1080").unwrap();
    }
}
