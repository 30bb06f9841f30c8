//! Telling URLs from paths, and splitting them into a store and a key.

/// Schemes read through the object store backends.
const SCHEMES: &[&str] = &["s3", "s3a", "gs", "az", "abfs", "abfss", "http", "https"];

/// The lower-cased scheme of `s` (`"s3"` for `S3://b/k`); `""` when `s` has no `://`.
pub fn scheme(s: &str) -> String {
    s.split_once("://")
        .map_or("", |(scheme, _)| scheme)
        .to_ascii_lowercase()
}

/// Whether `s` is an object-store URL (`s3://`, `gs://`, `az://`, `abfs(s)://`, `http(s)://`).
pub fn is_url(s: &str) -> bool {
    SCHEMES.contains(&scheme(s).as_str())
}

/// `(store, key)` of a URL: the store is `scheme://bucket` (`scheme://host[:port]` for HTTP), the
/// key the rest without its leading `/`. `None` for a string that is no URL.
pub fn split_url(url: &str) -> Option<(&str, &str)> {
    if !is_url(url) {
        return None;
    }
    let after = url.find("://")? + 3;
    match url[after..].find('/') {
        Some(i) => Some((&url[..after + i], &url[after + i + 1..])),
        None => Some((url, "")),
    }
}

/// `base` joined with `name` by one `/` (a URL or a local path in string form).
pub fn join(base: &str, name: &str) -> String {
    if base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_store_and_key() {
        assert!(is_url("s3://b/k") && is_url("HTTPS://h/x") && is_url("gs://b"));
        assert!(!is_url("/data/x") && !is_url("data/s3:/x") && !is_url("file:///x"));
        assert_eq!(split_url("s3://b/a/b.rec"), Some(("s3://b", "a/b.rec")));
        assert_eq!(
            split_url("http://127.0.0.1:9/x"),
            Some(("http://127.0.0.1:9", "x"))
        );
        assert_eq!(split_url("gs://b"), Some(("gs://b", "")));
        assert_eq!(split_url("/tmp/x"), None);
        assert_eq!(join("s3://b/d", "m.json"), "s3://b/d/m.json");
        assert_eq!(join("s3://b/d/", "m.json"), "s3://b/d/m.json");
        // A URL survives `Path::join`, which the readers use to name files in a folder.
        let p = std::path::Path::new("s3://b/d").join("manifest.json");
        assert_eq!(p.to_str(), Some("s3://b/d/manifest.json"));
    }
}
