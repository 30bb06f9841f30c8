//! Keys a listing cannot name: a key with a `..` or `.` segment or an empty one (`a/../b`,
//! `a//b`) is legal in S3, but object_store's path type refuses it, and its list parser fails the
//! whole page on the first such key (issue 50: one `../` key failed a whole `list_files`). The
//! HTTP layer (`remote/retry.rs`) passes every listing answer (S3's and GCS's `ListBucketResult`,
//! Azure's `EnumerationResults`) through [`filter`], which leaves such entries out and records
//! their names: [`super::list`] never returns them, so no key it returns leads out of its prefix,
//! and [`super::stats`] counts them (`keys_left_out`, the first names in [`left_out_keys`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use object_store::path::Path;

/// Keys left out of listings so far.
pub(super) static LEFT_OUT: AtomicU64 = AtomicU64::new(0);

/// The first left-out keys kept by name.
const NAMED: usize = 16;
static NAMES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The first keys left out of listings in this process (up to 16), each as
/// `host/bucket: key`.
pub fn left_out_keys() -> Vec<String> {
    NAMES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Whether a request is a listing whose answer goes through [`filter`]: S3's and GCS's
/// `ListObjectsV2` (`list-type=2`), Azure's `comp=list`.
pub(super) fn is_listing(method: &str, query: Option<&str>) -> bool {
    method == "GET"
        && query.is_some_and(|q| q.split('&').any(|p| p == "list-type=2" || p == "comp=list"))
}

/// `body` without the entries whose key object_store cannot parse; `None` when it has none (the
/// answer goes on untouched). `place` (`host/bucket`) names the store in [`left_out_keys`].
pub(super) fn filter(body: &[u8], place: &str) -> Option<Bytes> {
    let text = std::str::from_utf8(body).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut dropped = Vec::new();
    // S3 / GCS: <Contents><Key>k</Key>..</Contents>, <CommonPrefixes><Prefix>p</Prefix>..;
    // Azure: <Blob><Name>k</Name>..</Blob>, <BlobPrefix><Name>p</Name>..</BlobPrefix>.
    const ENTRIES: [(&str, &str); 4] = [
        ("Contents", "Key"),
        ("CommonPrefixes", "Prefix"),
        ("Blob", "Name"),
        ("BlobPrefix", "Name"),
    ];
    loop {
        let next = ENTRIES
            .iter()
            .filter_map(|&(entry, key)| {
                let open = format!("<{entry}>");
                rest.find(&open).map(|i| (i, entry, key))
            })
            .min_by_key(|&(i, _, _)| i);
        let Some((start, entry, key)) = next else {
            out.push_str(rest);
            break;
        };
        let close = format!("</{entry}>");
        let Some(len) = rest[start..].find(&close) else {
            out.push_str(rest);
            break;
        };
        let end = start + len + close.len();
        let block = &rest[start..end];
        let name = tag(block, key).map(unescape);
        out.push_str(&rest[..start]);
        match name {
            Some(k) if Path::parse(&k).is_err() => dropped.push(k),
            _ => out.push_str(block),
        }
        rest = &rest[end..];
    }
    if dropped.is_empty() {
        return None;
    }
    LEFT_OUT.fetch_add(dropped.len() as u64, Ordering::Relaxed);
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    for k in dropped {
        if names.len() < NAMED {
            names.push(format!("{place}: {k}"));
        }
    }
    Some(Bytes::from(out))
}

/// The text of the first `<name>...</name>` in `block`.
fn tag<'a>(block: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let i = block.find(&open)? + open.len();
    let j = block[i..].find(&format!("</{name}>"))?;
    Some(&block[i..i + j])
}

/// XML's five entities and numeric character references.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let Some(semi) = after.find(';') else {
            out.push_str(after);
            return out;
        };
        let ent = &after[1..semi];
        let c = match ent {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => ent
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| ent.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => out.push(c),
            None => out.push_str(&after[..=semi]),
        }
        rest = &after[semi + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unparsable_keys_are_left_out_and_the_rest_kept_as_it_was() {
        let body = "<ListBucketResult><Contents><Key>ds/a.bin</Key><Size>1</Size></Contents>\
                    <Contents><Key>ds/a/../../evil.bin</Key><Size>2</Size></Contents>\
                    <Contents><Key>ds/b&amp;c.bin</Key></Contents>\
                    <Contents><Key>ds//x</Key></Contents><Name>b</Name></ListBucketResult>";
        let before = LEFT_OUT.load(Ordering::Relaxed);
        let got = filter(body.as_bytes(), "host/b").unwrap();
        assert_eq!(
            std::str::from_utf8(&got).unwrap(),
            "<ListBucketResult><Contents><Key>ds/a.bin</Key><Size>1</Size></Contents>\
             <Contents><Key>ds/b&amp;c.bin</Key></Contents><Name>b</Name></ListBucketResult>"
        );
        assert!(LEFT_OUT.load(Ordering::Relaxed) >= before + 2);
        assert!(left_out_keys().contains(&"host/b: ds/a/../../evil.bin".to_string()));
        let clean = "<ListBucketResult><Contents><Key>ds/a.bin</Key></Contents></ListBucketResult>";
        assert_eq!(filter(clean.as_bytes(), "host/b"), None, "untouched");
        assert_eq!(unescape("a&lt;&#47;&#x2F;&zz;b"), "a<//&zz;b");
        assert!(is_listing("GET", Some("list-type=2&prefix=ds%2F")));
        assert!(!is_listing("GET", Some("x-id=GetObject")) && !is_listing("HEAD", None));
    }
}
